"""A fake GPU for the torch-side tests on the CPU: the fake libcuda of
test_cuda_fake.py whose cuLaunchKernel runs the kernel in PyTorch on the
memory its parameters point at.

CPU tensors stand for device memory: `install()` makes flashmlir treat CPU
tensors as kernel tensors (KERNEL_DEVICE_TYPE = "cpu"), so a call goes
through the real launch path: the plan cache, the registry, loading (the PTX
is checked against the manifest, the driver's parameter sizes against the
PTX), packing, and one cuLaunchKernel per kernel with the packed `void*[]`.
The fake decodes those bytes with the manifest's parameter list (memrefs
into tensors at the pointers they carry, with their sizes and strides;
scalars by type) and runs the named kernel: the forward with the PyTorch
reference, the backward kernels with FlashAttention's formulas; kernels
with score_mod / mask_mod evaluate the traced regions their PTX carries on
the captured tensors the launch got (the backward: P of the modified
scores, dS times the score_mod's derivative, as the real kernels). Every
launch is logged.

Kernels are made on demand by `GenRegistry` (the registry's compile step
writes a manifest and a matching PTX stub), with scalar parameters mixed
into the memrefs in an unusual order, as a future manifest may have them;
with `tensormaps`, the forward kernels also take TMA tensor maps of q, k
and v (the backward's key-block kernel those of q, k, v, dout and of its
dq_accum workspace buffer), which every launch checks against the memrefs
it got (the fake driver's maps are their encoding arguments,
test_cuda_fake.decode_fake_map).
"""

import ctypes
import hashlib
import json
import math
import os

import torch

from flashmlir import _cuda, _interface, _kernels, _modifiers, _reference
from flashmlir import _manifest as M
from flashmlir import _tensormap as T

from helpers import backward_example
from test_cuda_fake import FakeCuda, decode_fake_map

TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}


def tensor_at(ptr, sizes, strides, dtype):
    """A tensor aliasing the (CPU) memory at `ptr` with these sizes/strides."""
    tdt = TORCH_DTYPES[dtype]
    if any(s == 0 for s in sizes):
        return torch.empty(sizes, dtype=tdt)
    es = torch.empty((), dtype=tdt).element_size()
    n = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
    buf = (ctypes.c_byte * (n * es)).from_address(ptr)
    flat = torch.frombuffer(buf, dtype=torch.uint8).view(tdt)
    return flat.as_strided(tuple(sizes), tuple(strides))


