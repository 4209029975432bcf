"""Calibration: temperature scaling, expected calibration error, Brier score, reliability diagram.

Questions have different numbers of options, so logits are handled as a list of
1-D arrays (one per answered question) rather than one matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

ECE_BINS = 15


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


def nll(logits: Sequence[np.ndarray], labels: Sequence[int], temperature: float) -> float:
    """Mean negative log-likelihood of the gold option at ``temperature``."""
    total = 0.0
    for lg, y in zip(logits, labels, strict=True):
        z = lg / temperature
        m = z.max()
        total += float(m + np.log(np.exp(z - m).sum()) - z[y])
    return total / max(len(labels), 1)


def fit_temperature(logits: Sequence[np.ndarray], labels: Sequence[int]) -> float:
    """The temperature minimising NLL: a coarse log grid, then a golden-section refinement."""
    if not labels:
        return 1.0
    grid = np.exp(np.linspace(np.log(0.05), np.log(20.0), 61))
    best = float(min(grid, key=lambda t: nll(logits, labels, float(t))))
    lo, hi = best / 1.13, best * 1.13
    phi = (np.sqrt(5) - 1) / 2
    for _ in range(30):
        a, b = hi - phi * (hi - lo), lo + phi * (hi - lo)
        if nll(logits, labels, a) < nll(logits, labels, b):
            hi = b
        else:
            lo = a
    return float((lo + hi) / 2)


def confidences(probs: Sequence[np.ndarray], labels: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Top-option confidence and whether the top option is right, per question."""
    conf = np.array([float(p.max()) for p in probs])
    correct = np.array([int(p.argmax()) == y for p, y in zip(probs, labels, strict=True)], dtype=float)
    return conf, correct


def ece(conf: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS) -> float:
    """Expected calibration error of the top-option confidence, equal-width bins."""
    if len(conf) == 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.mean() * abs(conf[sel].mean() - correct[sel].mean())
    return float(total)


def brier(probs: Sequence[np.ndarray], labels: Sequence[int]) -> float:
    """Mean squared error between the probability vector and the one-hot gold option."""
    if not labels:
        return 0.0
    total = 0.0
    for p, y in zip(probs, labels, strict=True):
        onehot = np.zeros_like(p)
        onehot[y] = 1.0
        total += float(((p - onehot) ** 2).sum())
    return total / len(labels)


def summary(probs: Sequence[np.ndarray], labels: Sequence[int]) -> dict[str, float]:
    conf, correct = confidences(probs, labels)
    return {"n": len(labels), "accuracy": float(correct.mean()) if len(correct) else 0.0, "ece": ece(conf, correct),
            "brier": brier(probs, labels)}


def reliability_png(path: Path, curves: dict[str, tuple[np.ndarray, np.ndarray]], title: str, bins: int = ECE_BINS) -> None:
    """A reliability diagram: accuracy per confidence bin for each named curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5), dpi=100)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect")
    edges = np.linspace(0.0, 1.0, bins + 1)
    for name, (conf, correct) in curves.items():
        idx = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
        xs, ys = [], []
        for b in range(bins):
            sel = idx == b
            if sel.sum() >= 3:
                xs.append(conf[sel].mean())
                ys.append(correct[sel].mean())
        ax.plot(xs, ys, marker="o", label=f"{name} (ECE {ece(conf, correct, bins):.3f})")
    ax.set_xlabel("confidence of the top option")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
