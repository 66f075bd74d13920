"""The backward's launch sequence against the fake libcuda (CPU only):
loading every entry of a backward manifest from one module, workspace
allocation, kernel order, grids, blocks, shared memory and the packed
parameters of each launch, and errors raised before anything is launched."""

import pytest

from flashmlir import _backward, _cuda, _kernels
from flashmlir import _manifest as M
from flashmlir._errors import CudaError, LaunchError, ManifestError

from helpers import (FakeTensor, backward_example, backward_ptx, contiguous_strides,
                     write_backward_kernel)
from test_cuda_fake import fake  # noqa: F401  (the fake driver fixture)

B, HQ, HKV, NQ, NK, D = 2, 8, 2, 1000, 4097, 128
ENV = {"B": B, "Hq": HQ, "Hkv": HKV, "Nq": NQ, "Nk": NK, "D": D, "Dv": D, "G": HQ // HKV}
SCALARS = {"scale": 0.125, "softcap": 0.0, "window_left": -1, "window_right": 0, "causal": 1}
FN = 0x3000  # the fake driver's first function handle; later entries count up

_TORCH = {"f32": ("torch.float32", 4), "bf16": ("torch.bfloat16", 2), "f16": ("torch.float16", 2)}


def _slots(rank):
    return 3 + 2 * rank


def _spec(tmp_path, deterministic=False, edit=None):
    m = backward_example(deterministic)
    if edit:
        edit(m)
    jp = write_backward_kernel(str(tmp_path), m)
    return M.load_manifest(jp)


def _param_counts(spec):
    return [len(k.slots()) for k in spec.kernels]


def _load(fake, spec):
    sizes = [[M.slot_size(ty) for _, ty in k.slots()] for k in spec.kernels]
    fake.param_sizes = {FN + i: s for i, s in enumerate(sizes)}
    fake.slot_sizes = {FN + i: s for i, s in enumerate(sizes)}
    return _kernels.load_kernels(spec, 0)


def t(base, shape, dtype="torch.bfloat16", el=2):
    return FakeTensor(base, shape, contiguous_strides(shape), dtype, 0, el)


def bshd(base, shape_bhsd, dtype="torch.bfloat16", el=2):
    b, h, n, d = shape_bhsd
    return FakeTensor(base, (b, n, h, d), contiguous_strides((b, n, h, d)), dtype, 0, el).transpose12()


def user_tensors(make=t):
    return {
        "q": make(0x10000000, (B, HQ, NQ, D)), "k": make(0x20000000, (B, HKV, NK, D)),
        "v": make(0x30000000, (B, HKV, NK, D)), "out": make(0x40000000, (B, HQ, NQ, D)),
        "dout": make(0x50000000, (B, HQ, NQ, D)),
        "lse": t(0x60000000, (B, HQ, NQ), "torch.float32", 4),
        "dq": make(0x70000000, (B, HQ, NQ, D)), "dk": make(0x80000000, (B, HKV, NK, D)),
        "dv": make(0x90000000, (B, HKV, NK, D)),
    }


class Alloc:
    """A fake allocator: contiguous FakeTensors at fresh addresses, logged."""

    def __init__(self):
        self.calls = []
        self.next = 0xA0000000

    def __call__(self, name, shape, dtype):
        self.calls.append((name, tuple(shape), dtype))
        tdt, el = _TORCH[dtype]
        base = self.next
        self.next += 0x10000000
        return t(base, shape, tdt, el)


def values(launch):
    return [int.from_bytes(r, "little", signed=True) for r in launch["raw"]]


def memref_at(vals, start, rank):
    """(allocated, aligned, offset, sizes, strides) of the memref at slot `start`."""
    v = vals[start:start + _slots(rank)]
    return v[0], v[1], v[2], tuple(v[3:3 + rank]), tuple(v[3 + rank:3 + 2 * rank])


def offsets(kernel_spec):
    """Slot index of each memref parameter of a kernel."""
    out, i = {}, 0
    for p in kernel_spec.params:
        out[p.name] = i
        i += len(p.slots())
    return out


# -- loading ----------------------------------------------------------------------

def test_load_kernels_one_module_every_entry(fake, tmp_path):
    spec = _spec(tmp_path)
    ks = _load(fake, spec)
    assert [k.spec.entry for k in ks] == ["fa_bwd_preprocess_kernel", "fa_bwd_kernel",
                                          "fa_bwd_dq_convert_kernel"]
    assert [k.function for k in ks] == [FN, FN + 1, FN + 2]
    assert all(k.manifest is spec and k.module == 0x2000 for k in ks)
    assert len([e for e in fake.events if e[0] == "load"]) == 1
    assert [e[2] for e in fake.events if e[0] == "getfn"] == [
        b"fa_bwd_preprocess_kernel", b"fa_bwd_kernel", b"fa_bwd_dq_convert_kernel"]
    # the dynamic shared memory limit is set per function (only where it is > 0)
    assert [e for e in fake.events if e[0] == "setattr"] == [
        ("setattr", FN + 1, _cuda.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 147456)]
    assert _kernels.load_kernels(spec, 0) is ks  # cached
    assert len([e for e in fake.events if e[0] == "load"]) == 1
    assert "fa_bwd_kernel" in repr(ks[1])


def test_load_kernel_refuses_backward(fake, tmp_path):
    spec = _spec(tmp_path)
    with pytest.raises(LaunchError, match="is a backward manifest with 3 kernels: use load_kernels"):
        _kernels.load_kernel(spec, 0)


def test_load_kernels_forward_is_one(fake, tmp_path):
    from helpers import example, fake_ptx, write_kernel
    m = example()
    write_kernel(str(tmp_path), m, ptx=fake_ptx(nparams=53))
    spec = M.load_manifest(str(tmp_path / (m["name"] + ".json")))
    fake.param_sizes = [8] * 53
    (k,) = _kernels.load_kernels(spec, 0)
    assert k is _kernels.load_kernel(spec, 0) and k.spec is spec and k.manifest is spec


def test_load_kernels_checks_each_function(fake, tmp_path):
    spec = _spec(tmp_path)
    counts = _param_counts(spec)
    fake.param_sizes = {FN: [8] * counts[0], FN + 1: [8] * (counts[1] - 1),
                        FN + 2: [8] * counts[2]}
    with pytest.raises(ManifestError, match=f"driver reports {counts[1] - 1} kernel parameters "
                                            "of sizes .* for fa_bwd_kernel"):
        _kernels.load_kernels(spec, 0)


def test_load_kernels_checks_shared_memory(fake, tmp_path):
    spec = _spec(tmp_path)
    fake.func_attrs[1] = 100000  # static shared memory of every function
    with pytest.raises(LaunchError, match=r"fa_bwd_d128_bf16_causal_sm90a:fa_bwd_kernel: needs "
                                          r"147456 bytes of dynamic \+ 100000 of static"):
        _load(fake, spec)


def test_load_kernels_checks_threads(fake, tmp_path):
    spec = _spec(tmp_path)
    fake.func_attrs[0] = 128  # max threads per block: fa_bwd_kernel wants 256
    with pytest.raises(LaunchError, match=r":fa_bwd_kernel: the manifest asks for 256 threads"):
        _load(fake, spec)


def test_load_kernels_checks_ptx_first(fake, tmp_path):
    m = backward_example()
    write_backward_kernel(str(tmp_path), m, ptx=backward_ptx(m, drop=("fa_bwd_kernel",)))
    spec = M.load_manifest(str(tmp_path / (m["name"] + ".json")))
    with pytest.raises(ManifestError, match=r"kernels\[1\] \(fa_bwd_kernel\): no .entry"):
        _kernels.load_kernels(spec, 0)
    assert not [e for e in fake.events if e[0] == "load"]


# -- the launch sequence ---------------------------------------------------------------

def _run(fake, spec, tensors, env=ENV, scalars=SCALARS, stream=0x77):
    ks = _load(fake, spec)
    alloc = Alloc()
    ws, preps = _backward.prepare(spec, ks, tensors, env, alloc, scalars)
    _backward.launch(preps, stream)
    return ws, preps, alloc


def test_fast_mode_sequence(fake, tmp_path):
    spec = _spec(tmp_path)
    tensors = user_tensors()
    ws, preps, alloc = _run(fake, spec, tensors)
    # workspace: allocated by the caller, in manifest order, with the manifest's dims
    assert alloc.calls == [("delta", (B, HQ, NQ), "f32"), ("dq_accum", (B, HQ, NQ, D), "f32")]
    assert set(ws) == {"delta", "dq_accum"}
    # launches: manifest order, one stream, each with its own function/grid/block/smem
    assert [(l["fn"], l["grid"], l["block"], l["smem"], l["stream"]) for l in fake.launches] == [
        (FN, (8, HQ, B), (128, 1, 1), 0, 0x77),            # ceildiv(1000, 128)
        (FN + 1, (65, HQ, B), (256, 1, 1), 147456, 0x77),  # ceildiv(4097, 64)
        (FN + 2, (16, HQ, B), (128, 1, 1), 0, 0x77),       # ceildiv(1000, 64)
    ]
    assert all(l["ctx"] == 0xC0 for l in fake.launches) and fake.current is None
    assert [p.name for p in preps] == [k.name for k in spec.kernels]
    # the packed parameters of each launch
    delta, acc = ws["delta"].data_ptr(), ws["dq_accum"].data_ptr()
    ptrs = {n: x.data_ptr() for n, x in tensors.items()}
    ptrs.update(delta=delta, dq_accum=acc)
    for launch, k in zip(fake.launches, spec.kernels):
        vals = values(launch)
        assert len(vals) == len(k.slots())
        for name, at in offsets(k).items():
            p = k.param(name)
            alloc_p, aligned, off, sizes, strides = memref_at(vals, at, p.rank)
            assert (alloc_p, aligned, off) == (ptrs[name], ptrs[name], 0), (k.entry, name)
            want = tuple(d.evaluate(ENV) for d in p.dims)
            assert sizes == want and strides == contiguous_strides(want), (k.entry, name)
    # the same dq_accum reaches all three kernels
    seen = [memref_at(values(l), offsets(k)["dq_accum"], 4)[1]
            for l, k in zip(fake.launches, spec.kernels)]
    assert seen == [acc, acc, acc]


def test_deterministic_sequence(fake, tmp_path):
    spec = _spec(tmp_path, deterministic=True)
    ws, _, alloc = _run(fake, spec, user_tensors())
    assert alloc.calls == [("delta", (B, HQ, NQ), "f32")]
    assert [(l["fn"], l["grid"], l["block"], l["smem"]) for l in fake.launches] == [
        (FN, (8, HQ, B), (128, 1, 1), 0),
        (FN + 1, (65, HKV, B), (256, 1, 1), 147456),
        (FN + 2, (16, HQ, B), (256, 1, 1), 98304),
    ]
    names = [e[2] for e in fake.events if e[0] == "getfn"]
    assert names[-1] == b"fa_bwd_dq_kernel"
    dq_kernel = spec.kernels[2]
    vals = values(fake.launches[2])
    dq = memref_at(vals, offsets(dq_kernel)["dq"], 4)
    assert dq[1] == 0x70000000 and dq[3] == (B, HQ, NQ, D)


def test_bshd_views(fake, tmp_path):
    spec = _spec(tmp_path)
    tensors = user_tensors(bshd)
    _run(fake, spec, tensors)
    main = spec.kernels[1]
    vals = values(fake.launches[1])
    for name, (h, n) in {"q": (HQ, NQ), "dk": (HKV, NK), "dout": (HQ, NQ)}.items():
        _, _, _, sizes, strides = memref_at(vals, offsets(main)[name], 4)
        assert sizes == (B, h, n, D)
        assert strides == (n * h * D, D, h * D, 1), name  # [B, N, H, D] memory, bhsd view


def test_scalar_params_in_a_backward_kernel(fake, tmp_path):
    def edit(m):
        m["kernels"][1]["params"] += [{"name": "scale", "type": "f32", "value": "scale"},
                                      {"name": "wr", "type": "i64", "value": "window_right"}]
    spec = _spec(tmp_path, edit=edit)
    ks = _load(fake, spec)
    assert fake.slot_sizes[FN + 1][-2:] == [4, 8]
    ws, preps = _backward.prepare(spec, ks, user_tensors(), ENV, Alloc(), SCALARS)
    assert [(p.label, p.type, p.value) for p in preps[1].packed[-2:]] == [
        ("scale", "f32", 0.125), ("wr", "i64", 0)]
    _backward.launch(preps, 0)
    raw = fake.launches[1]["raw"]
    import struct
    assert struct.unpack("<f", raw[-2])[0] == 0.125 and raw[-1] == (0).to_bytes(8, "little")


@pytest.mark.parametrize("change,match", [
    (lambda ts: ts.pop("dout"), "no tensor given for dout"),
    (lambda ts: ts.pop("lse"), "no tensor given for lse"),
    (lambda ts: ts.update(dq=t(0x70000000, (B, HQ, NQ, D), "torch.float16")),
     r":fa_bwd_dq_convert_kernel: parameter dq must be bf16, got f16"),
    (lambda ts: ts.update(dk=t(0x80000000, (B, HQ, NK, D))),
     r":fa_bwd_kernel: parameter dk: sizes \[2, 8, 4097, 128\] differ from the manifest's "
     r"\[B, Hkv, Nk, D\] = \[2, 2, 4097, 128\]"),
    (lambda ts: ts.update(q=FakeTensor(0x10000000, (B, HQ, NQ, D), (HQ * NQ * D, NQ * D, 1, NQ))),
     "parameter q: the last dimension must be contiguous"),
    (lambda ts: ts.update(dv=FakeTensor(0x90000008, (B, HKV, NK, D),
                                        contiguous_strides((B, HKV, NK, D)))),
     "parameter dv: data pointer 0x90000008 is not 16-byte aligned"),
])
def test_bad_arguments_launch_nothing(fake, tmp_path, change, match):
    spec = _spec(tmp_path)
    ks = _load(fake, spec)
    tensors = user_tensors()
    change(tensors)
    with pytest.raises(LaunchError, match=match):
        ws, preps = _backward.prepare(spec, ks, tensors, ENV, Alloc(), SCALARS)
        _backward.launch(preps, 0)
    assert fake.launches == []  # all-or-nothing: checked before the first launch


def test_empty_grid_is_an_error(fake, tmp_path):
    spec = _spec(tmp_path)
    ks = _load(fake, spec)
    env = dict(ENV, Nq=0)
    tensors = {n: (FakeTensor(x.base, tuple(0 if s == NQ else s for s in x.shape),
                              contiguous_strides(tuple(0 if s == NQ else s for s in x.shape)),
                              x.dtype, 0, x.elsize)) for n, x in user_tensors().items()}
    with pytest.raises(LaunchError, match="grid\\[0\\] evaluates to 0; nothing to launch"):
        _backward.prepare(spec, ks, tensors, env, Alloc(), SCALARS)
    assert fake.launches == []


def test_prepare_checks_the_manifest(fake, tmp_path):
    spec = _spec(tmp_path / "a")
    ks = _load(fake, spec)
    with pytest.raises(LaunchError, match="loaded kernels .* are not the manifest's"):
        _backward.prepare(spec, ks[:2], user_tensors(), ENV, Alloc())
    det = _spec(tmp_path / "b", deterministic=True)
    with pytest.raises(LaunchError, match="are not the manifest's"):
        _backward.prepare(det, ks, user_tensors(), ENV, Alloc())
    from helpers import example
    fwd = M.parse_manifest(example(), check_files=False)
    with pytest.raises(LaunchError, match="is a single-launch forward manifest"):
        _backward.prepare(fwd, ks, user_tensors(), ENV, Alloc())


def test_workspace_shapes(tmp_path):
    spec = M.parse_manifest(backward_example(), check_files=False)
    assert _backward.workspace_shapes(spec, ENV) == [
        ("delta", (B, HQ, NQ), "f32"), ("dq_accum", (B, HQ, NQ, D), "f32")]
    with pytest.raises(LaunchError, match="workspace delta: unknown name 'Nq'"):
        _backward.workspace_shapes(spec, {"B": 1, "Hq": 1})
    m = backward_example()
    m["workspace"][1]["dims"] = ["B", "Hq", "Nq - 2000", "D"]
    spec = M.parse_manifest(m, check_files=False)
    with pytest.raises(LaunchError, match=r"workspace dq_accum has shape \[2, 8, -1000, 128\]"):
        _backward.workspace_shapes(spec, ENV)
    m["workspace"][1]["dims"] = ["B", "Hq", "ceildiv(Nq, 64) * 64", "D"]
    spec = M.parse_manifest(m, check_files=False)
    assert _backward.workspace_shapes(spec, ENV)[1][1] == (B, HQ, 1024, D)


def test_tensors_needed():
    fast = M.parse_manifest(backward_example(), check_files=False)
    assert _backward.tensors_needed(fast) == ["out", "dout", "q", "k", "v", "lse", "dk", "dv",
                                              "dq"]
    det = M.parse_manifest(backward_example(deterministic=True), check_files=False)
    assert sorted(_backward.tensors_needed(det)) == sorted(M.USER_TENSORS)


def test_launch_failure_is_an_exception(fake, tmp_path):
    spec = _spec(tmp_path)
    ks = _load(fake, spec)
    _, preps = _backward.prepare(spec, ks, user_tensors(), ENV, Alloc(), SCALARS)
    fake.fail["cuLaunchKernel"] = 701
    with pytest.raises(CudaError, match=r"(?s)LAUNCH_OUT_OF_RESOURCES.*fa_bwd_preprocess_kernel"):
        _backward.launch(preps, 0)


def test_debug_print(fake, tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path)
    monkeypatch.setenv("FLASHMLIR_DEBUG", "1")
    _run(fake, spec, user_tensors())
    err = capsys.readouterr().err
    assert err.count("flashmlir: launch ") == 3
    assert ":fa_bwd_kernel grid=(65, 8, 2) block=(256, 1, 1) smem=147456" in err
    assert "dq_accum.aligned" in err


# A split GQA group's accumulators, as fa-compile states them for the
# warp-specialized causal key-block kernel at D = 128 (128-key blocks):
# Nk rows when G >= 2 and either the unsplit grid has fewer blocks than 1.5
# waves or G >= 8 with at least 32 key blocks, else none
# (test/Tools/fa-compile-warp-specialize.mlir checks the same text).
SPLIT_ROWS = ("Nk * (min(Hq // Hkv - 1, 1) * "
              "min(max(SMS * 3 - ceildiv(Nk, 128) * Hkv * B * 2, 0) + "
              "min(max(Hq // Hkv - 7, 0), 1) * min(max(ceildiv(Nk, 128) - 31, 0), 1), 1))")


@pytest.mark.parametrize("hq,hkv,b,nk,sms,rows", [
    (16, 2, 1, 8192, 132, 8192),     # 64 key blocks x 2 x 1 = 128 < 198
    (16, 4, 1, 8192, 132, 0),        # 256 blocks pair up: no split
    (16, 4, 2, 8192, 132, 0),        # 512 blocks
    (16, 16, 1, 8192, 132, 0),       # MHA never splits
    (16, 4, 1, 4096, 85, 0),         # 128 blocks on 85 SMs: 1.5 waves
    (16, 4, 1, 4096, 86, 4096),
    (16, 2, 1, 8192, 85, 8192),      # 1.5 waves, but G = 8 with 64 key blocks
    (16, 2, 1, 8193, 132, 8193),
    (16, 2, 4, 4096, 132, 4096),     # 256 blocks, but G = 8 from 32 key blocks
    (16, 2, 2, 8192, 132, 8192),
    (16, 2, 4, 3968, 132, 0),        # 31 key blocks, 248 blocks
    (16, 4, 4, 4096, 132, 0),        # G = 4: only below 1.5 waves
])
def test_split_group_workspace(hq, hkv, b, nk, sms, rows):
    m = backward_example()
    m["workspace"].append({"name": "dk_accum", "dtype": "f32", "init": "zero",
                           "dims": ["B", "Hkv", SPLIT_ROWS, "D"]})
    spec = M.parse_manifest(m, check_files=False)
    assert spec.zeroed_workspace
    env = {**ENV, "B": b, "Hq": hq, "Hkv": hkv, "Nk": nk, "G": hq // hkv, "SMS": sms}
    shapes = dict((name, shape) for name, shape, _ in _backward.workspace_shapes(spec, env))
    assert shapes["dk_accum"] == (b, hkv, rows, D)
