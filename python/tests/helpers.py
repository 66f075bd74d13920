"""Torch-free helpers shared by the CPU tests."""

import copy
import json
import os
import textwrap

from fixture_manifests import SPLIT_GRID_Y, SPLIT_ROWS, backward_param

EXAMPLE = {
    "version": 1,
    "name": "fa_fwd_d128_bf16_causal_sm80",
    "kind": "forward",
    "chip": "sm_80",
    "entry": "fa_fwd_kernel",
    "dtype": "bf16", "head_dim": 128, "value_head_dim": 128,
    "causal": True, "window": [-1, -1], "softcap": None, "scale": 0.08838834764831845,
    "block_q": 128, "block_kv": 64, "warps": 4, "stages": 2,
    "threads": 128,
    "dynamic_shared_memory": 98304,
    "grid": ["ceildiv(Nq, 128)", "Hq", "B"],
    "params": [
        {"name": "q", "type": "memref", "rank": 4, "dtype": "bf16", "dims": ["B", "Hq", "Nq", "D"]},
        {"name": "k", "type": "memref", "rank": 4, "dtype": "bf16", "dims": ["B", "Hkv", "Nk", "D"]},
        {"name": "v", "type": "memref", "rank": 4, "dtype": "bf16", "dims": ["B", "Hkv", "Nk", "Dv"]},
        {"name": "out", "type": "memref", "rank": 4, "dtype": "bf16", "dims": ["B", "Hq", "Nq", "Dv"]},
        {"name": "lse", "type": "memref", "rank": 3, "dtype": "f32", "dims": ["B", "Hq", "Nq"]},
    ],
}


# The kernels of fa-compile's backward manifests (the contract), in launch order.
BACKWARD_KERNELS = {
    False: [("fa_bwd_preprocess_kernel", ["ceildiv(Nq, 128)", "Hq", "B"], 128, 0,
             ["out", "dout", "delta", "dq_accum"]),
            ("fa_bwd_kernel", ["ceildiv(Nk, 64)", "Hq", "B"], 256, 147456,
             ["q", "k", "v", "dout", "lse", "delta", "dq_accum", "dk", "dv"]),
            ("fa_bwd_dq_convert_kernel", ["ceildiv(Nq, 64)", "Hq", "B"], 128, 0,
             ["dq_accum", "dq"])],
    True: [("fa_bwd_preprocess_kernel", ["ceildiv(Nq, 128)", "Hq", "B"], 128, 0,
            ["out", "dout", "delta"]),
           ("fa_bwd_kernel", ["ceildiv(Nk, 64)", "Hkv", "B"], 256, 147456,
            ["q", "k", "v", "dout", "lse", "delta", "dk", "dv"]),
           ("fa_bwd_dq_kernel", ["ceildiv(Nq, 64)", "Hq", "B"], 256, 98304,
            ["q", "k", "v", "dout", "lse", "delta", "dq"])],
    # Deterministic on the warp-specialized kernel (fa.dq_accumulation =
    # "ordered"): the fast mode's launches plus the dq_order semaphores.
    "ordered": [("fa_bwd_preprocess_kernel", ["ceildiv(Nq, 128)", "Hq", "B"], 128, 0,
                 ["out", "dout", "delta", "dq_accum", "dq_order"]),
                ("fa_bwd_kernel", ["ceildiv(Nk, 128)", "Hkv", "B"], 384, 197632,
                 ["q", "k", "v", "dout", "lse", "delta", "dq_accum", "dq_order", "dk", "dv"]),
                ("fa_bwd_dq_convert_kernel", ["ceildiv(Nq, 128)", "Hq", "B"], 128, 0,
                 ["dq_accum", "dq"])],
}


