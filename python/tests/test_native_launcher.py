"""The steady-state launch path's two implementations on the fake GPU: the
native launcher (lib/Launcher/launcher.c, one ctypes call per plan
sequence) against the ctypes path it replaces. Both must give the driver
the same parameter bytes, grids, blocks, shared memory, stream and context
for every launch of a forward and of a backward, and raise the same errors
(a misaligned pointer before anything is launched, a driver failure naming
the kernel). Also: the Python fallback when the library is absent, the
backward's workspace carved out of one allocation, and the double-backward
error of the eager autograd Function.

The comparisons skip when the library is not built (CI builds it)."""

import pytest

torch = pytest.importorskip("torch")

import flashmlir  # noqa: E402
from flashmlir import _interface, _native, _plan  # noqa: E402
from flashmlir._errors import CudaError  # noqa: E402

import fake_gpu  # noqa: E402
from test_interface_fake import BF, BWD, FWD, check, check_fwd, qkv  # noqa: E402

needs_native = pytest.mark.skipif(_native.library() is None,
                                  reason="the native launcher is not built")


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    fake = fake_gpu.install(monkeypatch, tmp_path)
    yield fake
    fake_gpu.uninstall(fake)


def _plans(q, k, v, dout, **opts):
    """The forward plan of a call and its backward plan (made by one call)."""
    out = flashmlir.attention(q, k, v, **opts)
    torch.autograd.grad(out, (q, k, v), dout)
    plan = _interface._forward_plan(q, k, v, opts.get("causal", False), opts.get("window"),
                                    None, opts.get("softcap"), "bhsd",
                                    opts.get("deterministic", False))
    (bwd,) = plan.bwd.values()
    return plan, bwd


def _offset_copy(t, elements):
    """t's values in a tensor whose storage starts `elements` earlier."""
    base = torch.empty(t.numel() + elements, dtype=t.dtype)
    view = base[elements:].view(t.shape)
    view.copy_(t.detach())
    return view


def _launches(fake):
    out = [{k: l[k] for k in ("fn", "grid", "block", "smem", "stream", "ctx", "raw")}
           for l in fake.launches]
    fake.launches.clear()
    return out


def _backward_tensors(plan, bwd, q, k, v, dout):
    out, lse = plan.run(q, k, v)
    grads = [torch.empty(s, dtype=BF) for s in bwd.grad_shapes]
    ws = torch.empty(bwd.ws_bytes, dtype=torch.uint8)
    return (q, k, v, out, dout, lse, *grads, ws)


@needs_native
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (20, 7)}, {"softcap": 2.0}],
                         ids=repr)
def test_native_packs_as_python(gpu, opts, deterministic):
    q, k, v, dout = qkv(2, 4, 2, 40, 70, 32, 32, seed=3)
    plan, bwd = _plans(q, k, v, dout, deterministic=deterministic, **opts)
    assert plan.launch._native is not None and bwd.seq._native is not None
    gpu.skip = {FWD, *BWD[deterministic]}     # compare the bytes; compute nothing
    # user tensors with storage offsets: the allocated pointer is the storage's start
    q2, k2, v2, dout2 = (_offset_copy(t, 8 * (i + 1)) for i, t in enumerate((q, k, v, dout)))
    out, lse = torch.empty(plan.out_shape, dtype=BF), torch.empty(plan.lse_shape)
    gpu.current = 0xC0
    for seq, ts in ((plan.launch, (q2, k2, v2, out, lse)),
                    (bwd.seq, _backward_tensors(plan, bwd, q2, k2, v2, dout2))):
        _launches(gpu)
        seq.launch(ts, 0x55)
        native = _launches(gpu)
        seq.launch_python(ts, 0x55)
        assert native == _launches(gpu)
        assert len(native) == (1 if seq is plan.launch else 3)
    assert not [e for e in gpu.events if e[0] == "exception"]


