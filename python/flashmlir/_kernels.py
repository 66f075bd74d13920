"""Kernel discovery, selection, on-demand compilation and loading.

Search path (first match wins; see `default_search_dirs`):
  1. every folder in $FLASHMLIR_KERNEL_DIR (os.pathsep-separated),
  2. the package's own ``kernels/`` folder,
  3. ``$FA_BUILD_DIR/kernels`` when FA_BUILD_DIR is set, then ``<repo>/build/kernels``,
  4. the compile cache ($FLASHMLIR_CACHE_DIR, default ~/.cache/flashmlir).

Selection and discovery need neither torch nor a GPU; `load_kernel` needs
the CUDA driver.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from . import _manifest as M
from ._errors import CompileError, KernelNotFoundError, LaunchError, ManifestError

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_DIR = os.path.dirname(os.path.dirname(_PKG_DIR))

# Chips `fa-compile` can target, most preferred first.
COMPILER_CHIPS = ("sm_90a", "sm_80")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def cache_dir() -> str:
    env = os.environ.get("FLASHMLIR_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flashmlir")


def package_kernel_dir() -> str:
    """The package's own kernels/ folder (what a wheel ships; built by
    `python3 -m flashmlir compile --default-set`)."""
    return os.path.join(_PKG_DIR, "kernels")


def default_search_dirs() -> List[str]:
    dirs: List[str] = []
    env = os.environ.get("FLASHMLIR_KERNEL_DIR", "")
    dirs += [d for d in env.split(os.pathsep) if d]
    dirs.append(package_kernel_dir())
    if os.environ.get("FA_BUILD_DIR"):
        dirs.append(os.path.join(os.environ["FA_BUILD_DIR"], "kernels"))
    dirs.append(os.path.join(_REPO_DIR, "build", "kernels"))
    dirs.append(cache_dir())
    out: List[str] = []
    for d in dirs:
        d = os.path.abspath(os.path.expanduser(d))
        if d not in out:
            out.append(d)
    return out


def find_compiler() -> Optional[str]:
    """The `fa-compile` executable, or None ($FLASHMLIR_NO_COMPILE=1 disables
    compilation; $FLASHMLIR_COMPILER names the executable explicitly)."""
    if _env_flag("FLASHMLIR_NO_COMPILE"):
        return None
    env = os.environ.get("FLASHMLIR_COMPILER")
    if env:
        return env if os.access(env, os.X_OK) else shutil.which(env)
    found = shutil.which("fa-compile")
    if found:
        return found
    cands = []
    if os.environ.get("FA_BUILD_DIR"):
        cands.append(os.path.join(os.environ["FA_BUILD_DIR"], "bin", "fa-compile"))
    cands.append(os.path.join(_REPO_DIR, "build", "bin", "fa-compile"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


@dataclass(frozen=True)
class Modifiers:
    """The score_mod / mask_mod of a request (`Modifiers.of(traced)`, from a
    `_modifiers.Traced`): `key`, the sha256 of the traced regions and the
    captures' types (what a kernel's manifest names as its modifiers key);
    `module`, the MLIR fa-compile --modifiers reads; `captures`, each
    captured tensor's (dtype, shape). Requests compare by key."""

    key: str
    module: str = dataclasses.field(compare=False, repr=False, default="")
    captures: Tuple[Tuple[str, Tuple[int, ...]], ...] = dataclasses.field(
        compare=False, default=())
    # The query rows per group of the run-time key ranges (the op's
    # key_ranges(%r rows G); None: none; part of the key). A forward kernel
    # takes them; a backward one the queries of each group of G keys
    # (query_ranges) and, deterministic, the key ranges too.
    key_range_rows: Optional[int] = dataclasses.field(compare=False, default=None)

    # The q / k / v shapes of the module (fa-compile's flags describe the
    # kernel; the module only brings the regions and their captures).
    _SHAPE = (1, 1, 128, 64)

    @staticmethod
    def of(traced) -> "Modifiers":
        return Modifiers(traced.digest(), traced.module(Modifiers._SHAPE, Modifiers._SHAPE,
                                                        Modifiers._SHAPE, "bf16"),
                         tuple(traced.capture_specs()), traced.key_range_rows)

    def write(self, folder: str) -> str:
        """Writes `module` to <folder>/modifiers-<key>.mlir; returns the path."""
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"modifiers-{self.key}.mlir")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.module)
        return path