def backward_example(deterministic=False, name=None, dtype="bf16", d=128, causal=True,
                     window=(-1, -1), softcap=None, scale=None, chip="sm_90a",
                     runtime_scalars=False, ordered=False, split_group=False):
    """A backward manifest as fa-compile --kind=backward writes it; with
    `runtime_scalars`, a None scale (and a "runtime" softcap) are kernel
    parameters as in today's fa-compile, else the scale is built in (the
    default 1/sqrt(D) for None). `ordered` (deterministic): the
    warp-specialized kernel's form, dQ added in a fixed order through the
    i32 dq_order semaphores, no dQ kernel. `split_group` (the fast mode):
    the warp-specialized causal kernel's split GQA group, its zeroed dK / dV
    accumulators and their conversion kernel."""
    # Run-time scalars (scale None, softcap "runtime") lead the parameters of
    # the kernels that use them, as fa-compile writes them.
    def scalars(entry):
        out = []
        if not runtime_scalars:
            return out
        if softcap == "runtime" and entry in ("fa_bwd_kernel", "fa_bwd_dq_kernel"):
            out.append({"name": "softcap", "type": "f32", "role": "softcap", "value": "softcap"})
        if scale is None and entry != "fa_bwd_preprocess_kernel":
            out.append({"name": "scale", "type": "f32", "role": "scale", "value": "scale"})
        return out
    kernels = [{"entry": e, "grid": list(g), "block": [t, 1, 1], "threads": t,
                "dynamic_shared_memory": smem,
                "params": scalars(e) + [backward_param(n, dtype) for n in names]}
               for e, g, t, smem, names
               in BACKWARD_KERNELS["ordered" if deterministic and ordered else deterministic]]
    workspace = [{"name": "delta", "dtype": "f32", "dims": ["B", "Hq", "Nq"]}]
    if not deterministic or ordered:
        workspace.append({"name": "dq_accum", "dtype": "f32", "dims": ["B", "Hq", "Nq", "D"]})
    if deterministic and ordered:
        workspace.append({"name": "dq_order", "dtype": "i32",
                          "dims": ["B", "Hq", "ceildiv(Nq, 64)"]})
    if split_group and not deterministic:
        key = next(k for k in kernels if k["entry"] == "fa_bwd_kernel")
        key["grid"][1] = SPLIT_GRID_Y
        key["params"] += [backward_param(n, dtype) for n in ("dk_accum", "dv_accum")]
        kernels.append({"entry": "fa_bwd_dkv_convert_kernel",
                        "grid": [f"max(ceildiv({SPLIT_ROWS}, 128), 1)", "Hkv", "B"],
                        "block": [128, 1, 1], "threads": 128, "dynamic_shared_memory": 0,
                        "params": [backward_param(n, dtype)
                                   for n in ("dk_accum", "dk", "dv_accum", "dv")]})
        for n, dim in (("dk_accum", "D"), ("dv_accum", "Dv")):
            workspace.append({"name": n, "dtype": "f32", "init": "zero",
                              "dims": ["B", "Hkv", SPLIT_ROWS, dim]})
    if name is None:
        name = (f"fa_bwd_d{d}_{dtype}{'_causal' if causal else ''}"
                f"{'_det' if deterministic else ''}_{chip.replace('_', '')}")
    return {
        "version": 1, "name": name, "kind": "backward", "chip": chip,
        "dtype": dtype, "head_dim": d, "value_head_dim": d, "causal": causal,
        "window": list(window), "softcap": softcap,
        "scale": scale if scale is not None or runtime_scalars else d ** -0.5,
        "block_q": 64, "block_kv": 64, "warps": 8,
        "deterministic": deterministic, "workspace": workspace, "kernels": kernels,
    }


def backward_ptx(manifest, target=None, drop=(), nparams=None):
    """PTX text with one entry per kernel of a backward manifest, each with
    the parameter count its params expand to (`nparams`: {entry: count}
    overrides; `drop`: entries to leave out)."""
    import textwrap as _tw
    body = [_tw.dedent(f"""\
        //
        // Generated by LLVM NVPTX Back-End
        //

        .version 8.4
        .target {target or manifest["chip"]}
        .address_size 64
        """)]
    for k in manifest["kernels"]:
        e = k["entry"]
        if e in drop or any(f".entry {e}(" in b for b in body):
            continue
        types = []
        for p in k["params"]:
            if p["type"] == "memref":
                types += ["u64"] * (3 + 2 * p["rank"])
            else:
                types.append({"f32": "f32", "i32": "u32", "u32": "u32"}.get(p["type"], "u64"))
        if e in (nparams or {}):
            types = ["u64"] * nparams[e]
        params = ",\n".join(f"\t.param .{ty} {e}_param_{i}" for i, ty in enumerate(types))
        body.append(f"\n.visible .entry {e}(\n{params}\n)\n.maxntid {k['threads']}, 1, 1\n"
                    "{\n\tret;\n}\n")
    return "".join(body)


def write_backward_kernel(dirpath, manifest, ptx=None):
    """Writes <name>.json and its PTX (all entries) into dirpath."""
    return write_kernel(dirpath, manifest, ptx=ptx if ptx is not None else backward_ptx(manifest))


