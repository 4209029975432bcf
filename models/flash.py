"""Clef-flash: a small transformer encoder over HTTP requests, fused with numeric features.

Input: ``ids`` [B, L] (token ids from ``gateway.features.encode``; L a multiple of
PATCH) and ``numeric`` [B, N] (``gateway.features.numeric_vector``).

- **Stem.** Each id is embedded (E dims); every PATCH consecutive embeddings are
  flattened and projected to the model width — a strided byte convolution written as
  one MatMul (it quantizes to int8 cleanly, a Conv does not run fast in int8 on CPU).
  A hashed trigram embedding, summed over the patch, adds which 3-grams occur in it
  whatever their alignment. The encoder therefore sees L / PATCH positions (≤ 64).
- **Numeric token.** The numeric vector, through a small MLP, is prepended as the
  first position, so attention mixes header-structure signals with the text.
- **Encoder.** Pre-norm transformer layers (width D, H heads, FFN F).
- **Routing heads.** Per question, a learned query attends over the positions
  (question-specific pooling), an MLP maps the pooled state, and each option's
  logit is its dot product with a learned option embedding. ``class`` also gets a
  *linear* term ``W · numeric``: its per-feature contributions ``W[c, j] · x_j`` are
  what ``explain`` reports.

Outputs are logits per question; calibration temperatures live in the manifest.

**Members.** With ``members: M`` > 1 the file holds M such networks, each trained as a run of
its own with its own seed (``models.train`` trains them apart and assembles them), and
answers with the mean of their probabilities (as logits: ``log mean softmax``, so temperature
scaling and every reader of the outputs stay as they are). A mistake one member makes alone
on a request it has never seen is outvoted; what they agree on stands (see the model card).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
from torch import nn
from torch.nn import functional as F

from gateway import features as feat

QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("class", ("human", "good_bot", "bad_bot", "attack")),
    ("attack_kind", ("sqli", "xss", "traversal", "cmdi", "probe", "other")),
)
TRIGRAM_BUCKETS = 4096
# Trigram hash multipliers (odd, well mixed); the hash is part of the model, not of the
# features: it runs inside the ONNX graph.
_H1, _H2 = 1_000_003, 7_919


@dataclass(frozen=True)
class FlashConfig:
    """Architecture hyper-parameters (recorded in the manifest)."""

    width: int = 128
    layers: int = 2
    heads: int = 4
    ffn: int = 256
    embed: int = 32
    head_hidden: int = 128
    dropout: float = 0.1
    vocab: int = feat.VOCAB_SIZE
    patch: int = feat.PATCH
    max_positions: int = feat.MAX_TOKENS // feat.PATCH + 1
    numeric: int = feat.NUM_FEATURES
    trigram_buckets: int = TRIGRAM_BUCKETS
    members: int = 1

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


class EncoderLayer(nn.Module):
    """Pre-norm self-attention + GELU feed-forward, with an additive padding bias."""

    def __init__(self, cfg: FlashConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.ff1 = nn.Linear(cfg.width, cfg.ffn)
        self.ff2 = nn.Linear(cfg.ffn, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, p, w = x.shape
        d = w // self.heads
        q, k, v = self.qkv(self.norm1(x)).view(b, p, 3, self.heads, d).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) * (d ** -0.5) + bias, dim=-1)
        x = x + self.drop(self.proj((att @ v).transpose(1, 2).reshape(b, p, w)))
        return x + self.drop(self.ff2(F.gelu(self.ff1(self.norm2(x)))))


class RoutingHead(nn.Module):
    """Question-specific attention pooling, an MLP, and option embeddings as the output layer."""

    def __init__(self, cfg: FlashConfig, options: int) -> None:
        super().__init__()
        # a learned query against linear keys collapses to one vector: score = h · w
        self.score = nn.Linear(cfg.width, 1, bias=False)
        self.norm = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(nn.Linear(2 * cfg.width, cfg.head_hidden), nn.GELU(), nn.Dropout(cfg.dropout))
        self.options = nn.Parameter(torch.randn(cfg.head_hidden, options) * 0.02)  # [hidden, options]: a plain MatMul weight
        self.bias = nn.Parameter(torch.zeros(options))
        self.scale = cfg.width ** -0.5

    def pool(self, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The vector the head's MLP reads: the attention-pooled positions and the numeric position, each normalised."""
        scores = self.score(h).squeeze(-1) * self.scale + bias  # [B, P]
        pooled = (torch.softmax(scores, dim=-1).unsqueeze(-1) * h).sum(1)
        return torch.cat([self.norm(pooled), self.norm(h[:, 0])], dim=-1)

    def classify(self, pooled: torch.Tensor) -> torch.Tensor:
        """Logits from the pooled vector (``pool``'s output)."""
        return self.mlp(pooled) @ self.options + self.bias

    def forward(self, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.classify(self.pool(h, bias))


class FlashNet(nn.Module):
    """The Clef-flash network; ``forward(ids, numeric)`` returns one logits tensor per question."""

    def __init__(self, cfg: FlashConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or FlashConfig()
        self.embed = nn.Embedding(cfg.vocab, cfg.embed, padding_idx=feat.PAD_ID)
        self.stem = nn.Linear(cfg.patch * cfg.embed, cfg.width)
        self.trigram = nn.Embedding(cfg.trigram_buckets, cfg.width, padding_idx=0)
        self.position = nn.Parameter(torch.randn(cfg.max_positions, cfg.width) * 0.02)
        self.numeric_in = nn.Sequential(nn.Linear(cfg.numeric, cfg.width), nn.GELU(), nn.Linear(cfg.width, cfg.width))
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.width)
        self.heads = nn.ModuleList(RoutingHead(cfg, len(options)) for _, options in QUESTIONS)
        # explainable linear path from the numeric vector to the class logits
        self.numeric_linear = nn.Linear(cfg.numeric, len(QUESTIONS[0][1]), bias=False)
        nn.init.zeros_(self.numeric_linear.weight)

    def trigrams(self, ids: torch.Tensor) -> torch.Tensor:
        """Hashed ids of the 3-gram ending at each position (0 on padding)."""
        padded = F.pad(ids, (2, 0))
        h = padded[:, :-2] * _H1 + padded[:, 1:-1] * _H2 + padded[:, 2:]
        h = torch.remainder(h, self.cfg.trigram_buckets - 1) + 1
        return torch.where(ids == feat.PAD_ID, torch.zeros_like(h), h)

    def forward(self, ids: torch.Tensor, numeric: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cfg = self.cfg
        b, length = ids.shape
        p = length // cfg.patch
        x = self.stem(self.embed(ids).reshape(b, p, cfg.patch * cfg.embed))
        x = x + self.trigram(self.trigrams(ids)).reshape(b, p, cfg.patch, cfg.width).sum(2)
        num = self.numeric_in(numeric).unsqueeze(1)
        x = torch.cat([num, x], dim=1) + self.position[: p + 1]
        # a patch is padding when all its ids are; the numeric token is never padding
        pad = ids.reshape(b, p, cfg.patch).amax(-1) == feat.PAD_ID
        pad = torch.cat([torch.zeros(b, 1, dtype=torch.bool, device=ids.device), pad], dim=1)
        bias = pad.to(x.dtype) * -1e4
        for layer in self.layers:
            x = layer(x, bias[:, None, None, :])
        h = self.norm(x)
        outs = [head(h, bias) for head in self.heads]
        outs[0] = outs[0] + self.numeric_linear(numeric)
        return tuple(outs)

    def member_nets(self) -> tuple[FlashNet, ...]:
        """The networks trained one by one (this one)."""
        return (self,)

    def explain_weight(self) -> torch.Tensor:
        """[classes, numeric]: the linear numeric path of the class head."""
        return self.numeric_linear.weight


class FlashEnsemble(nn.Module):
    """``members`` FlashNets answering together: per question, the log of their mean probabilities."""

    def __init__(self, cfg: FlashConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.members = nn.ModuleList(FlashNet(replace(cfg, members=1)) for _ in range(cfg.members))

    def forward(self, ids: torch.Tensor, numeric: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = [m(ids, numeric) for m in self.members]
        scale = math.log(len(self.members))
        return tuple(torch.logsumexp(torch.stack([F.log_softmax(o[q], dim=-1) for o in outs]), dim=0) - scale
                     for q in range(len(QUESTIONS)))

    def member_nets(self) -> tuple[FlashNet, ...]:
        return tuple(self.members)  # type: ignore[arg-type]

    def explain_weight(self) -> torch.Tensor:
        """The members' mean linear numeric path (their logits' mean; the answer is the mean of probabilities)."""
        return torch.stack([m.numeric_linear.weight for m in self.members]).mean(0)


Net = FlashNet | FlashEnsemble


def build(cfg: FlashConfig) -> Net:
    """The network ``cfg`` describes: one FlashNet, or an ensemble of ``cfg.members``."""
    if cfg.members < 1:
        raise ValueError(f"members must be at least 1, got {cfg.members}")
    return FlashNet(cfg) if cfg.members == 1 else FlashEnsemble(cfg)


def input_names() -> tuple[str, str]:
    return ("ids", "numeric")


def output_names() -> tuple[str, ...]:
    return tuple(f"{q}_logits" for q, _ in QUESTIONS)
