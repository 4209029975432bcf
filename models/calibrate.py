"""Calibration: temperature scaling, expected calibration error, Brier score, reliability diagram.

A stated probability of 0.8 must be right 80% of the time. Temperature scaling
divides a question's logits by one fitted number T (fitted on a calibration split the
network never trained on), which changes confidence without changing any decision's
ranking. ECE uses 15 equal-width bins over the top option's probability; Brier is
the mean over rows of the summed squared error over all options.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

ECE_BINS = 15


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax of ``logits / temperature`` (float64, numerically stable)."""
    z = logits.astype(np.float64) / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """Mean negative log-likelihood of the labels at a temperature."""
    p = softmax(logits, temperature)
    return float(-np.mean(np.log(np.clip(p[np.arange(len(labels)), labels], 1e-12, 1.0))))


def fit_temperature(logits: np.ndarray, labels: np.ndarray, lo: float = 0.05, hi: float = 20.0) -> float:
    """The temperature minimising NLL, by golden-section search over log T (NLL is unimodal there)."""
    if len(labels) == 0:
        return 1.0
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = nll(logits, labels, math.exp(c)), nll(logits, labels, math.exp(d))
    for _ in range(60):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = nll(logits, labels, math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = nll(logits, labels, math.exp(d))
    return float(math.exp((a + b) / 2))


def ece(probs: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> float:
    """Expected calibration error of the top option, ``bins`` equal-width confidence bins."""
    if len(labels) == 0:
        return 0.0
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.sum() / len(labels) * abs(float(correct[sel].mean()) - float(conf[sel].mean()))
    return float(total)


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """Multi-class Brier score: mean over rows of the summed squared error over options."""
    if len(labels) == 0:
        return 0.0
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    return float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))


def reliability(probs: np.ndarray, labels: np.ndarray, bins: int = ECE_BINS) -> list[dict[str, float]]:
    """Per-bin confidence, accuracy and count (the data behind the diagram)."""
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        sel = idx == b
        out.append({"low": float(edges[b]), "high": float(edges[b + 1]), "count": int(sel.sum()),
                    "confidence": float(conf[sel].mean()) if sel.any() else 0.0,
                    "accuracy": float(correct[sel].mean()) if sel.any() else 0.0})
    return out


def reliability_png(panels: list[tuple[str, np.ndarray, np.ndarray]], path: Path) -> None:
    """Reliability diagrams, one column per panel: accuracy per confidence bin against the
    diagonal (top) and the number of rows per bin (bottom, log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(panels), figsize=(5 * len(panels), 6), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]}, sharex="col")
    width = 1.0 / ECE_BINS
    for col, (title, probs, labels) in enumerate(panels):
        ax, hist = axes[0][col], axes[1][col]
        rows = reliability(probs, labels)
        filled = [r for r in rows if r["count"]]
        ax.bar([(r["low"] + r["high"]) / 2 for r in filled], [r["accuracy"] for r in filled], width=width * 0.9,
               color="#4c72b0", alpha=0.85, label="accuracy per bin")
        ax.plot([r["confidence"] for r in filled], [r["accuracy"] for r in filled], "o", color="#dd8452", markersize=4,
                label="(mean confidence, accuracy)")
        ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=1, label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("accuracy")
        ax.set_title(f"{title}\nECE {ece(probs, labels):.4f}  Brier {brier(probs, labels):.4f}  n={len(labels)}", fontsize=9)
        ax.legend(loc="upper left", fontsize=8)
        hist.bar([(r["low"] + r["high"]) / 2 for r in filled], [r["count"] for r in filled], width=width * 0.9, color="grey")
        hist.set_yscale("log")
        hist.set_ylabel("rows", fontsize=8)
        hist.set_xlabel("confidence of the top option")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