def example(**overrides):
    m = copy.deepcopy(EXAMPLE)
    for k, v in overrides.items():
        if v is None and k in ("softcap", "scale"):
            m[k] = None
        elif v is _DELETE:
            m.pop(k, None)
        else:
            m[k] = v
    return m


_DELETE = object()
DELETE = _DELETE


def fake_ptx(entry="fa_fwd_kernel", nparams=None, target="sm_80", sizes=None, extra=""):
    """PTX text in LLVM's NVPTX style with `nparams` 8-byte params (or
    explicit sizes)."""
    if sizes is None:
        sizes = [8] * (nparams if nparams is not None else 53)
    tmap = {8: ".u64", 4: ".u32", 2: ".u16"}
    params = []
    for i, s in enumerate(sizes):
        ptr = " .ptr .global .align 16" if (s == 8 and i % 11 in (0, 1)) else ""
        params.append(f"\t.param {tmap[s]}{ptr} {entry}_param_{i}")
    return textwrap.dedent(f"""\
        //
        // Generated by LLVM NVPTX Back-End
        //

        .version 8.0
        .target {target}
        .address_size 64

        \t// .globl\t{entry}
        .visible .entry {entry}(
        """) + ",\n".join(params) + f"\n)\n{extra}{{\n\tret;\n}}\n"


def write_kernel(dirpath, manifest, ptx=None, nparams=None):
    """Writes <name>.json and <name>.ptx into dirpath; returns the json path."""
    os.makedirs(dirpath, exist_ok=True)
    name = manifest["name"]
    jp = os.path.join(dirpath, name + ".json")
    with open(jp, "w") as f:
        json.dump(manifest, f)
    if ptx is None:
        sizes = None
        if nparams is None and "params" in manifest:
            sizes = param_sizes(manifest["params"])
        ptx = fake_ptx(manifest.get("entry", "fa_fwd_kernel"), nparams,
                       target=manifest.get("chip", "sm_80"), sizes=sizes)
    if ptx is not False:
        with open(os.path.join(dirpath, manifest.get("ptx", name + ".ptx")), "w") as f:
            f.write(ptx)
    return jp


def forward_manifest(name, chip="sm_80", dtype="bf16", d=128, causal=False,
                     window=(-1, -1), softcap=None, scale=None):
    """A forward manifest as fa-compile writes it: scale None (and softcap
    "runtime") are run-time parameters, listed first as fa-compile does; a
    number is built into the kernel (an IR file's constant)."""
    m = example(name=name, chip=chip, dtype=dtype, head_dim=d, value_head_dim=d,
                causal=causal, window=window if window == "runtime" else list(window),
                softcap=softcap, scale=scale)
    for p in m["params"]:
        if p["name"] != "lse":
            p["dtype"] = dtype
    scalars = [n for n, v in (("softcap", softcap), ("scale", scale))
               if (v is None) == (n == "scale") and (n == "scale" or v == "runtime")]
    m["params"] = [{"name": n, "type": "f32", "role": n, "value": n}
                   for n in sorted(scalars, reverse=True)] + m["params"]
    if window == "runtime":   # the sizes follow the f32 scalars, as in fa-compile
        m["params"][len(scalars):len(scalars)] = [
            {"name": n, "type": "i64", "role": n, "value": n}
            for n in ("window_left", "window_right")]
    return m


def param_sizes(params):
    """The PTX parameter sizes the manifest params expand to."""
    sizes = []
    for p in params:
        if p["type"] == "memref":
            sizes += [8] * (3 + 2 * p["rank"])
        else:
            sizes.append(4 if p["type"] in ("f32", "i32", "u32") else 8)
    return sizes


class FakeTensor:
    """Just enough of torch.Tensor for _launch.memref_from_tensor."""

    def __init__(self, base, shape, strides, dtype="torch.bfloat16", offset=0, elsize=2):
        self.base = base
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self.dtype = dtype
        self.offset = offset
        self.elsize = elsize

    def data_ptr(self):
        return self.base + self.offset * self.elsize

    def stride(self):
        return self._strides

    def untyped_storage(self):
        base = self.base

        class _S:
            def data_ptr(self):
                return base
        return _S()

    def transpose12(self):
        s, t = list(self.shape), list(self._strides)
        s[1], s[2] = s[2], s[1]
        t[1], t[2] = t[2], t[1]
        return FakeTensor(self.base, s, t, self.dtype, self.offset, self.elsize)


def contiguous_strides(shape):
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))
