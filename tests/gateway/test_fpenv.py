"""gateway/decider/fpenv.py: denormals flushed to zero inside the block, on this thread only, and restored after."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gateway.decider import fpenv

pytestmark = pytest.mark.skipif(not fpenv.AVAILABLE, reason="flush-to-zero is set only on x86-64 Linux")

TINY = np.float32(1e-39)  # a denormal float32 (the smallest normal is 1.18e-38)


def control() -> int | None:
    """MXCSR's control bits (rounding, masks, FTZ, DAZ); the low six bits are sticky exception flags."""
    value = fpenv.mxcsr()
    return None if value is None else value & ~0x3F


def product() -> float:
    return float(TINY * np.float32(1.0))


def test_denormals_are_flushed_inside_the_block_only() -> None:
    before = control()
    assert product() != 0.0
    with fpenv.flush_denormals():
        assert product() == 0.0
        assert float(np.exp(np.float32(-100.0))) == 0.0  # exp's denormal result, as in a masked softmax
    assert product() != 0.0
    assert control() == before


def test_the_environment_is_restored_when_the_block_raises() -> None:
    before = control()
    with pytest.raises(RuntimeError), fpenv.flush_denormals():
        raise RuntimeError("a failed model run")
    assert control() == before
    assert product() != 0.0


def test_other_threads_keep_their_environment() -> None:
    seen: list[float] = []
    ready, done = threading.Event(), threading.Event()

    def other() -> None:
        ready.wait(5)
        seen.append(product())
        done.set()

    worker = threading.Thread(target=other)
    worker.start()
    with fpenv.flush_denormals():
        ready.set()
        done.wait(5)
        assert product() == 0.0
    worker.join(5)
    assert seen and seen[0] != 0.0
