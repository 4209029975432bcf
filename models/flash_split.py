"""Clef-flash 2: two small encoders with disjoint inputs, one per question, in one ONNX graph.

Inputs (feature version 2, ``gateway.features.split``):

- ``ids`` [B, L] and ``numeric`` [B, Np]: the payload input (method, target, body,
  payload-carrying header values) -> ``payload`` {benign, attack} and ``attack_kind``
  (given payload = attack);
- ``client_ids`` [C, M] and ``client_numeric`` [C, Nc]: the client input (header names
  and order, client-describing values, front facts, history) -> ``client``
  {human, good_bot, bad_bot}.

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

from dataclasses import asdict, dataclass, field

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
        return [head(h, bias) for head in self.heads]


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


def input_names() -> tuple[str, ...]:
    return feat.INPUT_NAMES[feat.FEATURE_VERSION]


def output_names() -> tuple[str, ...]:
    return tuple(f"{q}_logits" for q, _ in QUESTIONS)