# Hex digits of the modifiers key in the names of the kernels compiled for
# them (so the cache files of different modifiers never collide).
MODIFIERS_NAME_DIGITS = 16


@dataclass(frozen=True)
class KernelRequest:
    """What a call needs: every compile-time property of a kernel. Only a
    backward has two modes (`deterministic`: dq without atomics, bitwise
    repeatable); a forward request always has deterministic False."""

    kind: str
    dtype: str
    head_dim: int
    value_head_dim: int
    mask: Tuple[int, int]          # canonical (left, right); -1 unbounded
    softcap: Optional[float]
    scale: float                   # resolved (never None)
    deterministic: bool = False
    # A split-KV forward (decoding: the keys of a query block in chunks run
    # in parallel, merged by their LSEs) instead of the plain one.
    split_kv: bool = False
    # The tensor form (_manifest.FORMS: dense, varlen packed sequences, a
    # paged cache) and a paged kernel's keys per page: a request matches
    # kernels of its form (and page size) only.
    form: str = M.DENSE
    page_size: Optional[int] = None
    # A score_mod / mask_mod (Modifiers): a request matches kernels of its
    # modifiers' key only, a request without them no kernel with modifiers.
    modifiers: Optional[Modifiers] = None

    def __post_init__(self):
        if self.kind not in M.KINDS:
            raise ValueError(f"unknown kernel kind {self.kind!r} (known: {', '.join(M.KINDS)})")
        if self.deterministic and self.kind != "backward":
            raise ValueError("deterministic applies to backward kernels only")
        if self.split_kv and self.kind != "forward":
            raise ValueError("split_kv applies to forward kernels only")
        if self.form not in M.FORMS:
            raise ValueError(f"unknown form {self.form!r} (known: {', '.join(M.FORMS)})")
        if self.form == M.PAGED and self.kind != "forward":
            raise ValueError("the paged form has forward kernels only")
        if self.form == M.VARLEN and self.deterministic:
            raise ValueError("packed sequences have no deterministic backward kernel")
        if self.form == M.VARLEN and self.split_kv:
            raise ValueError("split_kv takes dense tensors or a paged cache, not packed "
                             "sequences")
        if self.modifiers is not None and (self.form != M.DENSE or self.split_kv):
            raise ValueError("score_mod / mask_mod have dense forward and backward kernels "
                             "only (no split-KV, packed or paged kernel computes them yet)")
        if self.modifiers is not None and not isinstance(self.modifiers, Modifiers):
            raise TypeError(f"modifiers must be a Modifiers, got {type(self.modifiers).__name__}")
        if (self.form == M.PAGED) != (self.page_size is not None):
            raise ValueError("page_size is required by the paged form and only by it")
        if self.page_size is not None and (
                isinstance(self.page_size, bool) or not isinstance(self.page_size, int)
                or self.page_size < M.PAGE_SIZE_MULTIPLE or self.page_size > M.MAX_PAGE_SIZE
                or self.page_size % M.PAGE_SIZE_MULTIPLE):
            raise ValueError(f"page_size must be a multiple of {M.PAGE_SIZE_MULTIPLE} in "
                             f"[{M.PAGE_SIZE_MULTIPLE}, {M.MAX_PAGE_SIZE}], got "
                             f"{self.page_size!r}")

    @staticmethod
    def make(kind: str, dtype: str, head_dim: int, value_head_dim: Optional[int] = None,
             causal: bool = False, window=None, softcap: Optional[float] = None,
             scale: Optional[float] = None, deterministic: bool = False,
             split_kv: bool = False, form: str = M.DENSE,
             page_size: Optional[int] = None,
             modifiers: Optional[Modifiers] = None) -> "KernelRequest":
        return KernelRequest(kind, M.normalize_dtype(dtype), int(head_dim),
                             int(value_head_dim if value_head_dim is not None else head_dim),
                             M.canonical_mask(causal, window),
                             None if softcap is None else float(softcap),
                             float(scale) if scale is not None else M.default_scale(head_dim),
                             bool(deterministic), bool(split_kv), form,
                             None if page_size is None else int(page_size), modifiers)

    @property
    def causal(self) -> bool:
        return self.mask[1] == 0

    def matches(self, spec: M.KernelSpec) -> bool:
        if (spec.kind, spec.dtype, spec.head_dim, spec.value_head_dim) != (
                self.kind, self.dtype, self.head_dim, self.value_head_dim):
            return False
        if (spec.form, spec.page_size) != (self.form, self.page_size):
            return False
        # Kernels with modifiers serve requests of their key only (a kernel
        # compiled without a key none), the others requests without any.
        if (spec.modifiers is None) != (self.modifiers is None):
            return False
        if self.modifiers is not None and spec.modifiers_key != self.modifiers.key:
            return False
        if self.kind == "backward" and spec.deterministic != self.deterministic:
            return False
        # A split request takes run-time split counts only (the count is the
        # IR's choice per call), a plain one no split kernel.
        if spec.kv_splits != ("auto" if self.split_kv else None):
            return False
        if not spec.serves_mask(self.mask):
            return False
        return spec.serves_scalars(self.scale, self.softcap)

    def describe(self) -> str:
        left, right = self.mask
        bits = [f"kind={self.kind}", f"dtype={self.dtype}", f"head_dim={self.head_dim}"]
        if self.form != M.DENSE:
            bits.insert(1, f"form={self.form}")
        if self.page_size is not None:
            bits.insert(2, f"page_size={self.page_size}")
        if self.value_head_dim != self.head_dim:
            bits.append(f"value_head_dim={self.value_head_dim}")
        bits.append(f"causal={self.causal}")
        if left >= 0 or right > 0:
            bits.append(f"window=({left},{right})")
        if self.softcap is not None:
            bits.append(f"softcap={self.softcap:g}")
        bits.append(f"scale={self.scale:.8g}")
        if self.kind == "backward":
            bits.append(f"deterministic={self.deterministic}")
        if self.split_kv:
            bits.append("split_kv=True")
        if self.modifiers is not None:
            bits.append(f"modifiers={self.modifiers.key[:MODIFIERS_NAME_DIGITS]}")
        return " ".join(bits)

    def kernel_name(self, chip: str) -> str:
        """The --name of a kernel with modifiers: fa-compile's kind of name
        (fa_fwd_... / fa_bwd_..._det) plus a hash of the key, unique per
        variant and modifiers."""
        left, right = self.mask
        bits = [f"fa_{'bwd' if self.kind == 'backward' else 'fwd'}_d{self.head_dim}"]
        if self.value_head_dim != self.head_dim:
            bits.append(f"dv{self.value_head_dim}")
        bits.append(self.dtype)
        if right == 0:
            bits.append("causal")
        if M.is_windowed(self.mask):
            bits.append("window")
        if self.softcap is not None:
            bits.append("softcap")
        if self.deterministic:
            bits.append("det")
        if self.modifiers.key_range_rows is not None:
            bits.append(f"kr{self.modifiers.key_range_rows}")
        bits += [chip.replace("_", ""), "mod", self.modifiers.key[:MODIFIERS_NAME_DIGITS]]
        return "_".join(bits)

    def compile_args(self, chip: str, out_dir: str) -> List[str]:
        args = [f"--kind={self.kind}", f"--head-dim={self.head_dim}",
                f"--value-head-dim={self.value_head_dim}", f"--dtype={self.dtype}"]
        if self.form != M.DENSE:
            args.append(f"--form={self.form}")
        if self.page_size is not None:
            args.append(f"--page-size={self.page_size}")
        left, right = self.mask
        if right == 0:
            args.append("--causal")
            if left >= 0:
                args.append(f"--window={left},0")
        elif (left, right) != (-1, -1):
            args.append(f"--window={left},{right}")
        # The scale and the softcap value are run-time kernel parameters: only
        # the presence of a softcap selects a kernel.
        if self.softcap is not None:
            args.append("--softcap")
        if self.deterministic:
            args.append("--deterministic")
        if self.split_kv:
            args.append("--kv-splits=auto")
        if self.modifiers is not None:
            # (The module in a folder of its own: _compile_one moves the
            # compile's files into the cache.)
            source = self.modifiers.write(os.path.join(out_dir, "modifiers"))
            args += [f"--modifiers={source}", f"--modifiers-key={self.modifiers.key}",
                     f"--name={self.kernel_name(chip)}"]
        args += [f"--chip={chip}", "-o", out_dir]
        return args


