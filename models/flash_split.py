"""Clef-flash 2: two small encoders with disjoint inputs, one per question, in one ONNX graph.

Inputs (feature version 2, ``gateway.features.split``):

- ``ids`` [B, L] and ``numeric`` [B, Np]: the payload input (method, target, body,
  payload-carrying header values) -> ``payload`` {benign, attack} and ``attack_kind``
  (given payload = attack);
- ``client_ids`` [C, M] and ``client_numeric`` [C, Nc]: the client input (header names
  and order, client-describing values, front facts, history) -> ``client``
  {human, good_bot, bad_bot}.

A version trained with familiarity statistics (``FamiliarityFit``, fit by ``models.train_split``)
adds ``payload_distance`` [B] to the payload graph: the Mahalanobis distance of the payload
head's input to the nearest training class mean (tied, shrunk covariance); the manifest's
``familiarity`` holds its threshold, and the policy abstains from a model-only block beyond it.

The two halves share no weight and no tensor, and their batch axes are separate: the
runtime runs the payload half alone (the client's rows zero) when the client's answer is
cached, and asks only for the outputs it needs, so onnxruntime runs only that half.

Each half is the Clef-flash 1 encoder (``models.flash``): byte/phrase embeddings
grouped in patches of PATCH ids and projected (a strided convolution as one MatMul),
hashed trigram embeddings summed per patch, the numeric vector as the first position,
pre-norm transformer layers, and per question a routing head (attention pooling, MLP,
option embeddings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from gateway import features as feat
from gateway.features import split
from models.flash import EncoderLayer, FlashConfig, RoutingHead

PAYLOAD_QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("payload", ("benign", "attack")),
    ("attack_kind", ("sqli", "xss", "traversal", "cmdi", "probe", "other")),
)
CLIENT_QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (("client", ("human", "good_bot", "bad_bot")),)
QUESTIONS = PAYLOAD_QUESTIONS + CLIENT_QUESTIONS
DESCRIPTIONS = {
    "payload": "Is what this request asks for (method, target, parameters, body, payload-carrying header values) an attack? "
               "Read without the client's appearance or history.",
    "attack_kind": "If the payload is an attack, which kind. Trained on attacks only: weigh it by P(payload = attack).",
    "client": "Who is asking: a person in a browser, a bot operators want, or an unwanted bot. Read from the header names, "
              "their order, the client-describing values, the front facts and the client's history, never the payload.",
}
_H1, _H2 = 1_000_003, 7_919
# the payload graph's extra output: the Mahalanobis distance of its head's input to the training rows' (manifest "familiarity")
FAMILIARITY_OUTPUT = "payload_distance"
FAMILIARITY_NODES = "/familiarity/"


@dataclass(frozen=True)
class HalfConfig:
    """One encoder's hyper-parameters."""

    width: int = 96
    layers: int = 1
    heads: int = 4
    ffn: int = 192
    embed: int = 32
    head_hidden: int = 96
    dropout: float = 0.1
    trigram_buckets: int = 8192

    def flash(self, numeric: int) -> FlashConfig:
        return FlashConfig(width=self.width, layers=self.layers, heads=self.heads, ffn=self.ffn, embed=self.embed,
                           head_hidden=self.head_hidden, dropout=self.dropout, numeric=numeric,
                           trigram_buckets=self.trigram_buckets)


@dataclass(frozen=True)
class SplitConfig:
    """Architecture of both halves (recorded in the manifest)."""

    payload: HalfConfig = field(default_factory=HalfConfig)
    client: HalfConfig = field(default_factory=lambda: HalfConfig(width=64, ffn=128, embed=24, head_hidden=64,
                                                                   trigram_buckets=4096))

    def to_dict(self) -> dict[str, object]:
        return {"kind": "clef-flash-split", "payload": asdict(self.payload), "client": asdict(self.client),
                "vocab": feat.VOCAB_SIZE, "patch": feat.PATCH, "payload_numeric": split.NUM_PAYLOAD,
                "client_numeric": split.NUM_CLIENT}