class EmulatingCuda(FakeCuda):
    """FakeCuda with one module handle per loaded PTX, entries' parameter
    sizes read from the PTX, and launches that compute."""

    def __init__(self, registry):
        super().__init__()
        self.registry = registry
        self.modules = {}          # handle -> (manifest name, PtxInfo)
        self.handles = {}          # function handle -> (module, entry)
        self.ran = []              # (manifest name, entry) of each launch
        self.decoded = []          # {param: value} of each launch
        self.calls = []            # (driver function name) of every call, see count()
        self.skip = set()          # entries whose launches compute nothing
        self.counters = []         # the tile counter at each dynamic-scheduler launch
        self.regions = {}          # manifest name -> (score_mod, mask_mod) region text
        self.key_ranges = []       # the key ranges tensor of each launch with them
        self.query_ranges = []     # the query ranges tensor of each backward launch
        self.split_groups = 0      # key-block launches that split their GQA group

    def _cuModuleLoadDataEx(self, pmod, image, nopts, opts, vals):
        text = ctypes.string_at(image).decode()
        self.loaded_images.append(text)
        name = text.split("// manifest: ", 1)[1].split()[0]
        if _MODIFIERS_MARK in text:
            self.regions[name] = modifier_regions(text.split(_MODIFIERS_MARK, 1)[1])
        h = 0x2000 + 0x100 * len(self.modules)
        self.modules[h] = (name, M.parse_ptx(text))
        self.events.append(("load", name))
        pmod[0] = h

    def _cuModuleGetFunction(self, pf, mod, name):
        h = 0x3000 + len(self.handles)
        self.handles[h] = (mod, name.decode())
        self.events.append(("getfn", mod, name))
        pf[0] = h

    def _sizes(self, fn):
        mod, entry = self.handles[fn]
        return self.modules[mod][1].entries[entry].param_sizes

    def _cuFuncGetParamInfo(self, fn, i, poff, psize):
        sizes = self._sizes(fn)
        if i >= len(sizes):
            return 1
        poff[0] = sum(sizes[:i])
        psize[0] = sizes[i]

    def _cuCtxGetCurrent(self, p):
        self.calls.append("cuCtxGetCurrent")
        p[0] = self.current

    def _cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append("cuLaunchKernel")
        mod, entry = self.handles[fn]
        name = self.modules[mod][0]
        spec = self.registry.spec_named(name)
        launch = next(k for k in spec.kernels if k.entry == entry)
        raw = [ctypes.string_at(params[i], size) for i, size in enumerate(self._sizes(fn))]
        args, maps, i = {}, [], 0
        for p in launch.params:
            if p.is_tensormap:
                assert params[i] % 64 == 0, (p.name, hex(params[i]))
                maps.append((p, decode_fake_map(raw[i])))
                i += 1
            elif p.is_memref:
                vals = [int.from_bytes(r, "little", signed=True) for r in raw[i:i + 3 + 2 * p.rank]]
                alloc, aligned, offset = vals[:3]
                sizes, strides = vals[3:3 + p.rank], vals[3 + p.rank:]
                assert offset == 0 and aligned % 16 == 0 and alloc <= aligned, (p.name, vals)
                args[p.name] = tensor_at(aligned, sizes, strides, p.dtype)
                i += 3 + 2 * p.rank
            else:
                r = raw[i]
                if p.type == "f32":
                    v = ctypes.c_float.from_buffer_copy(r).value
                elif p.type == "f64":
                    v = ctypes.c_double.from_buffer_copy(r).value
                else:
                    v = int.from_bytes(r, "little", signed=p.type[0] == "i")
                args[p.name] = v
                i += 1
        for p, rec in maps:
            check_map(p, rec, args[p.tensor])
            args[p.name] = rec
        self.decoded.append(args)
        self.launches.append(dict(fn=fn, name=name, entry=entry, grid=(gx, gy, gz),
                                  block=(bx, by, bz), smem=smem, stream=stream, ctx=self.current,
                                  raw=raw))
        self.ran.append((name, entry))
        if entry in self.skip:
            return
        if spec.kv_splits is not None:
            getattr(self, "_run_split_" + entry)(spec, args)
        else:
            getattr(self, "_run_" + ("forward" if spec.kind == "forward" else entry))(spec, args)

    # -- the kernels ---------------------------------------------------------------------
    def _scalars(self, spec, args):
        """mask, scale, softcap: a run-time scalar (the manifest's null scale,
        "runtime" softcap) is the parameter the launch carried, which must be
        there; a built-in one is the manifest's, equal to the parameter if any."""
        if spec.window == M.RUNTIME:
            # The sizes are the parameters the launch carried; a negative one
            # is unbounded, and causal fixes the right one at 0.
            # fa-compile's causal window kernels take the left size only.
            sizes = ("window_left",) if spec.causal else ("window_left", "window_right")
            assert all(n in args for n in sizes), (
                f"{spec.name}: no window parameters were passed")
            assert not (spec.causal and "window_right" in args), (
                f"{spec.name}: a causal kernel took a right window size")
            left = max(int(args["window_left"]), -1)
            mask = (left, 0 if spec.causal else max(int(args["window_right"]), -1))
        else:
            mask = spec.mask
        # fa-compile's forward kernels take the host's factors of the scale
        # and softcap (manifest.score_scalars); recover the values from them.
        log2e = M.score_scalars(1.0, None)["log2e_scale"]
        if "log2e_softcap" in args:
            args.setdefault("softcap", args["log2e_softcap"] / log2e)
        if "scale_over_softcap" in args:
            args.setdefault("scale", args["scale_over_softcap"] * args["softcap"])
        if "log2e_scale" in args:
            args.setdefault("scale", args["log2e_scale"] / log2e)
        if spec.scale is None:
            assert "scale" in args, f"{spec.name}: no scale parameter was passed"
            scale = args["scale"]
        else:
            scale = spec.scale
            if "scale" in args:
                assert math.isclose(args["scale"], scale, rel_tol=1e-6), (args["scale"], scale)
        if spec.softcap == M.RUNTIME:
            assert "softcap" in args, f"{spec.name}: no softcap parameter was passed"
            softcap = args["softcap"]
        else:
            softcap = spec.softcap
            if "softcap" in args:
                assert math.isclose(args["softcap"], softcap or 0.0, rel_tol=1e-6)
        if "wl" in args:
            assert (args["wl"], args["wr"]) == mask, ((args["wl"], args["wr"]), mask)
        return mask, scale, softcap

    def _run_forward(self, spec, a):
        if spec.form != M.DENSE and "tile_counter" not in a:
            return getattr(self, "_run_" + spec.form)(spec, a)
        if "tile_counter" in a:
            # The dynamic tile scheduler's counter: zero at every launch
            # (the caller's "init": "zero"); the kernel leaves it at the
            # tiles it handed out, as the real one does.
            self.counters.append(int(a["tile_counter"][0]))
            a["tile_counter"] += 1000
        if spec.form != M.DENSE:
            return getattr(self, "_run_" + spec.form)(spec, a)
        mask, scale, softcap = self._scalars(spec, a)
        if spec.modifiers is not None:
            out, lse = self._modified(spec, a, mask, scale, softcap)
        else:
            out, lse = _reference.attention(a["q"], a["k"], a["v"], mask, scale, softcap)
        a["out"].copy_(out)
        a["lse"].copy_(lse)

    def _region_fns(self, spec, a):
        """score_mod, mask_mod (None: absent) of the traced regions the
        kernel's PTX carries (what fa-compile compiled), evaluated on the
        captured tensors the launch got (capture<n>)."""
        from test_modifiers import evaluate_region
        caps = [a[c.name] for c in spec.captures]
        score, mask_text = self.regions[spec.name]
        names = ("%b", "%h", "%i", "%j")
        score_mod = mask_mod = None
        if score is not None:
            def score_mod(s, *idx):
                return evaluate_region(score, dict(zip(("%s",) + names, (s,) + idx)), caps)
        if mask_text is not None:
            def mask_mod(*idx):
                return evaluate_region(mask_text, dict(zip(names, idx)), caps)
        return score_mod, mask_mod

    def _modified(self, spec, a, mask, scale, softcap):
        score_mod, mask_mod = self._region_fns(spec, a)
        rows = spec.modifiers.key_range_rows
        if rows is not None:
            # The kernel visits the keys of each row group's range only
            # (the real one: whole key blocks; the same where the ranges
            # hold every key the mask shows).
            ranges = a[M.KEY_RANGES].long()
            self.key_ranges.append(a[M.KEY_RANGES])
            inner = mask_mod

            def mask_mod(b, h, i, j):
                # Keys outside the first range are hidden; the mask_mod
                # hides nothing inside the second (both whole key blocks
                # in the real kernel: the same where the ranges are right).
                r = ranges[b, h, i // rows]
                seen = (j >= r[..., 0]) & (j < r[..., 1])
                full = (j >= r[..., 2]) & (j < r[..., 3])
                return seen if inner is None else seen & (full | inner(b, h, i, j))
        return _reference.attention_modified(a["q"], a["k"], a["v"], mask, scale, softcap,
                                             score_mod, mask_mod)

    def _run_split_fa_fwd_kernel(self, spec, a):
        """The partials of S chunks of whole 64-key blocks: chunk s of head h
        at head h * S + s (S read from the workspace's size, as the merge
        does; the kernels cut the visible range, this the whole, which
        merges to the same result)."""
        mask, scale, softcap = self._scalars(spec, a)
        q, k, v = a["q"], a["k"], a["v"]
        b, h, nq = q.shape[:3]
        splits = a["out_partial"].shape[1] // h
        assert a["size_2"] > 0, a["size_2"]
        nk, bc = k.shape[2], spec.block_kv
        per = -(-(-(-nk // bc)) // splits) * bc
        s, _, _, _ = _reference._scores(q, k, mask, scale, softcap)
        vf = v.float().repeat_interleave(h // k.shape[1], dim=1)
        parts = a["out_partial"].unflatten(1, (h, splits))
        lses = a["lse_partial"].unflatten(1, (h, splits))
        for c in range(splits):
            lo = min(c * per, nk)
            hi = min(lo + per, nk)
            chunk = s[..., lo:hi]
            lse = torch.logsumexp(chunk, -1) if hi > lo else torch.full(
                (b, h, nq), -math.inf)
            p = torch.exp(chunk - lse[..., None]).nan_to_num(0.0)
            parts[:, :, c].copy_(torch.matmul(p, vf[:, :, lo:hi]))
            lses[:, :, c].copy_(torch.where(torch.isfinite(lse), lse, math.inf))

    def _run_varlen(self, spec, a):
        """Sequence b (grid z) of cu_seqlens: its query rows of the grid's x
        blocks of block_q (max_seqlen_q's; later rows stay unwritten, as on
        the GPU), its mask bottom-right aligned per sequence."""
        gx, gy, gz = self.launches[-1]["grid"]
        q, k, v = a["q"], a["k"], a["v"]
        cq, ck = a["cu_seqlens_q"].tolist(), a["cu_seqlens_k"].tolist()
        if "tile_counter" in a:
            # The dynamic scheduler's grid is min(tiles, SMS) blocks: the
            # tiles are (query block, head, sequence) of max_seqlen_q's
            # blocks, which the fake reads back from the tile count.
            gz, gy = len(cq) - 1, q.shape[0]
            gx = 1 << 30
        assert gz == len(cq) - 1 == len(ck) - 1 and gy == q.shape[0], (self.launches[-1], cq)
        mask, scale, softcap = self._scalars(spec, a)
        for b in range(gz):
            q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
            if q1 == q0:
                continue
            o, l = _reference.attention(q[None, :, q0:q1], k[None, :, k0:k1], v[None, :, k0:k1],
                                        mask, scale, softcap)
            n = min(q1 - q0, gx * spec.block_q)
            a["out"][:, q0:q0 + n].copy_(o[0, :, :n])
            a["lse"][:, q0:q0 + n].copy_(l[0, :, :n])

    def _run_paged(self, spec, a):
        assert a["k_cache"].shape[2] == spec.page_size, (a["k_cache"].shape, spec.page_size)
        mask, scale, softcap = self._scalars(spec, a)
        out, lse = _reference.attention_paged(a["q"], a["k_cache"], a["v_cache"],
                                              a["page_table"], a["cache_seqlens"], mask, scale,
                                              softcap)
        a["out"].copy_(out)
        a["lse"].copy_(lse)

    def _run_split_fa_fwd_paged_kernel(self, spec, a):
        """The partials of each batch's keys (gathered from its pages) in
        S chunks, as _run_split_fa_fwd_kernel."""
        mask, scale, softcap = self._scalars(spec, a)
        q = a["q"]
        b, h, nq = q.shape[:3]
        splits = a["out_partial"].shape[1] // h
        assert a["size_2"] > 0 and a["k_cache"].shape[2] == spec.page_size
        parts = a["out_partial"].unflatten(1, (h, splits))
        lses = a["lse_partial"].unflatten(1, (h, splits))
        lens = a["cache_seqlens"].tolist()
        for i in range(b):
            ks = _reference.gather_pages(a["k_cache"], a["page_table"][i], lens[i])[None]
            vs = _reference.gather_pages(a["v_cache"], a["page_table"][i], lens[i])[None]
            s, _, _, _ = _reference._scores(q[i:i + 1], ks, mask, scale, softcap)
            vf = vs.float().repeat_interleave(h // ks.shape[1], dim=1)
            nk = ks.shape[2]
            per = -(-nk // splits)
            for c in range(splits):
                lo = min(c * per, nk)
                hi = min(lo + per, nk)
                chunk = s[..., lo:hi]
                lse = torch.logsumexp(chunk, -1) if hi > lo else torch.full(
                    (1, h, nq), -math.inf)
                p = torch.exp(chunk - lse[..., None]).nan_to_num(0.0)
                parts[i:i + 1, :, c].copy_(torch.matmul(p, vf[:, :, lo:hi]))
                lses[i:i + 1, :, c].copy_(torch.where(torch.isfinite(lse), lse, math.inf))

    def _run_split_fa_fwd_paged_merge_kernel(self, spec, a):
        a = dict(a, size_1=a["out_partial"].shape[1])
        self._run_split_fa_fwd_merge_kernel(spec, a)

    def _run_split_fa_fwd_merge_kernel(self, spec, a):
        out, lse = a["out"], a["lse"]
        h = out.shape[1]
        assert a["size_1"] == a["out_partial"].shape[1], (a["size_1"], a["out_partial"].shape)
        parts = a["out_partial"].unflatten(1, (h, -1))
        lses = a["lse_partial"].unflatten(1, (h, -1))
        finite = lses.masked_fill(lses == math.inf, -math.inf)
        total = torch.logsumexp(finite, 2)
        w = torch.exp(finite - total[:, :, None]).nan_to_num(0.0)
        out.copy_((w[..., None] * parts).sum(2).to(out.dtype))
        lse.copy_(torch.where(torch.isfinite(total), total, math.inf))

    def _run_fa_bwd_preprocess_kernel(self, spec, a):
        a["delta"].copy_((a["out"].float() * a["dout"].float()).sum(-1))
        if "dq_accum" in a:
            a["dq_accum"].zero_()
        if "dq_order" in a:   # the fixed dQ order's semaphores
            a["dq_order"].zero_()

    def _ds(self, spec, a):
        """P from the saved lse and dS = P (dP - delta), with the delta the
        preprocess kernel wrote (as the real kernels do). With modifiers
        (the regions the PTX carries, on the captures the launch got), P of
        the modified scores and dS through the softcap and times the
        score_mod's derivative, as the real kernels, evaluated by
        Traced.functions (no autograd: under torch.compile the launches run
        inside the custom ops, which have none)."""
        mask, scale, softcap = self._scalars(spec, a)
        g = a["q"].shape[1] // a["k"].shape[1]
        vis = chain = None
        if spec.modifiers is not None:
            kk = a["k"].float().repeat_interleave(g, dim=1)
            traced = _modifiers.Traced(*self.regions[spec.name],
                                       [a[c.name] for c in spec.captures])
            _, mask_mod, score_mod_grad = traced.functions()
            s, vis, t, chain = _reference.modified_scores_grad(
                torch.matmul(a["q"].float(), kk.transpose(-1, -2)) * scale, mask, softcap,
                score_mod_grad, mask_mod)
        else:
            s, t, _, _ = _reference._scores(a["q"], a["k"], mask, scale, softcap)
        p = torch.exp(s - a["lse"][..., None])   # lse = +inf (no key): p = 0
        vv = a["v"].float().repeat_interleave(g, dim=1)
        dp = torch.matmul(a["dout"].float(), vv.transpose(-1, -2))
        ds = p * (dp - a["delta"][..., None])
        if t is not None:
            ds = ds * (1 - t * t)
        if chain is not None:
            ds = torch.where(vis, ds * chain, 0.0)
        visit = self._visited(spec, a, g)
        if visit is not None:
            p, ds = p * visit, ds * visit
        return p, ds, scale, g

    def _visited(self, spec, a, g):
        """The (query, key) pairs a ranged backward kernel visits (None: all):
        the dK / dV kernel the queries of each key group's query_ranges (per
        key/value head), the dQ kernel the keys of each query group's
        key_ranges (the real ones: whole blocks; the same where the ranges
        hold every pair the mask shows)."""
        mods = spec.modifiers
        if mods is None or mods.query_range_rows is None:
            return None
        b, hq, nq = a["q"].shape[:3]
        nk = a["k"].shape[2]
        i = torch.arange(nq).view(1, 1, nq, 1)
        j = torch.arange(nk).view(1, 1, 1, nk)
        if M.QUERY_RANGES in a:
            rows = mods.query_range_rows
            self.query_ranges.append(a[M.QUERY_RANGES])
            r = a[M.QUERY_RANGES].long().repeat_interleave(g, dim=1)[:, :, j[0, 0, 0] // rows]
            return ((i >= r[..., 0][:, :, None]) & (i < r[..., 1][:, :, None])).float()
        rows = mods.key_range_rows
        self.key_ranges.append(a[M.KEY_RANGES])
        r = a[M.KEY_RANGES].long()[:, :, i[0, 0, :, 0] // rows]
        return ((j >= r[..., 0][..., None]) & (j < r[..., 1][..., None])).float()

    def _run_fa_bwd_kernel(self, spec, a):
        p, ds, scale, g = self._ds(spec, a)
        hkv = a["k"].shape[1]
        dv = _reference._group_sum(torch.matmul(p.transpose(-1, -2), a["dout"].float()), hkv)
        dk = _reference._group_sum(torch.matmul(ds.transpose(-1, -2), a["q"].float()) * scale,
                                   hkv)
        if "dk_accum" in a and a["dk_accum"].shape[2]:
            # A split group: one block per query head (grid y = Hq), each
            # adding into the accumulators the launcher zeroed.
            assert self.launches[-1]["grid"][1] == a["q"].shape[1], self.launches[-1]["grid"]
            for acc in ("dk_accum", "dv_accum"):
                assert bool((a[acc] == 0).all()), f"{acc} was not zeroed before the kernel"
            a["dk_accum"].add_(dk)
            a["dv_accum"].add_(dv)
            self.split_groups += 1
        else:
            a["dv"].copy_(dv)
            a["dk"].copy_(dk)
        if "dq_accum" in a:
            a["dq_accum"].add_(self._dq(a, ds, scale, g))
        if "dq_order" in a:
            # The real kernel spins until each query block's semaphore says
            # the key block above has added (it would trap, not hang, on a
            # workspace the preprocess did not zero); key block 0 leaves 1.
            order = a["dq_order"]
            assert order.dtype == torch.int32, order.dtype
            assert order.shape[2] == -(-a["q"].shape[2] // 64), order.shape
            assert bool((order == 0).all()), "dq_order was not zeroed before the key-block kernel"
            order.fill_(1)

    def _dq(self, a, ds, scale, g):
        return torch.matmul(ds, a["k"].float().repeat_interleave(g, dim=1)) * scale

    def _run_fa_bwd_dq_convert_kernel(self, spec, a):
        a["dq"].copy_(a["dq_accum"])

    def _run_fa_bwd_dkv_convert_kernel(self, spec, a):
        if a["dk_accum"].shape[2]:   # (no rows: the launch does nothing)
            a["dk"].copy_(a["dk_accum"])
            a["dv"].copy_(a["dv_accum"])

    def _run_fa_bwd_dq_kernel(self, spec, a):
        _, ds, scale, g = self._ds(spec, a)
        a["dq"].copy_(self._dq(a, ds, scale, g))


    # -- the packed (varlen) backward: [H, T, D] tensors, per sequence of cu_seqlens
    def _run_fa_bwd_varlen_preprocess_kernel(self, spec, a):
        tq = a["out"].shape[1]
        a["delta"][0, :, :tq].copy_((a["out"].float() * a["dout"].float()).sum(-1))
        a["lse2"][0, :, :tq].copy_(a["lse"])
        a["dq_accum"].zero_()

    def _run_fa_bwd_varlen_kernel(self, spec, a):
        """Sequence b (grid z): dk, dv of its keys and their dq terms, for
        the keys of the grid's x blocks of block_kv (max_seqlen_k's; later
        keys' gradients stay unwritten, as on the GPU)."""
        gx, gy, gz = self.launches[-1]["grid"]
        cq, ck = a["cu_seqlens_q"].tolist(), a["cu_seqlens_k"].tolist()
        assert gz == len(cq) - 1 and gy == a["k"].shape[0], (self.launches[-1], cq)
        mask, scale, softcap = self._scalars(spec, a)
        hkv = a["k"].shape[0]
        g = a["q"].shape[0] // hkv
        for b in range(gz):
            q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
            if k1 == k0:
                continue
            row = lambda t, lo, hi: t[None, :, lo:hi]
            q, k, v, dout = (row(a["q"], q0, q1), row(a["k"], k0, k1), row(a["v"], k0, k1),
                             row(a["dout"], q0, q1))
            s, t, _, _ = _reference._scores(q, k, mask, scale, softcap)
            p = torch.exp(s - a["lse2"][:, :, q0:q1, None])   # lse +inf: p = 0
            dp = torch.matmul(dout.float(), v.float().repeat_interleave(g, 1).transpose(-1, -2))
            ds = p * (dp - a["delta"][:, :, q0:q1, None])
            if t is not None:
                ds = ds * (1 - t * t)
            n = min(k1 - k0, gx * spec.block_kv)
            p, ds = p[..., :n], ds[..., :n]
            dv = _reference._group_sum(torch.matmul(p.transpose(-1, -2), dout.float()), hkv)
            dk = _reference._group_sum(torch.matmul(ds.transpose(-1, -2), q.float()), hkv)
            a["dv"][:, k0:k0 + n].copy_(dv[0])
            a["dk"][:, k0:k0 + n].copy_(dk[0] * scale)
            a["dq_accum"][0, :, q0:q1].add_(
                torch.matmul(ds, k[..., :n, :].float().repeat_interleave(g, 1))[0])

    def _run_fa_bwd_varlen_dq_convert_kernel(self, spec, a):
        a["dq"].copy_(a["dq_accum"][0] * a["scale"])

    def _run_fa_bwd_varlen_zero_rows_kernel(self, spec, a):
        """dk, dv of the keys of no sequence (outside every cu_seqlens_k range)."""
        ck = a["cu_seqlens_k"].tolist()
        tk = a["dk"].shape[1]
        orphan = torch.ones(tk, dtype=torch.bool)
        for k0, k1 in zip(ck, ck[1:]):
            orphan[k0:k1] = False
        a["dk"][:, orphan] = 0
        a["dv"][:, orphan] = 0

    def count(self):
        """Driver calls since the last count() (a dict name -> number)."""
        out = {}
        for c in self.calls:
            out[c] = out.get(c, 0) + 1
        self.calls.clear()
        return out


def check_map(p, rec, t):
    """The map a launch got for tensor map parameter `p` is the one of
    tensor `t` (the memref the same launch got), with the manifest's box
    and options."""
    es = t.element_size()
    assert rec["address"] == t.data_ptr(), (p.name, rec, t.data_ptr())
    assert rec["dims"] == tuple(reversed(t.shape)), (p.name, rec, t.shape)
    inner = tuple(reversed(t.stride()))[1:]
    for n, s, st in zip(rec["dims"][1:], rec["strides"], inner):
        assert s == st * es or n == 1, (p.name, rec, t.stride())
    assert rec["box"] == tuple(reversed(p.box)) and set(rec["element_strides"]) == {1}
    assert (rec["data_type"], rec["interleave"], rec["swizzle"], rec["l2_promotion"],
            rec["oob_fill"]) == (T.DATA_TYPES[p.dtype], 0, T.SWIZZLES[p.swizzle][0],
                                 T.L2_PROMOTIONS[p.l2_promotion], T.OOB_FILLS[p.oob_fill])


# -- kernels made on demand -------------------------------------------------------------

# What precedes the modifiers' MLIR (commented out) in a fake PTX.
_MODIFIERS_MARK = "// modifiers:\n"


def modifier_regions(text):
    """The score_mod and mask_mod regions (their text, None when absent) of
    the MLIR of Traced.module, its lines commented out or not."""
    found = {}
    lines = [line[3:] if line.startswith("// ") else line for line in text.splitlines()]
    for n, line in enumerate(lines):
        head = line.strip()
        for region in ("score_mod", "mask_mod"):
            if head.startswith(region + "("):
                end = next(m for m in range(n, len(lines)) if lines[m].strip() == "}")
                found[region] = "\n".join(lines[n:end + 1])
    return found.get("score_mod"), found.get("mask_mod")


def _with_modifiers(m, mods):
    """m as fa-compile --modifiers writes it: the modifiers section and a
    capture<n> memref (dims capture<n>_<d>) per capture: a forward's before
    out, a backward's last in the launches that read k (the dK/dV kernel
    and the deterministic dQ one)."""
    caps = [{"name": f"capture{n}", "dtype": dt, "shape": list(shape)}
            for n, (dt, shape) in enumerate(mods.captures)]
    m["modifiers"] = {"key": mods.key, "captures": caps}
    params = [{"name": c["name"], "type": "memref", "rank": len(c["shape"]),
               "dtype": c["dtype"], "dims": [f"{c['name']}_{d}" for d in range(len(c["shape"]))]}
              for c in caps]
    rows = mods.key_range_rows
    key_ranges = {"name": M.KEY_RANGES, "type": "memref", "rank": 4, "dtype": "i32",
                  "dims": list(M.key_ranges_dims(rows))} if rows is not None else None
    backward = m["kind"] == "backward"
    if rows is not None and not backward:   # (a forward's: after the captures)
        m["modifiers"]["key_ranges"] = {"name": M.KEY_RANGES, "rows": rows}
        params.append(key_ranges)
    if rows is not None and backward:
        # The dK / dV kernel reads the query ranges, the deterministic dQ
        # one the key ranges (after the captures).
        m["modifiers"]["query_ranges"] = {"name": M.QUERY_RANGES, "rows": rows}
        if m["deterministic"]:
            m["modifiers"]["key_ranges"] = {"name": M.KEY_RANGES, "rows": rows}
    for launch in m["kernels"] if "kernels" in m else [m]:
        names = [p["name"] for p in launch["params"]]
        if backward:
            if "k" in names:
                launch["params"] += params
            if rows is not None and launch["entry"] == "fa_bwd_kernel":
                launch["params"].append({"name": M.QUERY_RANGES, "type": "memref", "rank": 4,
                                         "dtype": "i32", "dims": list(M.query_ranges_dims(rows))})
            if rows is not None and launch["entry"] == "fa_bwd_dq_kernel":
                launch["params"].append(key_ranges)
        else:
            at = names.index("out")
            launch["params"][at:at] = params
    return m


def _ptx(name, chip, launches):
    body = [f"// manifest: {name}\n.version 8.4\n.target {chip}\n.address_size 64\n"]
    for k in launches:
        types = []
        for p in k["params"]:
            if p["type"] == "memref":
                types += [".u64"] * (3 + 2 * p["rank"])
            elif p["type"] == "tensormap":
                types.append(".align 64 .b8")
            else:
                types.append("." + {"f32": "f32", "i32": "u32", "u32": "u32", "f64": "f64"}.get(
                    p["type"], "u64"))
        params = ",\n".join(f"\t.param {t} {k['entry']}_param_{i}"
                            + ("[128]" if t.endswith(".b8") else "") for i, t in enumerate(types))
        body.append(f"\n.visible .entry {k['entry']}(\n{params}\n)\n.maxntid {k['threads']}, 1, 1\n"
                    "{\n\tret;\n}\n")
    return "".join(body)


_FWD_SCALARS = [{"name": "scale", "type": "f32", "value": "scale"},
                {"name": "wl", "type": "i64", "value": "window_left"},
                {"name": "softcap", "type": "f32", "value": "softcap"},
                {"name": "wr", "type": "i32", "value": "window_right"}]


# A windowed request gets a kernel whose window sizes are parameters, as
# fa-compile's (named by their roles); the scalars above then carry them.
_RUNTIME_WINDOW_NAMES = {"wl": "window_left", "wr": "window_right"}


def _runtime_window(manifest, params_lists):
    manifest["window"] = M.RUNTIME
    for params in params_lists:
        if manifest["causal"]:  # as fa-compile: the right size is 0 by the kind
            params[:] = [p for p in params if p.get("value") != "window_right"]
        for i, p in enumerate(params):
            if p.get("name") in _RUNTIME_WINDOW_NAMES:
                params[i] = dict(p, name=_RUNTIME_WINDOW_NAMES[p["name"]], type="i64",
                                 role=_RUNTIME_WINDOW_NAMES[p["name"]])


def _tensormaps(m, request):
    """TMA tensor maps of q, k and v (one before the memrefs, two after)."""
    def tmap(t, d):
        return {"name": f"{t}_map", "type": "tensormap", "tensor": t, "dtype": request.dtype,
                "box": [1, 1, 64, min(d, 64)], "swizzle": "128B"}
    m["params"].insert(0, tmap("q", request.head_dim))
    m["params"] += [tmap("k", request.head_dim), tmap("v", request.value_head_dim)]


def forward_manifest(request, chip, name, tensormaps=False):
    m = _forward_manifest(request, chip, name)
    # As fa-compile's: the scale (and softcap) at run time, as the factors
    # the host computes from them (manifest.score_scalars).
    m["scale"] = None
    factors = ["scale_over_softcap", "log2e_softcap"] if request.softcap else ["log2e_scale"]
    if request.softcap:
        m["softcap"] = M.RUNTIME
    m["params"] = [p for p in m["params"] if p.get("value") not in ("scale", "softcap")]
    m["params"][1:1] = [{"name": f, "type": "f32", "role": f, "value": f} for f in factors]
    if M.is_windowed(request.mask):
        _runtime_window(m, [m["params"]])
    if tensormaps:
        _tensormaps(m, request)
    return m


def _forward_manifest(request, chip, name):
    left, right = request.mask
    memrefs = [
        {"name": "q", "type": "memref", "rank": 4, "dtype": request.dtype, "dims": ["B", "Hq", "Nq", "D"]},
        {"name": "k", "type": "memref", "rank": 4, "dtype": request.dtype, "dims": ["B", "Hkv", "Nk", "D"]},
        {"name": "v", "type": "memref", "rank": 4, "dtype": request.dtype, "dims": ["B", "Hkv", "Nk", "Dv"]},
        {"name": "out", "type": "memref", "rank": 4, "dtype": request.dtype, "dims": ["B", "Hq", "Nq", "Dv"]},
        {"name": "lse", "type": "memref", "rank": 3, "dtype": "f32", "dims": ["B", "Hq", "Nq"]},
    ]
    # scalars between the memrefs: the launch path must take the order from the manifest
    params = [_FWD_SCALARS[0], memrefs[0], memrefs[1], _FWD_SCALARS[1], memrefs[2],
              memrefs[3], _FWD_SCALARS[2], memrefs[4], _FWD_SCALARS[3]]
    return {"version": 1, "name": name, "kind": "forward", "chip": chip, "entry": "fa_fwd_kernel",
            "dtype": request.dtype, "head_dim": request.head_dim,
            "value_head_dim": request.value_head_dim, "causal": right == 0,
            "window": [left, -1 if right == 0 else right], "softcap": request.softcap,
            "scale": request.scale, "threads": 128, "dynamic_shared_memory": 49152,
            "grid": ["ceildiv(Nq, 64)", "Hq", "B"], "params": params}


# fa-compile --kv-splits=auto's split count, as its manifests spell it.
_SPLITS = "max(min(min(SMS * 2 // (B * Hq * ceildiv(Nq, 64)), ceildiv(Nk, 64)), 64), 1)"


def split_manifest(request, chip, name):
    """A split-KV forward as fa-compile --kv-splits=auto writes it: the split
    kernel into the f32 partials (workspace sized by the run-time split
    count, which takes the SM count as a parameter), then the merge."""
    fwd = forward_manifest(request, chip, name)
    part = {"name": "out_partial", "type": "memref", "rank": 4, "dtype": "f32",
            "dims": ["B", f"Hq * {_SPLITS}", "Nq", "Dv"]}
    part_lse = {"name": "lse_partial", "type": "memref", "rank": 3, "dtype": "f32",
                "dims": ["B", f"Hq * {_SPLITS}", "Nq"]}
    sms = {"name": "size_2", "type": "i64", "value": "SMS"}
    split_params = []
    for p in fwd["params"]:
        if p.get("name") == "out":
            split_params += [part, part_lse]
        elif p.get("name") != "lse":
            split_params.append(p)
    split_params.insert(2, sms)
    out, lse = (next(p for p in fwd["params"] if p.get("name") == n) for n in ("out", "lse"))
    m = {k: v for k, v in fwd.items()
         if k not in ("entry", "grid", "params", "threads", "dynamic_shared_memory")}
    m["kv_splits"] = "auto"
    m["block_q"], m["block_kv"] = 64, 64
    m["kernels"] = [
        {"entry": "fa_fwd_kernel", "grid": [f"ceildiv(Nq, 64) * {_SPLITS}", "Hq", "B"],
         "threads": 128, "block": [128, 1, 1], "dynamic_shared_memory": 49152,
         "params": split_params},
        {"entry": "fa_fwd_merge_kernel", "grid": ["Nq", "Hq", "B"], "threads": 128,
         "block": [128, 1, 1], "dynamic_shared_memory": 0,
         "params": [out, {"name": "size_1", "type": "i64", "value": f"Hq * {_SPLITS}"},
                    part_lse, part, lse]}]
    m["workspace"] = [{"name": "out_partial", "dtype": "f32", "dims": part["dims"]},
                      {"name": "lse_partial", "dtype": "f32", "dims": part_lse["dims"]}]
    return m


def _with_tile_counter(flat, grid, at):
    """`flat` (a single-launch manifest) as fa-compile writes it with the
    dynamic tile scheduler: the one launch in 'kernels' over `grid`
    (min(tiles, SMS) blocks), the counter parameter inserted at position
    `at`, a workspace the caller zeroes."""
    counter = {"name": "tile_counter", "type": "memref", "rank": 1, "dtype": "i32",
               "dims": ["1"]}
    m = {k: v for k, v in flat.items()
         if k not in ("entry", "grid", "params", "threads", "dynamic_shared_memory")}
    m["tile_scheduler"] = "dynamic"
    m["kernels"] = [
        {"entry": flat["entry"], "grid": [grid, "1", "1"],
         "threads": 128, "block": [128, 1, 1], "dynamic_shared_memory": 49152,
         "params": flat["params"][:at] + [counter] + flat["params"][at:]}]
    m["workspace"] = [{"name": "tile_counter", "dtype": "i32", "dims": ["1"], "init": "zero"}]
    return m


def dynamic_manifest(request, chip, name):
    """A dense forward with the dynamic tile scheduler."""
    return _with_tile_counter(forward_manifest(request, chip, name),
                              "min(ceildiv(Nq, 64) * Hq * B, SMS)", 3)


def _scalar_params(request):
    """The run-time scalars of a forward as fa-compile writes them (score
    factors, window sizes by role)."""
    m = forward_manifest(request, "sm_90a", "x")
    return m, [p for p in m["params"] if p["type"] != "memref"]


def varlen_dynamic_manifest(request, chip, name):
    """fa-compile --form=varlen's sm_90a manifest: the packed kernel on the
    dynamic tile scheduler."""
    return _with_tile_counter(varlen_manifest(request, chip, name),
                              "min(ceildiv(max_seqlen_q, 64) * Hq * (B1 - 1), SMS)", 2)


def varlen_manifest(request, chip, name):
    """fa-compile --form=varlen's manifest: [H, T, D] tensors, i32
    cu_seqlens [B1], the grid over max_seqlen_q and B1 - 1 sequences
    (scalars between the memrefs, in fa-compile's order)."""
    m, scalars = _scalar_params(request)
    dt = request.dtype
    mem = lambda n, dims, dtype=dt: {"name": n, "type": "memref", "rank": len(dims),
                                     "dtype": dtype, "dims": dims}
    m.update(name=name, chip=chip, form="varlen", entry="fa_fwd_varlen_kernel", block_q=64,
             block_kv=64, grid=["ceildiv(max_seqlen_q, 64)", "Hq", "B1 - 1"])
    m["params"] = ([mem("q", ["Hq", "Tq", "D"]), mem("k", ["Hkv", "Tk", "D"]),
                    mem("cu_seqlens_q", ["B1"], "i32"), mem("cu_seqlens_k", ["B1"], "i32"),
                    mem("v", ["Hkv", "Tk", "Dv"])] + scalars
                   + [mem("out", ["Hq", "Tq", "Dv"]), mem("lse", ["Hq", "Tq"], "f32")])
    return m


def _paged_memrefs(dt):
    mem = lambda n, dims, dtype=dt: {"name": n, "type": "memref", "rank": len(dims),
                                     "dtype": dtype, "dims": dims}
    return {"q": mem("q", ["B", "Hq", "Nq", "D"]), "k_cache": mem("k_cache", ["P", "Hkv", "S", "D"]),
            "v_cache": mem("v_cache", ["P", "Hkv", "S", "Dv"]),
            "cache_seqlens": mem("cache_seqlens", ["B"], "i32"),
            "page_table": mem("page_table", ["B", "MaxPages"], "i32"),
            "out": mem("out", ["B", "Hq", "Nq", "Dv"]), "lse": mem("lse", ["B", "Hq", "Nq"], "f32")}


def paged_manifest(request, chip, name):
    """fa-compile --form=paged --page-size=S's manifest (its parameter order)."""
    m, scalars = _scalar_params(request)
    t = _paged_memrefs(request.dtype)
    m.update(name=name, chip=chip, form="paged", page_size=request.page_size,
             entry="fa_fwd_paged_kernel", block_q=64, block_kv=64,
             grid=["ceildiv(Nq, 64)", "Hq", "B"])
    m["params"] = ([t["q"], t["k_cache"], t["cache_seqlens"], t["v_cache"], t["page_table"]]
                   + scalars + [t["out"], t["lse"]])
    return m


_PAGED_SPLITS = ("max(min(min(SMS * 2 // (B * Hq * ceildiv(Nq, 64)), "
                 "ceildiv(MaxPages * {s}, 64)), 64), 1)")


def paged_split_manifest(request, chip, name):
    """fa-compile --form=paged --kv-splits=auto's manifest: the split kernel
    (page_table before cache_seqlens, the SM count as size_2) into the f32
    partials, then the merge (out, the partials, lse)."""
    fwd = paged_manifest(request, chip, name)
    t = _paged_memrefs(request.dtype)
    splits = _PAGED_SPLITS.format(s=request.page_size)
    part = {"name": "out_partial", "type": "memref", "rank": 4, "dtype": "f32",
            "dims": ["B", f"Hq * {splits}", "Nq", str(request.value_head_dim)]}
    part_lse = {"name": "lse_partial", "type": "memref", "rank": 3, "dtype": "f32",
                "dims": ["B", f"Hq * {splits}", "Nq"]}
    scalars = [p for p in fwd["params"] if p["type"] != "memref"]
    m = {k: v for k, v in fwd.items()
         if k not in ("entry", "grid", "params", "threads", "dynamic_shared_memory")}
    m["kv_splits"] = "auto"
    m["kernels"] = [
        {"entry": "fa_fwd_paged_kernel", "grid": [f"ceildiv(Nq, 64) * {splits}", "Hq", "B"],
         "threads": 128, "block": [128, 1, 1], "dynamic_shared_memory": 49152,
         "params": [t["q"], t["k_cache"], {"name": "size_2", "type": "i64", "value": "SMS"},
                    t["page_table"], t["cache_seqlens"], t["v_cache"]] + scalars
                   + [part, part_lse]},
        {"entry": "fa_fwd_paged_merge_kernel", "grid": ["Nq", "Hq", "B"], "threads": 128,
         "block": [128, 1, 1], "dynamic_shared_memory": 0,
         "params": [t["out"], part, part_lse, t["lse"]]}]
    m["workspace"] = [{"name": "out_partial", "dtype": "f32", "dims": part["dims"]},
                      {"name": "lse_partial", "dtype": "f32", "dims": part_lse["dims"]}]
    return m


# Whether the causal fast-mode backward manifests have the split GQA group
# (the warp-specialized sm_90a kernel's; tests turn it on).
SPLIT_GROUPS = False


def backward_manifest(request, chip, name, tensormaps=False):
    left, right = request.mask
    m = backward_example(request.deterministic, name=name, dtype=request.dtype,
                         d=request.head_dim, causal=right == 0,
                         window=(left, -1 if right == 0 else right), softcap=request.softcap,
                         scale=request.scale, chip=chip, ordered=tensormaps,
                         split_group=SPLIT_GROUPS and (left, right) == (-1, 0))
    m["value_head_dim"] = request.value_head_dim
    for k in m["kernels"]:
        for p in k["params"]:
            if p["name"] in ("v", "dv", "out", "dout"):
                p["dims"][-1] = "Dv"
        if k["entry"] == "fa_bwd_kernel":   # runtime scalars in one of the kernels
            k["params"] = _FWD_SCALARS[:2] + k["params"] + _FWD_SCALARS[2:]
        elif M.is_windowed(request.mask) and k["entry"] == "fa_bwd_dq_kernel":
            k["params"] = [_FWD_SCALARS[1]] + k["params"] + [_FWD_SCALARS[3]]
    if M.is_windowed(request.mask):
        _runtime_window(m, [k["params"] for k in m["kernels"]])
    if tensormaps:
        _backward_tensormaps(m, request)
    return m


def _backward_tensormaps(m, request):
    """As the warp-specialized backward's key-block kernel: maps of q, k, v
    and dout after its memrefs and one of the dq_accum workspace buffer (its
    dQ warp's [64, 32] f32 boxes; deterministic too: the fixed order)."""
    kernel = next(k for k in m["kernels"] if k["entry"] == "fa_bwd_kernel")
    names = [p["name"] for p in kernel["params"]]

    def tmap(t, dtype, box):
        return {"name": f"{t}_map", "type": "tensormap", "tensor": t, "dtype": dtype,
                "box": box, "swizzle": "128B"}
    for t, d in (("q", request.head_dim), ("k", request.head_dim),
                 ("v", request.value_head_dim), ("dout", request.value_head_dim)):
        kernel["params"].append(tmap(t, request.dtype, [1, 1, 64, min(d, 64)]))
    if "dq_accum" in names:
        kernel["params"].append(tmap("dq_accum", "f32", [1, 1, 64, 32]))


_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sequences")


def varlen_backward_manifest(request, chip, name):
    """fa-compile --form=varlen --kind=backward's manifest for `request`:
    its real d64 bf16 sm_90a one (a fixture copied from fa-compile's output)
    with the request's types, head dims and mask, and the run-time scalars
    fa-compile adds to the key-block kernel after the scale (softcap, the
    window sizes by role). test_sequences_fake compares the result with
    fa-compile's own manifests."""
    with open(os.path.join(_FIXTURES, "fa_bwd_varlen_d64_bf16_sm90a.json")) as f:
        m = json.load(f)
    left, right = request.mask
    causal = right == 0
    m.update(name=name, chip=chip, dtype=request.dtype, head_dim=request.head_dim,
             value_head_dim=request.value_head_dim, causal=causal,
             softcap=M.RUNTIME if request.softcap is not None else None,
             window=M.RUNTIME if M.is_windowed(request.mask) else [-1, -1])
    extra = []
    if request.softcap is not None:
        extra.append({"name": "softcap", "role": "softcap", "type": "f32", "value": "softcap"})
    if M.is_windowed(request.mask):
        for n in ("window_left",) if causal else ("window_left", "window_right"):
            extra.append({"name": n, "role": n, "type": "i64", "value": n})
    for w in m["workspace"]:
        w["dims"] = [str(request.head_dim) if d == "64" else d for d in w["dims"]]
    for k in m["kernels"]:
        for p in k["params"]:
            if p["type"] == "memref" and p["dtype"] == "bf16":
                p["dtype"] = request.dtype
            if p["type"] == "memref":
                p["dims"] = [str(request.head_dim) if d == "64" else d for d in p["dims"]]
        if k["entry"] == "fa_bwd_varlen_kernel":
            at = next(i for i, p in enumerate(k["params"]) if p["name"] == "scale") + 1
            k["params"][at:at] = extra
    return m


class GenRegistry(_kernels.KernelRegistry):
    """A registry whose "compiler" writes a fake-GPU kernel for any request
    (into its cache folder), so every variant a test asks for exists."""

    def __init__(self, folder, tensormaps=False, dynamic=False):
        super().__init__([], cache=str(folder), compiler="generate")
        self.generated = []
        self.tensormaps = tensormaps
        # Masked forwards with the dynamic tile scheduler.
        self.dynamic = dynamic

    def _compile_one(self, compiler, request, chip):
        name = "gen_" + hashlib.sha1(request.describe().encode()).hexdigest()[:12] + "_" + chip
        if request.form == "varlen" and request.kind == "backward":
            m = varlen_backward_manifest(request, chip, name)
        elif request.form == "varlen":
            m = (varlen_dynamic_manifest if self.dynamic else varlen_manifest)(request, chip,
                                                                               name)
        elif request.form == "paged":
            m = (paged_split_manifest if request.split_kv else paged_manifest)(request, chip,
                                                                               name)
        elif request.split_kv:
            m = split_manifest(request, chip, name)
        elif request.kind == "forward" and self.dynamic and request.mask != (-1, -1):
            m = dynamic_manifest(request, chip, name)
        elif request.kind == "forward":
            m = forward_manifest(request, chip, name, self.tensormaps)
        else:
            m = backward_manifest(request, chip, name, self.tensormaps)
        if request.modifiers is not None:
            _with_modifiers(m, request.modifiers)
        ptx = _ptx(name, chip, m["kernels"] if "kernels" in m else [m])
        if request.modifiers is not None:   # (the kernel computes the MLIR it was given)
            ptx += _MODIFIERS_MARK + "".join(
                "// " + line + "\n" for line in request.modifiers.module.splitlines())
        os.makedirs(self.cache, exist_ok=True)
        with open(os.path.join(self.cache, name + ".ptx"), "w") as f:
            f.write(ptx)
        with open(os.path.join(self.cache, name + ".json"), "w") as f:
            json.dump(m, f)
        self.generated.append(request)
        self.refresh()
        spec = M.load_manifest(os.path.join(self.cache, name + ".json"))
        assert request.matches(spec), (request.describe(), spec.describe())
        return spec

    def generate(self, request, chip="sm_90a"):
        """Writes the kernel for `request` ahead of the calls (split-KV
        kernels are never compiled on demand)."""
        return self._compile_one(None, request, chip)

    def spec_named(self, name):
        return next(s for s in self.specs() if s.name == name)


def install(monkeypatch, tmp_path, tensormaps=False, dynamic=False):
    """Makes CPU tensors run through the launch path on the emulating fake
    driver (forward kernels with tensor maps of q, k, v with `tensormaps`,
    backward key-block kernels with those of q, k, v, dout and dq_accum,
    masked forwards with the dynamic tile scheduler with `dynamic`);
    returns it."""
    reg = GenRegistry(tmp_path / "kernels", tensormaps, dynamic)
    fake = EmulatingCuda(reg)
    drv = _cuda.Driver(fake)
    drv.call("cuInit", 0)
    monkeypatch.setattr(_cuda, "_driver", drv)
    monkeypatch.setattr(_cuda, "_devices", {})
    monkeypatch.setattr(_kernels, "_loaded", {})
    monkeypatch.setattr(_kernels, "_modules", {})
    monkeypatch.setattr(_interface, "KERNEL_DEVICE_TYPE", "cpu")
    monkeypatch.setattr(_interface, "_device_ordinal", lambda device: 0)
    monkeypatch.setattr(_interface, "_current_stream", lambda ordinal: 0x77)
    fake.prev_registry = _kernels.set_default_registry(reg)
    return fake


def uninstall(fake):
    _kernels.set_default_registry(fake.prev_registry)
    _interface.clear_caches()