_compiles = [0]


def _progress(msg: str, count: bool = True) -> None:
    """A progress line on stderr for kernels compiled on demand, numbered
    within the process ([3] ...), unless FLASHMLIR_QUIET=1."""
    if count:
        _compiles[0] += 1
    if _env_flag("FLASHMLIR_QUIET"):
        return
    prefix = f"flashmlir: [{_compiles[0]}] " if count else "flashmlir:     "
    print(prefix + msg, file=sys.stderr, flush=True)


def _forced_chip() -> Optional[str]:
    chip = os.environ.get("FLASHMLIR_CHIP", "").strip()
    return chip or None


class KernelRegistry:
    """The kernels found in a list of folders, plus what it compiles."""

    def __init__(self, search_dirs: Optional[Sequence[str]] = None,
                 cache: Optional[str] = None, compiler: Optional[str] = "auto"):
        self.search_dirs = [os.path.abspath(d) for d in
                            (search_dirs if search_dirs is not None else default_search_dirs())]
        self.cache = os.path.abspath(cache) if cache else cache_dir()
        self._compiler = compiler
        self._lock = threading.RLock()
        self._specs: Optional[List[Tuple[int, M.KernelSpec]]] = None
        self._invalid: List[Tuple[str, str]] = []
        self._compile_failures: Dict[Tuple, str] = {}

    # -- discovery -----------------------------------------------------------
    def refresh(self) -> None:
        with self._lock:
            self._specs = None

    def _scan(self) -> None:
        specs: List[Tuple[int, M.KernelSpec]] = []
        invalid: List[Tuple[str, str]] = []
        dirs = list(self.search_dirs)
        if self.cache not in dirs:
            dirs.append(self.cache)
        for i, d in enumerate(dirs):
            if not os.path.isdir(d):
                continue
            for path in sorted(glob.glob(os.path.join(d, "*.json"))):
                try:
                    spec = M.load_manifest(path)
                except ManifestError as exc:
                    invalid.append((path, str(exc)))
                    continue
                specs.append((i, spec))  # earlier folders win at selection
        for path, err in invalid:
            warnings.warn(f"flashmlir: ignoring invalid kernel manifest: {err}",
                          RuntimeWarning, stacklevel=3)
        self._specs = specs
        self._invalid = invalid

    def specs(self) -> List[M.KernelSpec]:
        with self._lock:
            if self._specs is None:
                self._scan()
            return [s for _, s in self._specs]

    def invalid(self) -> List[Tuple[str, str]]:
        with self._lock:
            if self._specs is None:
                self._scan()
            return list(self._invalid)

    # -- selection -------------------------------------------------------------
    def candidates(self, request: KernelRequest, cc: Tuple[int, int]) -> List[M.KernelSpec]:
        """Every kernel that computes `request` and runs on `cc`, best first."""
        forced = _forced_chip()
        with self._lock:
            if self._specs is None:
                self._scan()
            ranked = []
            for order, spec in self._specs:
                if not request.matches(spec):
                    continue
                if forced and spec.chip != forced:
                    continue
                pref = M.chip_preference(spec.chip, cc)
                if pref is None:
                    continue
                ranked.append((pref, order, spec.name, spec))
        ranked.sort(key=lambda r: r[:3])
        return [r[3] for r in ranked]

    def page_sizes(self, request: KernelRequest, cc: Tuple[int, int]) -> List[int]:
        """The page sizes of the existing paged kernels that compute `request`
        but for its page size (any it has) and run on `cc`, largest first."""
        sizes = set()
        with self._lock:
            if self._specs is None:
                self._scan()
            specs = [s for _, s in self._specs if s.form == M.PAGED]
        for spec in specs:
            probe = dataclasses.replace(request, form=M.PAGED, page_size=spec.page_size)
            if probe.matches(spec) and M.chip_preference(spec.chip, cc) is not None and (
                    not _forced_chip() or spec.chip == _forced_chip()):
                sizes.add(spec.page_size)
        return sorted(sizes, reverse=True)

    def find(self, request: KernelRequest, cc: Tuple[int, int],
             compile: bool = True) -> M.KernelSpec:
        """The best kernel for `request` on a device of capability `cc`;
        compiles it with fa-compile when none exists and a compiler is
        available; raises KernelNotFoundError otherwise."""
        cc = tuple(cc)
        if cc < (8, 0):
            raise KernelNotFoundError(
                f"flashmlir kernels need an NVIDIA GPU of compute capability 8.0 "
                f"(sm_80) or newer; this device is {cc[0]}.{cc[1]}")
        forced = _forced_chip()
        if forced:
            try:
                ok = M.chip_runs_on(forced, cc)
            except ManifestError as exc:
                raise KernelNotFoundError(f"FLASHMLIR_CHIP: {exc}") from None
            if not ok:
                raise KernelNotFoundError(
                    f"FLASHMLIR_CHIP={forced} cannot run on a device of compute "
                    f"capability {cc[0]}.{cc[1]}")
        found = self.candidates(request, cc)
        if found:
            return found[0]
        compiler = find_compiler() if self._compiler == "auto" else self._compiler
        errors: List[str] = []
        if compile and compiler:
            spec = self._compile(compiler, request, cc, errors)
            if spec is not None:
                return spec
        raise KernelNotFoundError(self._not_found_message(request, cc, compiler, errors))

    def _not_found_message(self, request, cc, compiler, errors) -> str:
        lines = [f"flashmlir: no kernel for {request.describe()} on sm_{cc[0]}{cc[1]}"
                 + (f" (FLASHMLIR_CHIP={_forced_chip()})" if _forced_chip() else "") + "."]
        specs = self.specs()
        same_kind = [s for s in specs if s.kind == request.kind and s.form == request.form]
        what = request.kind if request.form == M.DENSE else f"{request.form} {request.kind}"
        if same_kind:
            lines.append(f"Available {what} kernels ({len(same_kind)}):")
            for s in same_kind[:60]:
                lines.append("  " + s.describe())
            if len(same_kind) > 60:
                lines.append(f"  ... and {len(same_kind) - 60} more")
            dims = sorted({(s.dtype, s.head_dim, s.value_head_dim) for s in same_kind})
            if request.page_size is not None and not any(
                    s.page_size == request.page_size for s in same_kind):
                lines.append(f"No {what} kernel has page size {request.page_size}; page sizes "
                             "with kernels: " + ", ".join(
                                 str(p) for p in sorted({s.page_size for s in same_kind})) + ".")
            if not any(d[1:] == (request.head_dim, request.value_head_dim) for d in dims):
                lines.append(f"No {what} kernel has head dim {request.head_dim}"
                             + (f"/{request.value_head_dim}"
                                if request.value_head_dim != request.head_dim else "")
                             + "; head dims with kernels: "
                             + ", ".join(sorted({str(d[1]) for d in dims})) + ".")
        else:
            lines.append(f"No {what} kernels were found at all.")
        if request.modifiers is not None:
            lines.append(f"Kernels with modifiers serve their key only; none has key "
                         f"{request.modifiers.key} (score_mod / mask_mod traced with these "
                         "captures' shapes and dtypes). Compile it where fa-compile is "
                         "(KernelRegistry.find) into a folder on FLASHMLIR_KERNEL_DIR.")
        lines.append("Searched: " + ", ".join(self.search_dirs + (
            [self.cache] if self.cache not in self.search_dirs else [])))
        bad = self.invalid()
        if bad:
            lines.append(f"Invalid manifests ({len(bad)}):")
            lines += ["  " + err for _, err in bad[:10]]
        if errors:
            lines.append("fa-compile failed:")
            lines += ["  " + e for e in errors]
        elif not compiler:
            lines.append("No fa-compile found (PATH, $FLASHMLIR_COMPILER, <repo>/build/bin) "
                         "to build the missing variant; set FLASHMLIR_KERNEL_DIR to a folder "
                         "of compiled kernels.")
        return "\n".join(lines)

    # -- compilation -------------------------------------------------------------
    def _compile(self, compiler: str, request: KernelRequest, cc, errors: List[str]):
        forced = _forced_chip()
        chips = [forced] if forced else [c for c in COMPILER_CHIPS if M.chip_runs_on(c, cc)]
        for chip in chips:
            key = (request, chip)
            if key in self._compile_failures:
                errors.append(self._compile_failures[key])
                continue
            try:
                spec = self._compile_one(compiler, request, chip)
            except CompileError as exc:
                self._compile_failures[key] = str(exc)
                errors.append(str(exc))
                continue
            if spec is not None:
                return spec
        return None

    def _compile_one(self, compiler: str, request: KernelRequest, chip: str):
        os.makedirs(self.cache, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="compile-", dir=self.cache) as tmp:
            cmd = [compiler] + request.compile_args(chip, tmp)
            timeout = float(os.environ.get("FLASHMLIR_COMPILE_TIMEOUT", "600"))
            _progress(f"compiling {request.describe()} for {chip} (not in the package or "
                      f"the cache; once, into {self.cache}) ...")
            t0 = time.time()
            try:
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise CompileError(f"{' '.join(cmd)}: timed out after {timeout:g} s") from None
            except OSError as exc:
                raise CompileError(f"{' '.join(cmd)}: {exc}") from None
            _progress(f"  {'done' if proc.returncode == 0 else 'failed'} in "
                      f"{time.time() - t0:.1f} s", count=False)
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout or "").strip()[-4000:]
                raise CompileError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{tail}")
            produced = sorted(glob.glob(os.path.join(tmp, "*.json")))
            if not produced:
                raise CompileError(f"{' '.join(cmd)} wrote no manifest into {tmp}")
            problems = []
            for path in produced:  # validate everything before touching the cache
                try:
                    M.load_manifest(path)
                except ManifestError as exc:
                    problems.append(str(exc))
            if problems:
                raise CompileError(f"{' '.join(cmd)} wrote invalid output: "
                                   + "; ".join(problems))
            # PTX (and anything else) first, so a manifest never points at nothing.
            for f in sorted(os.listdir(tmp)):
                if not f.endswith(".json") and os.path.isfile(os.path.join(tmp, f)):
                    os.replace(os.path.join(tmp, f), os.path.join(self.cache, f))
            for path in produced:
                os.replace(path, os.path.join(self.cache, os.path.basename(path)))
            matched = None
            for path in produced:
                final = M.load_manifest(os.path.join(self.cache, os.path.basename(path)))
                if matched is None and request.matches(final):
                    matched = final
            if matched is None:
                raise CompileError(
                    f"{' '.join(cmd)} succeeded but wrote no kernel matching "
                    f"{request.describe()} (wrote: {', '.join(os.path.basename(p) for p in produced)})")
        self.refresh()
        return matched


