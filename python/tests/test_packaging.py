"""Packaging (CPU only): `pip install ./python` offline through the in-tree
build backend, kernels shipped in the package's kernels/ folder and found
without environment variables, the editable install, `python -m flashmlir`
reporting what is installed, and the one command that builds the AOT
default set (with the real fa-compile when the build has one)."""

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from helpers import example, write_kernel

PY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(PY_DIR)


def _env(**extra):
    """An environment without the variables that point at kernels."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FLASHMLIR_", "FA_BUILD_DIR", "PYTHONPATH"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def _pip():
    try:
        import pip  # noqa: F401
    except ImportError:
        pytest.skip("pip is not installed for this Python")
    return [sys.executable, "-m", "pip"]


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def source_with_kernel(tmp_path_factory):
    """A copy of python/ whose flashmlir/kernels/ holds one (fake) kernel."""
    src = tmp_path_factory.mktemp("src") / "python"
    shutil.copytree(PY_DIR, src, ignore=shutil.ignore_patterns(
        "__pycache__", "tests", "kernels", "dist", "build", "*.egg-info"))
    write_kernel(str(src / "flashmlir" / "kernels"), example(name="shipped_fwd_sm80"))
    return src


def test_wheel_builds_offline_and_ships_kernels(source_with_kernel, tmp_path):
    _run(_pip() + ["wheel", "--no-deps", "--no-index", "-w", str(tmp_path / "w"),
                   str(source_with_kernel)], env=_env())
    (whl,) = os.listdir(tmp_path / "w")
    assert whl.startswith("flashmlir-") and whl.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(tmp_path / "w" / whl).namelist()
    for mod in ("__init__", "__main__", "_interface", "_ops", "_plan", "_compat", "_reference",
                "integrations/transformers"):
        assert f"flashmlir/{mod}.py" in names
    assert "flashmlir/kernels/shipped_fwd_sm80.json" in names
    assert "flashmlir/kernels/shipped_fwd_sm80.ptx" in names
    dist = [n for n in names if ".dist-info/" in n]
    assert {os.path.basename(n) for n in dist} >= {"METADATA", "WHEEL", "RECORD",
                                                   "entry_points.txt"}
    # installed elsewhere, it finds the shipped kernel with no environment variable
    target = tmp_path / "site"
    _run(_pip() + ["install", "--no-deps", "--no-index", "--target", str(target),
                   str(tmp_path / "w" / whl)], env=_env())
    code = ("import flashmlir, flashmlir._kernels as K; r = K.default_registry(); "
            "print(flashmlir.__file__); print([s.json_path for s in r.specs()])")
    out = _run([sys.executable, "-c", code], env=_env(PYTHONPATH=str(target)),
               cwd=str(tmp_path)).stdout.splitlines()
    assert out[0].startswith(str(target))
    assert json.loads(out[1].replace("'", '"')) == [
        str(target / "flashmlir" / "kernels" / "shipped_fwd_sm80.json")]
    info = _run([sys.executable, "-m", "flashmlir"], env=_env(PYTHONPATH=str(target)),
                cwd=str(tmp_path)).stdout
    assert "[the package's]" in info and "default kernel set on" in info
    assert f"{target}/flashmlir/kernels [the package's]" in " ".join(info.split())


def test_pip_install_from_the_repo(tmp_path):
    """`pip install ./python` itself (build isolation on, no index)."""
    _run(_pip() + ["install", "--no-deps", "--no-index", "--target", str(tmp_path / "t"),
                   PY_DIR], env=_env())
    assert (tmp_path / "t" / "flashmlir" / "_ops.py").exists()
    assert not (tmp_path / "t" / "tests").exists()


def test_editable_and_sdist(tmp_path):
    sys.path.insert(0, PY_DIR)
    try:
        import flashmlir_build as B
    finally:
        sys.path.remove(PY_DIR)
    whl = B.build_editable(str(tmp_path))
    z = zipfile.ZipFile(tmp_path / whl)
    (pth,) = [n for n in z.namelist() if n.endswith(".pth")]
    assert z.read(pth).decode().strip() == PY_DIR
    sd = B.build_sdist(str(tmp_path))
    import tarfile
    members = tarfile.open(tmp_path / sd).getnames()
    assert any(m.endswith("/pyproject.toml") for m in members)
    assert any(m.endswith("/flashmlir/_plan.py") for m in members)


def _real_compiler():
    for d in (os.environ.get("FA_BUILD_DIR"), os.path.join(REPO, "build")):
        if d and os.access(os.path.join(d, "bin", "fa-compile"), os.X_OK):
            return os.path.join(d, "bin", "fa-compile")
    return None


def test_compile_default_set_with_fa_compile(tmp_path):
    """The one command that builds the AOT set (here for sm_80 only, into a
    folder; without -o it writes the package's kernels/), checked against
    the PTX."""
    compiler = _real_compiler()
    if compiler is None:
        pytest.skip("no fa-compile in the build folder")
    out = tmp_path / "k"
    proc = _run([sys.executable, "-m", "flashmlir", "compile", "--default-set", "--chip", "sm_80",
                 "-o", str(out), "-j", "2", "--compiler", compiler],
                env=_env(PYTHONPATH=PY_DIR))
    assert "[16/16] ok" in proc.stdout and "16 of 16 kernel(s) built" in proc.stdout
    check = _run([sys.executable, "-m", "flashmlir", "check", str(out)],
                 env=_env(PYTHONPATH=PY_DIR)).stdout
    assert check.count("  ok   ") == 16 and "FAIL" not in check


def test_default_set_matches_fa_compile():
    from flashmlir import _variants
    vs = _variants.default_set()
    assert len(vs) == 16 and len(_variants.DEFAULT_CHIPS) == 2
    assert {v["kind"] for v in vs} == {"forward", "backward"}


def test_split_kv_manifest_from_fa_compile(tmp_path):
    """fa-compile --kv-splits=auto: the package reads the split-KV forward
    (two launches, the partials as workspace sized by the run-time split
    count), only split requests match it, and the workspace and grid agree
    on S for a decode shape."""
    compiler = _real_compiler()
    if compiler is None:
        pytest.skip("no fa-compile in the build folder")
    proc = _run([compiler, "--kind=forward", "--head-dim=128", "--dtype=bf16",
                 "--chip=sm_90a", "--kv-splits=auto", "-o", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr
    from flashmlir import _kernels as K, _manifest as M
    spec = M.load_manifest(str(tmp_path / "fa_fwd_d128_bf16_splitkv_sm90a.json"))
    assert spec.kv_splits == "auto" and spec.is_multi_launch
    assert [k.entry for k in spec.kernels] == ["fa_fwd_kernel", "fa_fwd_merge_kernel"]
    split = K.KernelRequest.make("forward", "bf16", 128, split_kv=True)
    assert split.matches(spec) and not K.KernelRequest.make("forward", "bf16", 128).matches(spec)
    # Decoding 8 sequences x 8 KV heads (GQA-packed: Hq = Hkv = 8 rows of 4)
    # on 132 SMs: S = min(2 * 132 // 64, ceil(4096 / 64), 64) = 4.
    env = {"B": 8, "Hq": 8, "Hkv": 8, "Nq": 4, "Nk": 4096, "D": 128, "Dv": 128, "G": 1,
           "SMS": 132}
    ws = {w.name: tuple(d.evaluate(env) for d in w.dims) for w in spec.workspace}
    assert ws == {"out_partial": (8, 32, 4, 128), "lse_partial": (8, 32, 4)}
    assert tuple(g.evaluate(env) for g in spec.kernels[0].grid) == (4, 8, 8)
    assert tuple(g.evaluate(env) for g in spec.kernels[1].grid) == (4, 8, 8)
