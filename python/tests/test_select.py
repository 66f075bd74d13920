"""Kernel discovery, selection and the fa-compile fallback, with temporary
folders of fake manifests (CPU only)."""

import json
import os
import stat
import sys
import textwrap

import pytest

from flashmlir import _kernels as K
from flashmlir._errors import KernelNotFoundError

from helpers import forward_manifest, write_kernel

H = (9, 0)
A100 = (8, 0)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for v in ("FLASHMLIR_CHIP", "FLASHMLIR_KERNEL_DIR", "FLASHMLIR_COMPILER",
              "FLASHMLIR_NO_COMPILE", "FLASHMLIR_CACHE_DIR"):
        monkeypatch.delenv(v, raising=False)


def put(folder, name, **kw):
    write_kernel(str(folder), forward_manifest(name, **kw))


@pytest.fixture
def kdir(tmp_path):
    d = tmp_path / "kernels"
    put(d, "bf16_d128_causal_sm80", causal=True)
    put(d, "bf16_d128_causal_sm90a", causal=True, chip="sm_90a")
    put(d, "bf16_d128_full_sm80")
    put(d, "f16_d64_win_sm80", dtype="f16", d=64, window=(97, 31))
    put(d, "bf16_d128_cap_sm80", softcap=30.0)
    put(d, "bf16_d128_scale_sm80", scale=0.30000001192092896)
    put(d, "bf16_d64_causalwin_sm80", d=64, causal=False, window=(-1, 0))
    put(d, "bf16_d64_causal255_sm80", d=64, causal=True, window=(255, 0))
    return d


def reg(*dirs, tmp=None, compiler=None):
    cache = os.path.join(str(tmp or dirs[0]), "cache-none")
    return K.KernelRegistry([str(d) for d in dirs], cache=cache, compiler=compiler)


def req(**kw):
    base = dict(kind="forward", dtype="bf16", head_dim=128)
    base.update(kw)
    return K.KernelRequest.make(**base)


def test_scan(kdir):
    r = reg(kdir)
    assert len(r.specs()) == 8 and r.invalid() == []


def test_chip_preference(kdir):
    r = reg(kdir)
    assert r.find(req(causal=True), H).name == "bf16_d128_causal_sm90a"
    assert r.find(req(causal=True), A100).name == "bf16_d128_causal_sm80"
    assert r.find(req(causal=True), (8, 6)).name == "bf16_d128_causal_sm80"
    assert r.find(req(causal=True), (12, 0)).name == "bf16_d128_causal_sm80"
    assert [s.name for s in r.candidates(req(causal=True), H)] == [
        "bf16_d128_causal_sm90a", "bf16_d128_causal_sm80"]
    # a device without an sm_90a kernel for this variant falls back to sm_80
    assert r.find(req(), H).name == "bf16_d128_full_sm80"


def test_forced_chip(kdir, monkeypatch):
    r = reg(kdir)
    monkeypatch.setenv("FLASHMLIR_CHIP", "sm_80")
    assert r.find(req(causal=True), H).name == "bf16_d128_causal_sm80"
    monkeypatch.setenv("FLASHMLIR_CHIP", "sm_90a")
    with pytest.raises(KernelNotFoundError, match="cannot run on a device of compute capability 8.0"):
        r.find(req(causal=True), A100)
    monkeypatch.setenv("FLASHMLIR_CHIP", "sm90")
    with pytest.raises(KernelNotFoundError, match="FLASHMLIR_CHIP: bad chip"):
        r.find(req(causal=True), H)


def test_old_gpu(kdir):
    with pytest.raises(KernelNotFoundError, match="compute capability 8.0 .* this device is 7.5"):
        reg(kdir).find(req(causal=True), (7, 5))