# ---------------------------------------------------------------------------
# Loading (needs the CUDA driver)
# ---------------------------------------------------------------------------

class LoadedKernel:
    """A kernel loaded on one device: the CUfunction and its limits. `spec`
    describes the launch (the KernelSpec of a forward, an EntrySpec for each
    kernel of a backward); `manifest` is the KernelSpec it came from."""

    def __init__(self, spec, device, module: int, function: int,
                 attrs: Dict[str, int], jit_log: str, manifest: Optional[M.KernelSpec] = None):
        self.spec = spec
        self.manifest = manifest if manifest is not None else spec
        self.device = device  # _cuda.DeviceInfo
        self.module = module
        self.function = function
        self.attrs = attrs
        self.jit_log = jit_log

    def __repr__(self) -> str:
        return (f"LoadedKernel({self.spec.name} on device {self.device.ordinal}, "
                + ", ".join(f"{k}={v}" for k, v in self.attrs.items()) + ")")


_modules: Dict[Tuple, Tuple[int, str]] = {}
_loaded: Dict[Tuple, object] = {}
_load_lock = threading.RLock()


def _file_key(path: str) -> Tuple:
    st = os.stat(path)
    return (os.path.realpath(path), st.st_mtime_ns, st.st_size)


def _load_function(drv, dev, module: int, jit_log: str, manifest: M.KernelSpec,
                   launch_spec) -> LoadedKernel:
    """Gets one entry of a loaded module, checks it against the manifest and
    the device, and sets its dynamic shared memory limit."""
    from . import _cuda

    fn = drv.get_function(module, launch_spec.entry)
    fa = lambda a: drv.function_attribute(fn, a)
    attrs = {
        "max_threads": fa(_cuda.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        "static_shared": fa(_cuda.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        "registers": fa(_cuda.CU_FUNC_ATTRIBUTE_NUM_REGS),
        "local_bytes": fa(_cuda.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
        "binary_version": fa(_cuda.CU_FUNC_ATTRIBUTE_BINARY_VERSION),
    }
    name = launch_spec.name
    if launch_spec.threads > attrs["max_threads"]:
        raise LaunchError(
            f"{name}: the manifest asks for {launch_spec.threads} threads per block "
            f"but the compiled kernel allows at most {attrs['max_threads']} "
            f"({attrs['registers']} registers per thread)")
    smem = launch_spec.dynamic_shared_memory
    total = attrs["static_shared"] + smem
    if total > dev.max_shared_optin:
        raise LaunchError(
            f"{name}: needs {smem} bytes of dynamic + "
            f"{attrs['static_shared']} of static shared memory, more than the "
            f"{dev.max_shared_optin} a block may have on {dev.name}")
    if smem > 0:
        drv.set_function_attribute(
            fn, _cuda.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    want = [M.slot_size(t) for _, t in launch_spec.slots()]
    info = drv.param_info(fn, len(want))
    if info is not None:
        got = [size for _, size in info]
        if want != got:
            raise ManifestError(
                f"{manifest.json_path}: the driver reports {len(got)} kernel parameters "
                f"of sizes {got} for {launch_spec.entry}, the manifest expands to "
                f"{len(want)} of sizes {want}")
    return LoadedKernel(launch_spec, dev, module, fn, attrs, jit_log, manifest)


def _load(spec: M.KernelSpec, ordinal: int, key_extra) -> Tuple[LoadedKernel, ...]:
    from . import _cuda

    try:
        fkey = _file_key(spec.ptx_path)
    except OSError as exc:
        raise ManifestError(f"{spec.json_path}: cannot read PTX {spec.ptx_path}: {exc}") from None
    key = (ordinal, fkey, key_extra, spec.json_path)
    hit = _loaded.get(key)
    if hit is not None:
        return hit
    with _load_lock:
        hit = _loaded.get(key)
        if hit is not None:
            return hit
        drv = _cuda.driver()
        dev = _cuda.device_info(ordinal)
        with open(spec.ptx_path, "rb") as f:
            image = f.read()
        M.check_against_ptx(spec, image.decode("utf-8", errors="replace"))
        what = spec.ptx_path
        binary = _cubin_for(spec, dev.cc)
        if binary is not None:
            image, what = binary, spec.cubin_path
        with drv.context(dev.context):
            mkey = (ordinal, fkey)
            if mkey not in _modules:
                _modules[mkey] = drv.load_module(image, what=what)
            module, jit_log = _modules[mkey]
            launches = (spec,) if not spec.is_multi_launch else spec.kernels
            loaded = tuple(_load_function(drv, dev, module, jit_log, spec, ls)
                           for ls in launches)
        _loaded[key] = loaded
        return loaded


# The compute capability a chip's cubin runs on (exactly; "a" features).
_CUBIN_CC = {"sm_90a": (9, 0), "sm_80": (8, 0)}


def _cubin_for(spec: M.KernelSpec, cc) -> Optional[bytes]:
    """The manifest's cubin when it was made for this device's chip and is
    no older than the PTX (made from it), else None: the PTX is loaded."""
    path = spec.cubin_path
    if path is None or _CUBIN_CC.get(spec.chip) != tuple(cc):
        return None
    try:
        if os.stat(path).st_mtime_ns < os.stat(spec.ptx_path).st_mtime_ns:
            return None
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def load_kernel(spec: M.KernelSpec, ordinal: int) -> LoadedKernel:
    """Loads the forward kernel `spec` on CUDA device `ordinal` once (cached)
    and checks it against the manifest and the device's limits."""
    if spec.is_multi_launch:
        raise LaunchError(f"{spec.name} is a {spec.kind} manifest with {len(spec.kernels)} "
                          "kernels: use load_kernels()")
    return _load(spec, ordinal, spec.entry)[0]


def load_kernels(spec: M.KernelSpec, ordinal: int) -> Tuple[LoadedKernel, ...]:
    """Every launch of `spec`, in manifest order, loaded on device `ordinal`
    (one module per PTX file, one function per entry; cached). A forward
    manifest gives one kernel."""
    if not spec.is_multi_launch:
        return (load_kernel(spec, ordinal),)
    return _load(spec, ordinal, "kernels")


# ---------------------------------------------------------------------------
# The default registry
# ---------------------------------------------------------------------------

_default: Optional[KernelRegistry] = None
_default_lock = threading.Lock()
_on_change: List = []


def on_registry_change(callback) -> None:
    """Registers `callback()` to run whenever the default registry is
    replaced (the launch-plan caches drop their plans)."""
    _on_change.append(callback)


def default_registry() -> KernelRegistry:
    global _default
    with _default_lock:
        if _default is None:
            _default = KernelRegistry()
        return _default


def set_default_registry(registry: Optional[KernelRegistry]) -> Optional[KernelRegistry]:
    """Replaces the registry `flashmlir.attention` uses (None: rebuild from
    the environment on next use). Returns the previous one. Cached launch
    plans are dropped."""
    global _default
    with _default_lock:
        prev, _default = _default, registry
    for cb in list(_on_change):
        cb()
    return prev