@needs_native
def test_native_pushes_the_context_once_per_sequence(gpu):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    plan, bwd = _plans(q, k, v, dout)
    gpu.skip = {FWD, *BWD[False]}
    ts = _backward_tensors(plan, bwd, q, k, v, dout)
    gpu.current = None        # no context current on this thread
    gpu.events.clear()
    _launches(gpu)
    bwd.seq.launch(ts, 0)
    assert [e[0] for e in gpu.events if e[0] in ("push", "pop")] == ["push", "pop"]
    assert [l["ctx"] for l in _launches(gpu)] == [0xC0] * 3 and gpu.current is None
    gpu.current = 0xC0        # torch's primary context is current: nothing pushed
    gpu.events.clear()
    gpu.count()
    bwd.seq.launch(ts, 0)
    assert gpu.events == []
    assert gpu.count() == {"cuCtxGetCurrent": 1, "cuLaunchKernel": 3}


@needs_native
@pytest.mark.parametrize("which", ["q", "dout", "dq", "workspace"])
def test_native_misaligned_pointer_raises_before_any_launch(gpu, which):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    plan, bwd = _plans(q, k, v, dout)
    ts = list(_backward_tensors(plan, bwd, q, k, v, dout))
    i = _interface._BACKWARD_TENSORS.index(which) if which != "workspace" else len(ts) - 1
    base = torch.empty(ts[i].numel() * ts[i].element_size() + 16, dtype=torch.uint8)
    ts[i] = base[2:2 + ts[i].numel() * ts[i].element_size()].view(ts[i].dtype).view(
        ts[i].shape)
    errors = []
    for launch in (bwd.seq.launch, bwd.seq.launch_python):
        _launches(gpu)
        with pytest.raises(ValueError, match=f"{which}'s data pointer .* is not 16-byte "
                                             "aligned") as ei:
            launch(ts, 0)
        assert _launches(gpu) == []
        errors.append(str(ei.value))
    assert errors[0] == errors[1]


@needs_native
def test_native_driver_errors_name_the_kernel(gpu):
    q, k, v, dout = qkv(1, 2, 2, 30, 50, 32, 32)
    plan, bwd = _plans(q, k, v, dout)
    ts = _backward_tensors(plan, bwd, q, k, v, dout)
    gpu.current = 0xC0
    gpu.fail["cuLaunchKernel"] = 700
    errors = []
    for launch in (bwd.seq.launch, bwd.seq.launch_python):
        with pytest.raises(CudaError, match="cuLaunchKernel failed with CUDA error 700") as ei:
            launch(ts, 0x9)
        errors.append(str(ei.value))
    assert errors[0] == errors[1] and bwd.seq.plans[0].name in errors[0]
    del gpu.fail["cuLaunchKernel"]
    gpu.fail["cuCtxGetCurrent"] = 201
    with pytest.raises(CudaError, match="cuCtxGetCurrent failed with CUDA error 201"):
        plan.launch.launch(ts[:3] + ts[3:4] + ts[5:6], 0)


def test_python_fallback_without_the_library(gpu, monkeypatch):
    monkeypatch.setattr(_native, "_lib", None)
    monkeypatch.setattr(_native, "_loaded", True)
    _interface.clear_caches()
    q, k, v, dout = qkv(2, 4, 2, 17, 113, 32, 32, seed=5)
    for _ in range(2):       # first call and steady state
        out, lse = flashmlir.attention(q, k, v, causal=True, return_lse=True)
        check_fwd(out, lse, q, k, v, causal=True)
        check(torch.autograd.grad(out, (q, k, v), dout), q, k, v, dout, causal=True)
    plan, bwd = _plans(q, k, v, dout, causal=True)
    assert plan.launch._native is None and bwd.seq._native is None


def test_library_lookup(monkeypatch, tmp_path):
    monkeypatch.setenv("FLASHMLIR_LAUNCHER", "off")
    assert _native.candidates() == []
    bogus = tmp_path / _native.LIBRARY_NAME
    bogus.write_bytes(b"not a library")
    monkeypatch.setenv("FLASHMLIR_LAUNCHER", str(bogus))
    assert _native.candidates() == [str(bogus)]
    monkeypatch.setattr(_native, "_loaded", False)
    monkeypatch.setattr(_native, "_lib", None)
    monkeypatch.setattr(_native, "_lib_path", None)
    assert _native.library() is None and _native.library_path() is None
    monkeypatch.delenv("FLASHMLIR_LAUNCHER")
    assert _native.candidates()[0].endswith("flashmlir/" + _native.LIBRARY_NAME)