def test_mask_canonicalization(kdir):
    r = reg(kdir)
    # causal == window (-1, 0), whichever way the manifest or the call says it
    assert r.find(req(head_dim=64, causal=True), A100).name == "bf16_d64_causalwin_sm80"
    assert r.find(req(head_dim=64, window=(-1, 0)), A100).name == "bf16_d64_causalwin_sm80"
    assert r.find(req(causal=True, window=(-1, -1)), A100).name == "bf16_d128_causal_sm80"
    assert r.find(req(head_dim=64, causal=True, window=(255, 0)), A100).name == "bf16_d64_causal255_sm80"
    assert r.find(req(head_dim=64, causal=True, window=(255, -1)), A100).name == "bf16_d64_causal255_sm80"
    assert r.find(req(dtype="f16", head_dim=64, window=(97, 31)), A100).name == "f16_d64_win_sm80"
    for bad in (dict(window=(97, 30)), dict(window=(96, 31)), dict(dtype="bf16")):
        with pytest.raises(KernelNotFoundError):
            r.find(req(head_dim=64, **{"dtype": "f16", "window": (97, 31), **bad}), A100)


def test_scale_and_softcap_matching(kdir):
    # A built-in value serves only itself; a run-time parameter every value.
    r = reg(kdir)
    named = {x.name: x for x in r.specs()}
    assert named["bf16_d128_full_sm80"].scale is None          # run-time
    assert named["bf16_d128_scale_sm80"].scale is not None     # built in
    assert r.find(req(scale=0.3), A100).name in ("bf16_d128_scale_sm80",
                                                 "bf16_d128_full_sm80")
    for s in (128 ** -0.5, 0.07, 0.31):
        assert r.find(req(scale=s), A100).name == "bf16_d128_full_sm80"
    assert not K.KernelRequest.make("forward", "bf16", 128, scale=0.31).matches(
        named["bf16_d128_scale_sm80"])
    assert r.find(req(softcap=30.0), A100).name == "bf16_d128_cap_sm80"
    assert r.find(req(softcap=30.0000001), A100).name == "bf16_d128_cap_sm80"
    with pytest.raises(KernelNotFoundError):
        r.find(req(softcap=31.0), A100)
    with pytest.raises(KernelNotFoundError):
        r.find(req(softcap=30.0, causal=True), A100)
    # a run-time softcap serves any value, and only calls with a softcap
    put(kdir, "bf16_d128_rtcap_sm80", softcap="runtime")
    r = reg(kdir)
    for c in (2.0, 31.0, 50.0):
        assert r.find(req(softcap=c, scale=0.07), A100).name in (
            "bf16_d128_rtcap_sm80",) + (("bf16_d128_cap_sm80",) if c == 30.0 else ())
    assert r.find(req(), A100).name == "bf16_d128_full_sm80"


def test_runtime_window_matching(kdir):
    # A run-time window serves every size of its kind (causal or not); a
    # built-in one (an older manifest) only its own; no window is no kernel.
    put(kdir, "bf16_d64_rtwin_sm80", d=64, window="runtime")
    put(kdir, "bf16_d64_rtcwin_sm80", d=64, causal=True, window="runtime")
    r = reg(kdir)
    named = {x.name: x for x in r.specs()}
    assert "window" in named["bf16_d64_rtwin_sm80"].describe()
    for w in ((123, 45), (0, 1), (-1, 200), (300, -1), (97, 31)):
        assert r.find(req(head_dim=64, window=w), A100).name == "bf16_d64_rtwin_sm80"
    # right = 0 is the causal mask's side, with causal or without
    for causal, w in ((True, (77, 0)), (False, (0, 0)), (False, (12, 0))):
        assert r.find(req(head_dim=64, causal=causal, window=w), A100).name == \
            "bf16_d64_rtcwin_sm80"
    # causal only, and no mask, are other kinds
    assert r.find(req(head_dim=64, causal=True), A100).name != "bf16_d64_rtcwin_sm80"
    assert not K.KernelRequest.make("forward", "bf16", 64).matches(named["bf16_d64_rtwin_sm80"])
    assert not K.KernelRequest.make("forward", "bf16", 64, causal=True, window=(7, 0)).matches(
        named["bf16_d64_rtwin_sm80"])
    # the old built-in (255, 0) kernel still serves its own size
    assert K.KernelRequest.make("forward", "bf16", 64, causal=True, window=(255, 0)).matches(
        named["bf16_d64_causal255_sm80"])
    assert not K.KernelRequest.make("forward", "bf16", 64, causal=True, window=(77, 0)).matches(
        named["bf16_d64_causal255_sm80"])


