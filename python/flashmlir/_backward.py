"""The backward pass's launch sequence, without torch: which buffers a
backward manifest needs, and its kernels prepared in manifest order.

A backward manifest lists its launches (`kernels`) and the scratch buffers
they share (`workspace`, e.g. delta [B, Hq, Nq] and dq_accum [B, Hq, Nq, D]
in f32). The caller gives the op's tensors (q, k, v, out, dout, lse and the
gradients dq, dk, dv, as [B, H, N, D] views) and an allocator; everything
else comes from the manifest, so a new kernel split needs no code change.
Every launch is packed and checked before the first one is issued, so a bad
argument raises without leaving half a backward on the stream.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _launch
from . import _manifest as M
from ._errors import ExpressionError, LaunchError

# alloc(name, shape, dtype) -> a contiguous tensor (uninitialized is fine:
# the kernels initialise their workspace).
Allocator = Callable[[str, Tuple[int, ...], str], Any]


def workspace_shapes(spec: M.KernelSpec, env: Mapping[str, Any]
                     ) -> List[Tuple[str, Tuple[int, ...], str]]:
    """(name, shape, dtype) of each workspace buffer, in manifest order."""
    out = []
    for w in spec.workspace:
        try:
            shape = w.shape(env)
        except ExpressionError as exc:
            raise LaunchError(f"{spec.name}: workspace {w.name}: {exc}") from None
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in shape):
            raise LaunchError(f"{spec.name}: workspace {w.name} has shape {list(shape)} "
                              f"([{', '.join(d.text for d in w.dims)}] with {dict(env)})")
        out.append((w.name, shape, w.dtype))
    return out


def tensors_needed(spec: M.KernelSpec) -> List[str]:
    """The op's tensors (not workspace) that some kernel takes, in first-use order."""
    names: List[str] = []
    for k in spec.kernels:
        for p in k.params:
            if p.is_memref and p.name in M.FORM_TENSORS[spec.form] and p.name not in names:
                names.append(p.name)
    return names


def prepare(spec: M.KernelSpec, kernels: Sequence[Any], tensors: Mapping[str, Any],
            env: Mapping[str, Any], alloc: Allocator,
            scalars: Optional[Mapping[str, Any]] = None
            ) -> Tuple[Dict[str, Any], List[_launch.PreparedLaunch]]:
    """Allocates the workspace and prepares every launch of `spec`.

    kernels: the loaded kernels of `spec` (`_kernels.load_kernels`), in order.
    tensors: the op's tensors by name, as [B, H, N, D] views.
    scalars: values the manifest's scalar parameters may name.
    Returns the workspace buffers by name and the prepared launches."""
    if not spec.is_multi_launch:
        raise LaunchError(f"{spec.name} is a single-launch {spec.kind} manifest")
    if len(kernels) != len(spec.kernels) or any(
            k.spec.entry != e.entry for k, e in zip(kernels, spec.kernels)):
        raise LaunchError(f"{spec.name}: the loaded kernels "
                          f"({', '.join(k.spec.entry for k in kernels)}) are not the "
                          f"manifest's ({', '.join(e.entry for e in spec.kernels)})")
    missing = [n for n in tensors_needed(spec) if n not in tensors]
    if missing:
        raise LaunchError(f"{spec.name}: no tensor given for {', '.join(missing)} "
                          f"(given: {', '.join(sorted(tensors)) or 'none'})")
    workspace: Dict[str, Any] = {}
    for name, shape, dtype in workspace_shapes(spec, env):
        workspace[name] = alloc(name, shape, dtype)
    args: Dict[str, Any] = dict(scalars or {})
    args.update(tensors)
    args.update(workspace)
    preps = [_launch.prepare(k, args, env) for k in kernels]
    return workspace, preps


def launch(preps: Sequence[_launch.PreparedLaunch], stream: int) -> None:
    """Issues the prepared launches in order on one stream (their tensor
    maps encoded before the first)."""
    storages = [_launch.param_storage(p) for p in preps]
    for p, s in zip(preps, storages):
        _launch.launch_prepared(p, stream, s)
