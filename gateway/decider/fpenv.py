"""Flush denormal floats to zero while onnxruntime runs on the calling thread.

Why: the models mask padding with a large negative attention bias, so the softmax
takes ``exp`` of numbers far below -87, whose results fall into the denormal range.
x86 cores handle a denormal result or operand with a microcode assist that costs
~100 cycles, and onnxruntime's CPU softmax then runs about 6x slower on a masked row
(measured in session 17: 33 µs against 5.4 µs per row of a [4, 41, 41] attention; the
whole Clef-flash 1.7.0 batch-64 run 10-13% slower). onnxruntime's own
``session.set_denormal_as_zero`` only applies to its thread-pool threads, and with one
intra-op thread (the per-core setting) there are none: the session runs on the caller.
The runtime does not set that option: it also leaves flush-to-zero on, for good, on the
thread that creates the session (found in session 17, when this module's tests ran after
such a session), so with more intra-op threads the pool threads keep IEEE denormals.

What: :func:`flush_denormals` sets the SSE control register's flush-to-zero (FTZ) and
denormals-are-zero (DAZ) bits for the duration of a ``with`` block, on this thread only,
and restores the previous floating-point environment on exit (exceptions included). A
value below 1.2e-38 becomes 0, which changes no probability the models produce: the
outputs with and without it are bit-identical on every shipped version (tested).

Where it cannot be done (not x86-64 Linux, no C math library) it is a no-op, and
:data:`AVAILABLE` says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# glibc's x86-64 fenv_t: the x87 environment (28 bytes), then the SSE control/status register MXCSR.
_FENV_BYTES = 32
_MXCSR_OFFSET = 28
_FTZ = 1 << 15  # results that would be denormal are flushed to zero
_DAZ = 1 << 6   # denormal operands are read as zero


class _Fenv(ctypes.Structure):
    _fields_ = [("x87", ctypes.c_ubyte * _MXCSR_OFFSET), ("mxcsr", ctypes.c_uint32)]


def _libm() -> Any:
    if sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        probe = _Fenv()
        if ctypes.sizeof(_Fenv) != _FENV_BYTES or lib.fegetenv(ctypes.byref(probe)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return lib


_LIBM = _libm()
AVAILABLE = _LIBM is not None


@contextmanager
def flush_denormals() -> Iterator[None]:
    """Run the block with FTZ and DAZ set on this thread; the previous environment is restored after."""
    if _LIBM is None:
        yield
        return
    saved = _Fenv()
    if _LIBM.fegetenv(ctypes.byref(saved)) != 0:
        yield
        return
    flushing = _Fenv.from_buffer_copy(saved)
    flushing.mxcsr |= _FTZ | _DAZ
    _LIBM.fesetenv(ctypes.byref(flushing))
    try:
        yield
    finally:
        _LIBM.fesetenv(ctypes.byref(saved))


def mxcsr() -> int | None:
    """This thread's MXCSR (None where it cannot be read): for tests and diagnostics."""
    if _LIBM is None:
        return None
    env = _Fenv()
    return int(env.mxcsr) if _LIBM.fegetenv(ctypes.byref(env)) == 0 else None