class Half(nn.Module):
    """One encoder and its questions' heads: ``forward(ids, numeric)`` -> logits per question."""

    def __init__(self, cfg: FlashConfig, questions: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.embed, padding_idx=feat.PAD_ID)
        self.stem = nn.Linear(cfg.patch * cfg.embed, cfg.width)
        self.trigram = nn.Embedding(cfg.trigram_buckets, cfg.width, padding_idx=0)
        self.position = nn.Parameter(torch.randn(cfg.max_positions, cfg.width) * 0.02)
        self.numeric_in = nn.Sequential(nn.Linear(cfg.numeric, cfg.width), nn.GELU(), nn.Linear(cfg.width, cfg.width))
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.width)
        self.heads = nn.ModuleList(RoutingHead(cfg, len(options)) for _, options in questions)

    def trigrams(self, ids: torch.Tensor) -> torch.Tensor:
        padded = F.pad(ids, (2, 0))
        h = padded[:, :-2] * _H1 + padded[:, 1:-1] * _H2 + padded[:, 2:]
        h = torch.remainder(h, self.cfg.trigram_buckets - 1) + 1
        return torch.where(ids == feat.PAD_ID, torch.zeros_like(h), h)

    def forward(self, ids: torch.Tensor, numeric: torch.Tensor) -> list[torch.Tensor]:
        return self.outputs(ids, numeric)[0]

    def outputs(self, ids: torch.Tensor, numeric: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Logits per question, and the vector the first question's head reads (``RoutingHead.pool``: what the
        familiarity statistics describe)."""
        cfg = self.cfg
        b, length = ids.shape
        p = length // cfg.patch
        x = self.stem(self.embed(ids).reshape(b, p, cfg.patch * cfg.embed))
        x = x + self.trigram(self.trigrams(ids)).reshape(b, p, cfg.patch, cfg.width).sum(2)
        x = torch.cat([self.numeric_in(numeric).unsqueeze(1), x], dim=1) + self.position[: p + 1]
        pad = ids.reshape(b, p, cfg.patch).amax(-1) == feat.PAD_ID
        pad = torch.cat([torch.zeros(b, 1, dtype=torch.bool, device=ids.device), pad], dim=1)
        bias = pad.to(x.dtype) * -1e4
        for layer in self.layers:
            x = layer(x, bias[:, None, None, :])
        h = self.norm(x)
        first: RoutingHead = self.heads[0]  # type: ignore[assignment]
        rest = list(self.heads)[1:]
        pooled = first.pool(h, bias)
        return [first.classify(pooled), *(head(h, bias) for head in rest)], pooled


class SplitNet(nn.Module):
    """Both halves: ``forward(ids, numeric, client_ids, client_numeric)`` -> (payload, attack_kind, client) logits."""

    def __init__(self, cfg: SplitConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or SplitConfig()
        self.payload = Half(cfg.payload.flash(split.NUM_PAYLOAD), PAYLOAD_QUESTIONS)
        self.client = Half(cfg.client.flash(split.NUM_CLIENT), CLIENT_QUESTIONS)

    def forward(self, ids: torch.Tensor, numeric: torch.Tensor, client_ids: torch.Tensor,
                client_numeric: torch.Tensor) -> tuple[torch.Tensor, ...]:
        payload, kind = self.payload(ids, numeric)
        (client,) = self.client(client_ids, client_numeric)
        return payload, kind, client


# ---------------------------------------------------------------------------------------------------- familiarity

@dataclass(frozen=True)
class FamiliarityFit:
    """Class-conditional Gaussians with one shared (tied) covariance over the payload head's input vectors.

    ``distance(x)`` is the Mahalanobis distance of ``x`` to the nearest class mean: ``min_c sqrt((x - mu_c)' S^-1
    (x - mu_c))``, computed as ``|(x - center) W - m_c|`` with ``W = V L^-1/2`` (``S = V L V'``, the shrunk covariance)
    and ``m_c = (mu_c - center) W``. Subtracting ``center`` (the mean of every row) first keeps the whitened values
    small, so the difference to a class mean does not cancel two large numbers.
    """

    center: np.ndarray  # [D]
    whiten: np.ndarray  # [D, D]
    means: np.ndarray  # [K, D], centred and whitened
    classes: tuple[str, ...]
    shrinkage: float
    rows: int

    def distance(self, reps: np.ndarray) -> np.ndarray:
        y = (np.asarray(reps, dtype=np.float64) - self.center) @ self.whiten
        d2 = ((y[:, None, :] - self.means[None]) ** 2).sum(-1).min(1)
        return np.sqrt(np.maximum(d2, 0.0))


def ledoit_wolf(x: np.ndarray) -> float:
    """The Ledoit-Wolf shrinkage intensity (towards a scaled identity) for centred rows ``x`` [n, D]."""
    n, d = x.shape
    s = x.T @ x / n
    mu = np.trace(s) / d
    delta = float(((s - mu * np.eye(d)) ** 2).sum())
    if delta <= 0:
        return 1.0
    beta = float(((x * x).sum(1) ** 2).sum() / n ** 2 - (s * s).sum() / n)
    return float(min(1.0, max(0.0, beta / delta)))


def fit_familiarity(reps: np.ndarray, labels: Sequence[str], shrinkage: float | None = None,
                    floor: float = 1e-3) -> FamiliarityFit:
    """Fit the class means and the tied, shrunk covariance of ``reps`` [n, D] labelled ``labels`` (one class per
    distinct label; the caller merges classes too small to have a mean of their own).

    ``shrinkage``: the weight of the scaled identity in the covariance, ``(1 - a) S + a tr(S)/D I``; None picks it
    by Ledoit-Wolf on the within-class residuals; never below ``floor``, so the inverse exists however few rows.
    """
    x = np.asarray(reps, dtype=np.float64)
    if x.ndim != 2 or len(x) != len(labels) or len(x) < 2:
        raise ValueError(f"expected [n, D] representations with one label each, got {x.shape} and {len(labels)} labels")
    classes = tuple(sorted(set(labels)))
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[lab] for lab in labels])
    mus = np.stack([x[y == k].mean(0) for k in range(len(classes))])
    resid = x - mus[y]
    alpha = ledoit_wolf(resid) if shrinkage is None else float(shrinkage)
    alpha = min(1.0, max(floor, alpha))
    s = resid.T @ resid / len(x)
    d = s.shape[0]
    cov = (1 - alpha) * s + alpha * (np.trace(s) / d) * np.eye(d)
    values, vectors = np.linalg.eigh(cov)
    whiten = vectors / np.sqrt(np.maximum(values, 1e-12 * max(float(values.max()), 1e-30)))
    center = x.mean(0)
    return FamiliarityFit(center=center, whiten=whiten, means=(mus - center) @ whiten, classes=classes,
                          shrinkage=round(alpha, 6), rows=len(x))


class Familiarity(nn.Module):
    """``FamiliarityFit.distance`` as a graph: [B, D] -> [B], its statistics constant tensors (float32)."""

    center: torch.Tensor
    whiten: torch.Tensor
    means: torch.Tensor

    def __init__(self, fit: FamiliarityFit) -> None:
        super().__init__()
        self.register_buffer("center", torch.tensor(fit.center, dtype=torch.float32))
        self.register_buffer("whiten", torch.tensor(fit.whiten, dtype=torch.float32))
        self.register_buffer("means", torch.tensor(fit.means, dtype=torch.float32))

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        y = (pooled - self.center) @ self.whiten
        diff = y.unsqueeze(1) - self.means  # [B, K, D]
        # a square as Pow, not diff * diff: the fp16 converter names the casts of a node's inputs by tensor, and a
        # tensor read twice by one kept-fp32 node would get two casts of one name
        return diff.pow(2).sum(-1).amin(-1).clamp_min(0.0).sqrt()


class PayloadGraph(nn.Module):
    """The payload half as a graph of its own: its logits per question, then (with ``familiarity``) the distance of
    its head's input to the training rows' (``payload_distance``). The familiarity nodes are named
    ``/familiarity/...`` (kept in fp32 by the int8 and fp16 conversions)."""

    def __init__(self, half: Half, familiarity: Familiarity | None = None) -> None:
        super().__init__()
        self.inner = half
        self.familiarity = familiarity

    def forward(self, ids: torch.Tensor, numeric: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits, pooled = self.inner.outputs(ids, numeric)
        if self.familiarity is None:
            return tuple(logits)
        return (*logits, self.familiarity(pooled))


def input_names() -> tuple[str, ...]:
    return feat.INPUT_NAMES[feat.FEATURE_VERSION]


def output_names() -> tuple[str, ...]:
    return tuple(f"{q}_logits" for q, _ in QUESTIONS)
