"""Flush denormal floats to zero while onnxruntime runs on the calling thread.

Why: the models mask padding with a large negative attention bias, so the softmax
takes ``exp`` of numbers far below -87, whose results fall into the denormal range.
x86 cores handle a denormal result or operand with a microcode assist that costs
~100 cycles, and onnxruntime's CPU softmax then runs about 6x slower on a masked row
(measured: 33 µs against 5.4 µs per row of a [4, 41, 41] attention; the
whole Clef-flash 1.7.0 batch-64 run 10-13% slower). onnxruntime's own
``session.set_denormal_as_zero`` sets its pool threads and the thread that creates the
session (for good: this module's tests once ran after such a session and saw it), never the thread that calls ``run``; with one intra-op thread (the per-core
setting) the session runs on that caller. The runtime does not use the option, so with
more intra-op threads the pool threads keep IEEE denormals.

What: :func:`flush_denormals` sets the SSE control register's flush-to-zero (FTZ) and
denormals-are-zero (DAZ) bits for the duration of a ``with`` block, on this thread only,
and restores the previous floating-point environment on exit (exceptions included). The
block must hold synchronous code only (never an ``await``: another task would run on the
thread with the bits set). A value below 1.2e-38 becomes 0. That changed no output of the
shipped versions: their logits with and without it are bit-identical (tested for every
version, fp32 and int8); it is an observation on those files, not a guarantee for any model.

Where it cannot be done (not 64-bit x86 Linux, no C math library, or a control register
that does not take the bits when probed) it is a no-op, and :data:`AVAILABLE` says so.
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


def _flushing(saved: _Fenv) -> _Fenv:
    """``saved`` with FTZ and DAZ set."""
    env = _Fenv.from_buffer_copy(saved)
    env.mxcsr |= _FTZ | _DAZ
    return env


def _open_libm() -> Any:
    # the usual glibc name first (find_library needs ldconfig or a compiler, which slim images lack), then a lookup
    for name in ("libm.so.6", ctypes.util.find_library("m")):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    return None


def _libm() -> Any:
    """The C math library, where the x86-64 fenv_t layout holds and a round trip shows the bits take effect."""
    if (sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64")
            or ctypes.sizeof(ctypes.c_void_p) != 8 or ctypes.sizeof(_Fenv) != _FENV_BYTES):
        return None  # a 32-bit Python on a 64-bit kernel has the i386 fenv_t, without MXCSR
    lib = _open_libm()
    if lib is None:
        return None
    try:
        saved, seen = _Fenv(), _Fenv()
        if lib.fegetenv(ctypes.byref(saved)) != 0:
            return None
        try:
            lib.fesetenv(ctypes.byref(_flushing(saved)))
            lib.fegetenv(ctypes.byref(seen))
        finally:
            lib.fesetenv(ctypes.byref(saved))
        return lib if seen.mxcsr & (_FTZ | _DAZ) == _FTZ | _DAZ else None
    except AttributeError:
        return None


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
    flushing = _flushing(saved)
    try:
        # set inside the try: a signal handled right after the call (KeyboardInterrupt) must not leave the bits on
        _LIBM.fesetenv(ctypes.byref(flushing))
        yield
    finally:
        _LIBM.fesetenv(ctypes.byref(saved))


def mxcsr() -> int | None:
    """This thread's MXCSR (None where it cannot be read): for tests and diagnostics."""
    if _LIBM is None:
        return None
    env = _Fenv()
    return int(env.mxcsr) if _LIBM.fegetenv(ctypes.byref(env)) == 0 else None
