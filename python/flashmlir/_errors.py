"""Exceptions of the flashmlir package (no torch, no CUDA needed)."""

from __future__ import annotations


class FlashMLIRError(Exception):
    """Base class of every error this package raises on its own."""


class ManifestError(FlashMLIRError, ValueError):
    """A kernel manifest (or its PTX) is malformed or inconsistent."""


class ExpressionError(FlashMLIRError, ValueError):
    """A grid/size expression of a manifest cannot be parsed or evaluated."""


class KernelNotFoundError(FlashMLIRError, ValueError):
    """No kernel matches the request, and none could be compiled."""


class UnsupportedError(FlashMLIRError, NotImplementedError):
    """An argument the kernels do not support (e.g. an SDPA attn_mask or
    dropout); the message names it."""


class CompileError(FlashMLIRError, RuntimeError):
    """`fa-compile` failed for a kernel variant."""


class LaunchError(FlashMLIRError, RuntimeError):
    """Parameters could not be packed or the launch configuration is invalid."""


class CudaError(FlashMLIRError, RuntimeError):
    """A CUDA driver API call returned an error code."""

    def __init__(self, func: str, code: int, name: str = "", text: str = "",
                 detail: str = ""):
        self.func = func
        self.code = code
        self.name = name
        self.text = text
        msg = f"{func} failed with CUDA error {code}"
        if name:
            msg += f" ({name})"
        if text:
            msg += f": {text}"
        if detail:
            msg += f"\n{detail}"
        super().__init__(msg)


class CudaUnavailableError(FlashMLIRError, RuntimeError):
    """The CUDA driver library (libcuda.so.1) cannot be loaded or initialized."""