def test_runtime_window_needs_its_params(tmp_path):
    m = forward_manifest("k", d=64, window="runtime")
    m["params"] = [p for p in m["params"] if p["name"] != "window_right"]
    write_kernel(str(tmp_path), m)
    r = reg(tmp_path)
    assert r.specs() == [] and "window_right" in str(r.invalid())


def test_explicit_default_scale_manifest(tmp_path):
    put(tmp_path, "k", scale=float.fromhex("0x1.6a09e60000000p-4"))  # f32(1/sqrt(128))
    assert reg(tmp_path).find(req(), A100).name == "k"


def test_dir_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    put(b, "second", causal=True)
    put(a, "first", causal=True)
    assert reg(a, b, tmp=tmp_path).find(req(causal=True), A100).name == "first"
    assert reg(b, a, tmp=tmp_path).find(req(causal=True), A100).name == "second"


def test_not_found_message(kdir):
    with pytest.raises(KernelNotFoundError) as ei:
        reg(kdir).find(req(head_dim=96), A100)
    msg = str(ei.value)
    assert "no kernel for kind=forward dtype=bf16 head_dim=96 causal=False" in msg
    assert "Available forward kernels (8)" in msg
    assert "bf16_d128_causal_sm80 [forward sm_80 bf16 D=128 causal]" in msg
    assert "No forward kernel has head dim 96; head dims with kernels: 128, 64." in msg
    assert "Searched: " + str(kdir) in msg
    assert "No fa-compile found" in msg
    assert isinstance(ei.value, ValueError)


def test_invalid_manifests_reported(kdir):
    (kdir / "broken.json").write_text('{"version": 1, "name": "broken"}')
    r = reg(kdir)
    with pytest.warns(RuntimeWarning, match="invalid kernel manifest"):
        specs = r.specs()
    assert len(specs) == 8
    with pytest.raises(KernelNotFoundError, match=r"(?s)Invalid manifests \(1\):.*broken.json"):
        r.find(req(head_dim=96), A100)


def test_empty_search_path(tmp_path):
    with pytest.raises(KernelNotFoundError, match="No forward kernels were found at all"):
        reg(tmp_path / "nothing", tmp=tmp_path).find(req(), A100)


def test_default_search_dirs(monkeypatch, tmp_path):
    monkeypatch.setenv("FLASHMLIR_KERNEL_DIR", f"{tmp_path}/x{os.pathsep}{tmp_path}/y")
    monkeypatch.setenv("FA_BUILD_DIR", str(tmp_path / "bld"))
    monkeypatch.setenv("FLASHMLIR_CACHE_DIR", str(tmp_path / "cache"))
    dirs = K.default_search_dirs()
    assert dirs[:2] == [f"{tmp_path}/x", f"{tmp_path}/y"]
    assert dirs[2].endswith(os.path.join("flashmlir", "kernels"))
    assert dirs[3] == str(tmp_path / "bld" / "kernels")
    assert dirs[4].endswith(os.path.join("build", "kernels"))
    assert dirs[-1] == str(tmp_path / "cache")


# -- fa-compile fallback ---------------------------------------------------------

