"""models.shift: temperatures fitted on a model's own sources and on unseen ones, each measured on both."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models import shift
from models.corpus.generate import HALVES, generate
from tests.models.test_familiarity import split_config


def _logits(rng: np.random.Generator, rows: int, scale: float, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose labels are drawn from softmax(z) and whose logits are ``scale`` × z: calibrated at T = scale."""
    z = rng.normal(0.0, 2.0, size=(rows, classes))
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    labels = np.array([rng.choice(classes, p=row) for row in p])
    return z * scale, labels


def test_each_sides_temperature_is_the_one_that_calibrates_it() -> None:
    rng = np.random.default_rng(7)
    # own sources calibrated as they are; the other sources' logits three times too sure
    logits = {("payload", "own"): _logits(rng, 4000, 1.0, 2), ("payload", "other"): _logits(rng, 4000, 3.0, 2),
              ("client", "own"): _logits(rng, 4000, 1.0, 3), ("client", "other"): _logits(rng, 4000, 3.0, 3)}
    got = shift.measure(logits, threshold=0.95)
    for q in shift.QUESTIONS:
        assert got.temperature[(q, "own")] == pytest.approx(1.0, abs=0.15)
        assert got.temperature[(q, "other")] == pytest.approx(3.0, rel=0.15)
        # the own temperature leaves the other sources over-confident; theirs calibrates them
        assert got.cells[(q, "other", "other")].ece < got.cells[(q, "other", "own")].ece
        assert got.cells[(q, "other", "other")].nll <= got.cells[(q, "other", "own")].nll
        assert got.cells[(q, "own", "own")].nll <= got.cells[(q, "own", "other")].nll
        # a temperature moves confidence, never the answer
        assert got.cells[(q, "other", "own")].accuracy == got.cells[(q, "other", "other")].accuracy
    # a hotter temperature puts fewer rows over a block threshold, attacks and benign alike
    own_t, other_t = got.cells[("payload", "other", "own")], got.cells[("payload", "other", "other")]
    assert own_t.attacks_over is not None and other_t.attacks_over is not None
    assert other_t.attacks_over < own_t.attacks_over
    assert got.cells[("client", "own", "own")].attacks_over is None
    text = shift.render(got, "synthetic")
    assert f"{got.temperature[('payload', 'other')]:.3f}" in text and "attacks >= thr" in text


def test_a_run_trains_on_one_half_and_measures_on_both(tmp_path: Path) -> None:
    files = {}
    for name, half, rows, seed in (("train", "a", 300, 1), ("calib", "a", 120, 2), ("other", "b", 120, 3)):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r) + "\n" for r in generate(rows, seed, HALVES[half])), encoding="utf-8")
    report = tmp_path / "shift.txt"
    assert shift.main(["--config", str(split_config(tmp_path)), "--train", str(files["train"]), "--calib", str(files["calib"]),
                       "--other", str(files["other"]), "--report", str(report), "--title", "tiny a -> b"]) == 0
    text = report.read_text()
    assert text.startswith("tiny a -> b") and "payload: temperature fitted on own sources" in text
    assert "client: temperature fitted on own sources" in text and "other sources" in text