def test_workspace_is_one_allocation(gpu):
    q, k, v, dout = qkv(2, 4, 2, 40, 70, 32, 32, seed=9)
    plan, bwd = _plans(q, k, v, dout)
    names = [w[0] for w in bwd.workspace]
    assert len(names) >= 2 and all(o % 256 == 0 for o in bwd.ws_offsets)
    for _ in range(2):
        gpu.decoded.clear()
        out = flashmlir.attention(q, k, v)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        check(grads, q, k, v, dout)
        seen = {}
        for args in gpu.decoded[1:]:
            for n in names:
                if n in args:
                    seen.setdefault(n, set()).add(args[n].data_ptr())
        assert all(len(p) == 1 for p in seen.values()) and set(seen) == set(names)
        ptr = {n: next(iter(p)) for n, p in seen.items()}
        base = ptr[names[0]] - bwd.ws_offsets[0]
        assert [ptr[n] - base for n in names] == list(bwd.ws_offsets)


def test_double_backward_is_refused(gpu):
    q, k, v, _ = qkv(1, 2, 2, 16, 16, 32, 32)
    dout = torch.randn(1, 2, 16, 32).to(BF).requires_grad_()
    out = flashmlir.attention(q, k, v)
    (dq,) = torch.autograd.grad(out, (q,), dout, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        dq.sum().backward()
    # without create_graph, the gradients are plain tensors
    (dq,) = torch.autograd.grad(flashmlir.attention(q, k, v), (q,), dout.detach())
    assert dq.grad_fn is None and not dq.requires_grad


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("h", [1, 2])
def test_outputs_and_gradients_are_contiguous(gpu, layout, view, h):
    """However a plan allocates them (empty_like of an input with the
    contiguous strides, or new_empty), out, lse and the gradients have the
    contiguous strides, in the steady state too; also for inputs that are
    contiguous with other strides on size-1 dimensions (h=1 views)."""
    q, k, v, dout = qkv(1, h, h, 24, 40, 32, 32, layout, seed=2)
    if view and h > 1:   # transposed views in the call's layout: new_empty
        q, k, v = (t.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
                   for t in (q, k, v))
    elif view:           # contiguous, but stride 1 on the size-1 head dimension
        hd = 1 if layout == "bhsd" else 2

        def restride(t):
            st = list(t.stride())
            st[hd] = 1
            return t.detach().clone().as_strided(t.shape, st).requires_grad_()
        q, k, v = (restride(t) for t in (q, k, v))
        assert q.is_contiguous()
    if view:
        assert q.stride() != torch.empty(q.shape).stride()
    for _ in range(2):
        out, lse = flashmlir.attention(q, k, v, layout=layout, return_lse=True)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        for t in (out, lse, *grads):
            assert t.stride() == torch.empty(t.shape).stride(), (t.shape, t.stride())
        check_fwd(out, lse, q, k, v, layout)
        check(grads, q, k, v, dout, layout)


# -- TMA tensor maps (fake_gpu's forward kernels with maps of q, k, v) ------------------

@pytest.fixture
def gpu_maps(monkeypatch, tmp_path):
    fake = fake_gpu.install(monkeypatch, tmp_path, tensormaps=True)
    yield fake
    fake_gpu.uninstall(fake)


def _map_plan(fake, layout="bhsd"):
    q, k, v, _ = qkv(2, 4, 2, 40, 70, 32, 32, layout, seed=3)
    flashmlir.attention(q, k, v, layout=layout)
    plan = _interface._forward_plan(q, k, v, False, None, None, None, layout, False)
    L = layout
    out, lse = torch.empty(plan.out_shape, dtype=BF), torch.empty(plan.lse_shape)
    ts = tuple(_interface._bhsd(t, L) if i < 4 else t for i, t in enumerate((q, k, v, out, lse)))
    return plan.launch, ts


def _fresh(ts):
    """The same tensors at other addresses."""
    return tuple(t.detach().clone() for t in ts)


def _records(fake):
    out = [{k: v for k, v in r.items() if k != "map"} for r in fake.encodes]
    fake.encodes.clear()
    return out


def _paths(plan):
    return [("native", plan._native.launch), ("python", plan.launch_python)] \
        if plan._native is not None else [("python", plan.launch_python)]


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_maps_native_as_python(gpu_maps, layout):
    """Both paths encode the same maps (the fake's launch checks each against
    the memrefs it got) and give the driver the same bytes; the storage's
    cache is shared, so a path encodes nothing that the other left there."""
    plan, ts = _map_plan(gpu_maps, layout)
    assert len(plan._maps) == 3 and (plan._native is not None) == (_native.library() is not None)
    gpu_maps.skip = {FWD}
    strip = lambda rs: [{k: v for k, v in r.items() if k != "address"} for r in rs]
    got, last = {}, None
    for name, launch in _paths(plan):
        a, b = _fresh(ts), _fresh(ts)
        _launches(gpu_maps)
        _records(gpu_maps)
        launch(a, 0x55)                        # new addresses: every map is encoded
        recs = _records(gpu_maps)
        assert [r["address"] for r in recs] == [t.data_ptr() for t in a[:3]]
        got[name] = (strip(recs), [len(r) for r in _launches(gpu_maps)[0]["raw"]])
        launch(b, 0x55)
        launch(a, 0x55)
        assert len(_records(gpu_maps)) == 6
        last = a
    for name, launch in _paths(plan):          # the storage holds last's maps
        _launches(gpu_maps)
        launch(last, 0x55)
        assert _records(gpu_maps) == [] and len(_launches(gpu_maps)) == 1, name
    assert len({repr(v) for v in got.values()}) == 1
    q_map = got["python"][0][0]
    B, H, N, D = ts[0].shape
    if layout == "bhsd":
        assert q_map["strides"] == (2 * D, 2 * N * D, 2 * H * N * D)
    else:                                       # [B, N, H, D] memory
        assert q_map["strides"] == (2 * H * D, 2 * D, 2 * N * H * D)
    assert q_map["dims"] == (D, N, H, B) and q_map["box"] == (32, 64, 1, 1)
    assert not [e for e in gpu_maps.events if e[0] in ("exception", "encode rejected")]


def test_maps_reencoded_when_a_tensor_moves(gpu_maps):
    plan, ts = _map_plan(gpu_maps)
    gpu_maps.skip = {FWD}
    _records(gpu_maps)
    for name, launch in _paths(plan):
        ts = _fresh(ts)
        launch(ts, 0)
        assert len(_records(gpu_maps)) == 3
        launch(ts, 0)
        assert _records(gpu_maps) == []
        moved = (ts[0].clone(),) + ts[1:]       # only q moves: only q_map is encoded
        launch(moved, 0)
        (r,) = _records(gpu_maps)
        assert r["address"] == moved[0].data_ptr(), name
        # what the launch got: the current maps
        maps = [fake_gpu.decode_fake_map(raw) for raw in gpu_maps.launches[-1]["raw"]
                if len(raw) == 128]
        assert [m["address"] for m in maps] == [t.data_ptr() for t in moved[:3]]


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_backward_maps_of_workspace(gpu_maps, layout, deterministic):
    """The warp-specialized backward's key-block kernel takes maps of q, k,
    v, dout and of the dq_accum workspace buffer (deterministic: with the
    i32 dq_order semaphores, which the preprocess zeroes), views into the
    backward's one allocation: every launch's maps are those of the
    memrefs it got (the fake checks them), on a fresh workspace each call,
    and the gradients are right."""
    for call in range(2):
        q, k, v, dout = qkv(2, 4, 2, 40, 70, 32, 32, layout, seed=5 + call)
        out = flashmlir.attention(q, k, v, causal=True, layout=layout,
                                  deterministic=deterministic)
        _records(gpu_maps)
        grads = torch.autograd.grad(out, (q, k, v), dout)
        check(grads, q, k, v, dout, layout, causal=True)
        # (Each call's workspace is new: its map is encoded again.)
        assert len(_records(gpu_maps)) >= 2
        bwd = [l for l in gpu_maps.launches if l["entry"] == "fa_bwd_kernel"][-1]
        got = [fake_gpu.decode_fake_map(raw) for raw in bwd["raw"] if len(raw) == 128]
        assert len(got) == 5, [m["dims"] for m in got]
        # f32, [64, 32] boxes, [B, Hq, Nq padded, D]
        assert got[-1]["data_type"] == 7 and got[-1]["box"] == (32, 64, 1, 1)
        assert got[-1]["dims"][0] == 32 and got[-1]["dims"][2:] == (4, 2)


def test_failing_encode_launches_nothing(gpu_maps):
    plan, ts = _map_plan(gpu_maps)
    gpu_maps.current = 0xC0
    errors = []
    for name, launch in _paths(plan):
        a = _fresh(ts)
        _launches(gpu_maps)
        gpu_maps.fail["cuTensorMapEncodeTiled"] = 1
        with pytest.raises(CudaError, match=r"(?s)cuTensorMapEncodeTiled failed with CUDA error 1 "
                                            r"\(CUDA_ERROR_INVALID_VALUE\).*: tensor map q_map of q "
                                            r"at 0x[0-9a-f]+: bf16, dims \[32, 40, 4, 2\], "
                                            r"byte strides \[64, 2560, 10240\], box \[32, 64, 1, 1\]"
                                            ) as ei:
            launch(a, 0)
        assert _launches(gpu_maps) == []
        assert f"{a[0].data_ptr():#x}" in str(ei.value) and plan.name in str(ei.value)
        errors.append(str(ei.value).replace(f"{a[0].data_ptr():#x}", "ADDR"))
        del gpu_maps.fail["cuTensorMapEncodeTiled"]
        _records(gpu_maps)
        launch(a, 0)                           # the failed map is encoded again
        assert len(_records(gpu_maps)) == 3 and len(_launches(gpu_maps)) == 1
    assert len(set(errors)) == 1


def test_misaligned_tensor_encodes_nothing(gpu_maps):
    plan, ts = _map_plan(gpu_maps)
    base = torch.empty(ts[0].numel() * 2 + 16, dtype=torch.uint8)
    bad = base[2:2 + ts[0].numel() * 2].view(BF).view(ts[0].shape)
    _records(gpu_maps)
    for name, launch in _paths(plan):
        with pytest.raises(ValueError, match="q's data pointer .* is not 16-byte aligned"):
            launch((bad,) + ts[1:], 0)
        assert _records(gpu_maps) == []


@pytest.mark.parametrize("native", [True, False])
def test_attention_with_maps(gpu_maps, monkeypatch, native):
    """flashmlir.attention on kernels that take maps, on both launch paths,
    in both layouts; every launch checks its maps against its memrefs."""
    if native and _native.library() is None:
        pytest.skip("the native launcher is not built")
    if not native:
        monkeypatch.setattr(_native, "_lib", None)
        monkeypatch.setattr(_native, "_loaded", True)
        _interface.clear_caches()
    for layout in ("bhsd", "bshd"):
        q, k, v, dout = qkv(2, 4, 2, 17, 113, 32, 32, layout, seed=5)
        for _ in range(2):
            out, lse = flashmlir.attention(q, k, v, layout=layout, causal=True, return_lse=True)
            check_fwd(out, lse, q, k, v, layout, causal=True)
            check(torch.autograd.grad(out, (q, k, v), dout), q, k, v, dout, layout, causal=True)
        plan = _interface._forward_plan(q, k, v, True, None, None, None, layout, False)
        assert (plan.launch._native is not None) == native and len(plan.launch._maps) == 3
        assert gpu_maps.decoded[-4]["q_map"]["address"] == q.data_ptr()
    assert not [e for e in gpu_maps.events if e[0] in ("exception", "encode rejected")]


def test_debug_print_shows_the_maps(gpu_maps, monkeypatch, capsys):
    monkeypatch.setenv("FLASHMLIR_DEBUG", "1")
    _interface.clear_caches()
    q, k, v, _ = qkv(1, 2, 2, 16, 16, 32, 32)
    flashmlir.attention(q, k, v)
    flashmlir.attention(q, k, v)
    err = capsys.readouterr().err
    assert err.count(f"q_map                  tensormap map of q at {q.data_ptr():#x}: bf16, "
                     "dims [32, 16, 2, 1]") == 2, err