FAKE_COMPILER = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    sys.path.insert(0, {helpers!r})
    from helpers import backward_example, forward_manifest, write_backward_kernel, write_kernel
    log = {log!r}
    with open(log, "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
    a = sys.argv[1:]
    mode = {mode!r}
    opts = {{}}
    flags = set()
    i = 0
    while i < len(a):
        if a[i] == "-o":
            opts["o"] = a[i + 1]; i += 2; continue
        if "=" in a[i]:
            k, v = a[i][2:].split("=", 1); opts[k] = v
        else:
            flags.add(a[i][2:])
        i += 1
    if mode == "fail" or (mode == "fail90" and opts["chip"] == "sm_90a"):
        sys.stderr.write("fa-compile: error: unsupported thing\\n"); sys.exit(3)
    window = tuple(int(x) for x in opts.get("window", "-1,-1").split(","))
    d = int(opts["head-dim"])
    if mode == "wrong":
        d = 8
    name = "cc_" + opts["chip"] + "_" + str(abs(hash(tuple(a))) % 10**8)
    kw = dict(chip=opts["chip"], dtype=opts["dtype"], d=d, causal="causal" in flags,
              window=window, softcap="runtime" if "softcap" in flags else None, scale=None)
    if opts["kind"] == "backward":
        write_backward_kernel(opts["o"], backward_example("deterministic" in flags, name=name,
                                                          runtime_scalars=True, **kw))
    else:
        write_kernel(opts["o"], forward_manifest(name, **kw))
""")


def make_compiler(tmp_path, mode="ok"):
    path = tmp_path / f"fa-compile-{mode}"
    log = tmp_path / f"log-{mode}"
    path.write_text(FAKE_COMPILER.format(python=sys.executable, log=str(log), mode=mode,
                                         helpers=os.path.dirname(os.path.abspath(__file__))))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), log


def calls(log):
    return [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []


def test_compile_on_demand(tmp_path):
    compiler, log = make_compiler(tmp_path)
    cache = tmp_path / "cache"
    r = K.KernelRegistry([str(tmp_path / "none")], cache=str(cache), compiler=compiler)
    rq = req(head_dim=64, causal=True, window=(255, 0), softcap=2.0, scale=0.3)
    spec = r.find(rq, H)
    assert spec.chip == "sm_90a" and rq.matches(spec)
    assert os.path.dirname(spec.json_path) == str(cache)
    (argv,) = calls(log)
    assert argv[:4] == ["--kind=forward", "--head-dim=64", "--value-head-dim=64", "--dtype=bf16"]
    assert "--causal" in argv and "--window=255,0" in argv
    # the values are run-time parameters: only the softcap's presence is asked for
    assert "--softcap" in argv and "--chip=sm_90a" in argv
    assert not any(x.startswith(("--scale", "--softcap=")) for x in argv)
    assert argv[-2] == "-o"
    # now cached: found without calling the compiler again, also by a new registry
    assert r.find(rq, H).json_path == spec.json_path
    r2 = K.KernelRegistry([str(tmp_path / "none")], cache=str(cache), compiler=compiler)
    assert r2.find(rq, H).json_path == spec.json_path
    assert len(calls(log)) == 1
    # no leftovers of the temporary folder
    assert not [p for p in os.listdir(cache) if p.startswith("compile-")]


def test_compile_default_args(tmp_path):
    compiler, log = make_compiler(tmp_path)
    r = K.KernelRegistry([], cache=str(tmp_path / "c"), compiler=compiler)
    r.find(req(), A100)
    (argv,) = calls(log)
    assert argv == ["--kind=forward", "--head-dim=128", "--value-head-dim=128", "--dtype=bf16",
                    "--chip=sm_80", "-o", argv[-1]]


def test_compile_falls_back_to_sm80(tmp_path):
    compiler, log = make_compiler(tmp_path, "fail90")
    r = K.KernelRegistry([], cache=str(tmp_path / "c"), compiler=compiler)
    assert r.find(req(causal=True), H).chip == "sm_80"
    assert [a[-3] for a in calls(log)] == ["--chip=sm_90a", "--chip=sm_80"]


def test_compile_failure_message(tmp_path):
    compiler, log = make_compiler(tmp_path, "fail")
    r = K.KernelRegistry([], cache=str(tmp_path / "c"), compiler=compiler)
    with pytest.raises(KernelNotFoundError) as ei:
        r.find(req(causal=True), H)
    msg = str(ei.value)
    assert "fa-compile failed:" in msg and "exited with 3" in msg
    assert "unsupported thing" in msg and "--chip=sm_90a" in msg and "--chip=sm_80" in msg
    # failures are remembered: no second attempt in this registry
    with pytest.raises(KernelNotFoundError):
        r.find(req(causal=True), H)
    assert len(calls(log)) == 2


def test_compile_wrong_output(tmp_path):
    compiler, _ = make_compiler(tmp_path, "wrong")
    r = K.KernelRegistry([], cache=str(tmp_path / "c"), compiler=compiler)
    with pytest.raises(KernelNotFoundError, match="wrote no kernel matching"):
        r.find(req(), A100)


def test_compile_disabled(tmp_path):
    compiler, log = make_compiler(tmp_path)
    r = K.KernelRegistry([], cache=str(tmp_path / "c"), compiler=compiler)
    with pytest.raises(KernelNotFoundError):
        r.find(req(), A100, compile=False)
    assert calls(log) == []


def test_find_compiler(monkeypatch, tmp_path):
    compiler, _ = make_compiler(tmp_path)
    monkeypatch.setenv("FLASHMLIR_COMPILER", compiler)
    assert K.find_compiler() == compiler
    monkeypatch.setenv("FLASHMLIR_NO_COMPILE", "1")
    assert K.find_compiler() is None


def test_request_describe_and_args():
    r = req(head_dim=64, window=(97, 31))
    assert r.describe() == ("kind=forward dtype=bf16 head_dim=64 causal=False "
                            "window=(97,31) scale=0.125")
    assert "--window=97,31" in r.compile_args("sm_80", "D")
    assert "--causal" not in r.compile_args("sm_80", "D")
    assert K.KernelRequest.make("forward", "float16", 64).dtype == "f16"


# -- backward kernels ----------------------------------------------------------------

def put_bwd(folder, name, deterministic=False, **kw):
    from helpers import backward_example, write_backward_kernel
    write_backward_kernel(str(folder), backward_example(deterministic, name=name, **kw))


def test_backward_selection(kdir):
    put_bwd(kdir, "bwd_causal_sm90a", causal=True)
    put_bwd(kdir, "bwd_causal_det_sm90a", deterministic=True, causal=True)
    put_bwd(kdir, "bwd_full_sm80", causal=False, chip="sm_80")
    r = reg(kdir)
    assert len(r.specs()) == 11 and r.invalid() == []
    assert r.find(req(kind="backward", causal=True), H).name == "bwd_causal_sm90a"
    assert r.find(req(kind="backward", causal=True, deterministic=True), H).name == \
        "bwd_causal_det_sm90a"
    assert r.find(req(kind="backward"), H).name == "bwd_full_sm80"
    assert r.find(req(causal=True), H).name == "bf16_d128_causal_sm90a"  # forward unaffected
    with pytest.raises(KernelNotFoundError) as ei:
        r.find(req(kind="backward", deterministic=True), H)
    msg = str(ei.value)
    assert "no kernel for kind=backward dtype=bf16 head_dim=128 causal=False scale=0.088388348 " \
           "deterministic=True" in msg
    assert "Available backward kernels (3)" in msg
    assert "bwd_causal_det_sm90a [backward sm_90a bf16 D=128 causal deterministic]" in msg
    # an sm_90a backward does not run on an A100
    with pytest.raises(KernelNotFoundError, match="no kernel for kind=backward .* on sm_80"):
        r.find(req(kind="backward", causal=True), A100)


def test_backward_request():
    r = req(kind="backward", head_dim=64, causal=True, deterministic=True)
    assert r.describe() == ("kind=backward dtype=bf16 head_dim=64 causal=True scale=0.125 "
                            "deterministic=True")
    assert r.compile_args("sm_90a", "D") == [
        "--kind=backward", "--head-dim=64", "--value-head-dim=64", "--dtype=bf16", "--causal",
        "--deterministic", "--chip=sm_90a", "-o", "D"]
    assert "--deterministic" not in req(kind="backward").compile_args("sm_90a", "D")
    assert req().deterministic is False
    with pytest.raises(ValueError, match="deterministic applies to backward kernels only"):
        req(deterministic=True)
    with pytest.raises(ValueError, match="unknown kernel kind 'backward_preprocess'"):
        req(kind="backward_preprocess")


def test_compile_backward_on_demand(tmp_path):
    compiler, log = make_compiler(tmp_path)
    cache = tmp_path / "cache"
    r = K.KernelRegistry([], cache=str(cache), compiler=compiler)
    rq = req(kind="backward", head_dim=64, causal=True, deterministic=True)
    spec = r.find(rq, H)
    assert spec.kind == "backward" and spec.deterministic and spec.chip == "sm_90a"
    assert [k.entry for k in spec.kernels][-1] == "fa_bwd_dq_kernel"
    (argv,) = calls(log)
    assert argv[:4] == ["--kind=backward", "--head-dim=64", "--value-head-dim=64", "--dtype=bf16"]
    assert "--deterministic" in argv and "--causal" in argv
    assert r.find(rq, H).json_path == spec.json_path and len(calls(log)) == 1
    # the fast mode is another variant: compiled separately
    fast = r.find(req(kind="backward", head_dim=64, causal=True), H)
    assert not fast.deterministic and len(calls(log)) == 2


def test_variants():
    from flashmlir import _variants
    fwd, bwd = _variants.forward_variants(), _variants.backward_variants()
    assert len(fwd) == 20 and all(v["kind"] == "forward" for v in fwd)
    assert len(bwd) == 20 + 8 and all(v["kind"] == "backward" for v in bwd)
    det = [v for v in bwd if v.get("deterministic")]
    assert len(det) == 8 and {v.get("causal", False) for v in det} == {False, True}
    assert all(set(v) <= {"kind", "dtype", "head_dim", "value_head_dim", "deterministic",
                          "causal"} for v in det)
    fast = [{k: v for k, v in b.items() if k != "kind"} for b in bwd if not b.get("deterministic")]
    assert fast == [{k: v for k, v in f.items() if k != "kind"} for f in fwd]
    hd = _variants.head_dim_variants()
    split = _variants.split_kv_variants()
    assert len(split) == 8 and all(v["split_kv"] and v["kind"] == "forward" for v in split)
    seq = _variants.varlen_variants() + _variants.paged_variants()
    assert _variants.variants() == (fwd + split + seq + bwd + _variants.varlen_backward_variants()
                                    + hd)
    assert _variants.variants(forms=("dense",)) == fwd + split + bwd + hd
    assert _variants.variants(("backward",)) == (bwd + _variants.varlen_backward_variants()
                                                 + _variants.head_dim_variants(("backward",)))
    pairs = {(v["head_dim"], v["value_head_dim"]) for v in hd}
    assert pairs == set(_variants.HEAD_DIM_PAIRS) and (192, 128) in pairs
    assert [v for v in hd if v.get("deterministic")] and all(
        v["kind"] == "backward" for v in hd if v.get("deterministic"))
    for v in bwd + hd + split:
        K.KernelRequest.make(**v)  # every variant is a valid request
    assert "--kv-splits=auto" in K.KernelRequest.make(**split[0]).compile_args("sm_90a", "o")


def test_cli_variants_and_compile(tmp_path, capsys):
    from flashmlir import __main__ as cli
    assert cli.main(["variants", "--kind", "backward", "--chip", "sm_90a"]) == 0
    from flashmlir import _variants
    bwd = _variants.variants(("backward",))
    ndet = sum(bool(v.get("deterministic")) for v in bwd)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(bwd) == 66 + 11     # + the packed backward
    assert sum("--form=varlen" in l for l in lines) == 11
    assert all(l.startswith("fa-compile --kind=backward ") for l in lines)
    assert sum("--deterministic" in l for l in lines) == ndet == 14
    assert cli.main(["variants", "--chip", "sm_80"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(_variants.variants()) == 126 + 45 + 11
    assert cli.main(["variants", "--form", "paged"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 * len(_variants.paged_variants()) == 68
    assert all("--form=paged --page-size=" in l for l in lines)
    compiler, log = make_compiler(tmp_path)
    out = tmp_path / "kernels"
    assert cli.main(["compile", "-o", str(out), "--kind", "backward", "--chip", "sm_90a",
                     "--compiler", compiler]) == 0
    assert "0 failure(s)" in capsys.readouterr().out
    specs = K.KernelRegistry([str(out)], cache=str(tmp_path / "c"), compiler=None).specs()
    assert len(specs) == len(bwd) and all(s.kind == "backward" for s in specs)
    assert sum(s.deterministic for s in specs) == ndet


def test_compile_on_demand_prints_progress(tmp_path, capsys, monkeypatch):
    compiler, _ = make_compiler(tmp_path)
    r = K.KernelRegistry([], cache=str(tmp_path / "c"), compiler=compiler)
    r.find(req(head_dim=64), H)
    r.find(req(head_dim=64, causal=True), H)
    err = capsys.readouterr().err.splitlines()
    starts = [l for l in err if "compiling kind=forward" in l]
    assert len(starts) == 2 and "] compiling" in starts[1] and "for sm_90a" in starts[0]
    assert sum("done in" in l for l in err) == 2
    monkeypatch.setenv("FLASHMLIR_QUIET", "1")
    r.find(req(head_dim=64, softcap=3.0), H)
    assert capsys.readouterr().err == ""
