"""Train, calibrate and export Clef-flash 2 (two questions, disjoint inputs) in one reproducible run.

    python -m models.train_split --config models/configs/clef-flash-2.yaml \\
        --train T.jsonl --calib C.jsonl --eval E.jsonl [--version 2.0.0]

1. **Data.** Labelled JSONL records (``models.corpus`` writes them): ``payload_label``
   (benign | attack), ``attack_kind``, ``client_label`` (human | good_bot | bad_bot); records
   with only the single ``label`` of ``models.data.generate`` are read as payload attack
   (client unknown: no client loss) or payload benign with that client label. Train rows are
   split train / validation by a seeded hash; calibration rows fit the temperatures; eval
   rows are held out.
2. **Encode** every row with ``gateway.features.split_input`` — the serving code.
3. **Train** both halves at once with a fixed seed: per question label-smoothed
   cross-entropy plus a Brier term (``payload``, ``client``); cross-entropy on
   ``attack_kind`` for attack rows only; AdamW, warm-up then cosine decay; weights averaged
   (EMA); the epoch with the lowest validation loss is kept.
4. **Calibrate**: one temperature per question on the calibration rows; accuracy, ECE
   (15 bins) and Brier on the calibration and held-out rows.
5. **Familiarity** (the ``familiarity:`` section, on by default): class means (benign, each
   attack kind) and a tied, Ledoit-Wolf-shrunk covariance of the payload head's input over the
   training rows; the threshold is a high quantile (0.995) of the calibration rows' distances.
6. **Export** fp32 / int8 / fp16 ONNX (one graph, two inputs, separate batch axes; the payload
   graph also answers ``payload_distance``, kept fp32 in every file) with a parity check, and
   write ``models/repository/<name>/<version>/`` with the manifest (its ``familiarity``).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import random
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch.nn import functional as F

from gateway import features as feat
from gateway.decider import manifest as mf
from gateway.features import split
from models.calibrate import brier, ece, fit_temperature, softmax
from models.flash_split import (
    DESCRIPTIONS,
    FAMILIARITY_NODES,
    FAMILIARITY_OUTPUT,
    QUESTIONS,
    Familiarity,
    FamiliarityFit,
    HalfConfig,
    PayloadGraph,
    SplitConfig,
    SplitNet,
    fit_familiarity,
    input_names,
    output_names,
)

PAYLOADS = ("benign", "attack")
KINDS = QUESTIONS[1][1]
CLIENTS = ("human", "good_bot", "bad_bot")
_KIND_ALIASES = {"sql": "sqli", "sqli": "sqli", "xss": "xss", "traversal": "traversal", "path_traversal": "traversal",
                 "lfi": "traversal", "cmdi": "cmdi", "rce": "cmdi", "command": "cmdi", "probe": "probe", "scanner": "probe"}
OPSET = 17


@dataclass
class Optim:
    """Optimisation settings (the ``train:`` section)."""

    epochs: int = 4
    batch_size: int = 64
    lr: float = 0.002
    weight_decay: float = 0.05
    warmup_steps: int = 200
    label_smoothing: float = 0.02
    brier_weight: float = 0.5
    kind_weight: float = 0.3
    client_weight: float = 1.0
    ema_decay: float = 0.999
    threads: int = 1
    max_minutes: float = 22.0
    validation_share: float = 0.06
    # share of training rows whose path is replaced by another training row's (another site's) path, query and body
    # kept: the payload half learns that no path vocabulary is evidence by itself (rows whose path may carry the
    # payload are left as they are)
    path_swap: float = 0.0


@dataclass
class FamiliarityOptions:
    """The familiarity statistics of the payload head (the ``familiarity:`` section): fit on the training rows after
    training, thresholded on the calibration rows, shipped in the payload graph (``payload_distance``)."""

    enabled: bool = True
    # the threshold: this quantile of the calibration rows' distances
    quantile: float = 0.995
    # one class mean per attack kind (with min_rows training rows; the others share one attack mean), else benign/attack
    per_kind: bool = True
    min_rows: int = 50
    # the statistics are fit on at most this many training rows (a seeded sample beyond)
    max_rows: int = 200_000
    # weight of the scaled identity in the tied covariance; null: Ledoit-Wolf
    shrinkage: float | None = None


@dataclass
class RunConfig:
    """One training run (the YAML file)."""

    name: str = "clef-flash"
    version: str = "2.0.0"
    seed: int = 1
    channel: str = "stable"
    repository: str = "models/repository"
    payload: HalfConfig = field(default_factory=HalfConfig)
    client: HalfConfig = field(default_factory=lambda: SplitConfig().client)
    train: Optim = field(default_factory=Optim)
    policy: dict[str, float] = field(default_factory=dict)
    familiarity: FamiliarityOptions = field(default_factory=FamiliarityOptions)


def load_config(path: Path) -> RunConfig:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    cfg = RunConfig()
    for key in ("name", "version", "seed", "channel", "repository", "policy"):
        if key in raw:
            setattr(cfg, key, raw[key])
    cfg.payload = HalfConfig(**raw.get("payload", {})) if "payload" in raw else cfg.payload
    cfg.client = HalfConfig(**raw.get("client", {})) if "client" in raw else cfg.client
    cfg.train = Optim(**raw.get("train", {}))
    cfg.familiarity = FamiliarityOptions(**raw.get("familiarity", {}))
    if not 0.5 <= cfg.familiarity.quantile < 1.0:
        raise SystemExit(f"{path}: familiarity.quantile: {cfg.familiarity.quantile!r} is not in [0.5, 1)")
    return cfg


# ---------------------------------------------------------------------------------------------------- data

def labels_of(rec: dict[str, Any]) -> tuple[int, int, int]:
    """(payload index, attack_kind index or -1, client index or -1) of a record."""
    if "payload_label" in rec:
        payload = PAYLOADS.index(str(rec["payload_label"]))
        client_label = rec.get("client_label")
        client = CLIENTS.index(client_label) if client_label in CLIENTS else -1
    else:
        label = str(rec.get("label"))
        payload = 1 if label == "attack" else 0
        client = CLIENTS.index(label) if label in CLIENTS else -1
    kind = -1
    if payload == 1:
        raw = str(rec.get("attack_kind") or "other").lower()
        kind = KINDS.index(_KIND_ALIASES.get(raw, raw if raw in KINDS else "other"))
    return payload, kind, client


@dataclass
class Encoded:
    """Rows encoded for the model, with their labels."""

    inputs: list[feat.ModelInput]
    payload: np.ndarray
    kind: np.ndarray
    client: np.ndarray
    records: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.inputs)

    def subset(self, idx: Sequence[int]) -> Encoded:
        return Encoded([self.inputs[i] for i in idx], self.payload[idx], self.kind[idx], self.client[idx],
                       [self.records[i] for i in idx])


_PATH_PAYLOAD = re.compile(r"[%'\"<>;|`$(){}\\*]|\.\.|//")


def _plain_path(rec: dict[str, Any]) -> str | None:
    """The path of a record when it cannot carry the payload (no injection characters, not a probe), else None."""
    path = str(rec.get("path") or "/").partition("?")[0]
    if rec.get("attack_family") in ("probe", "crlf") or rec.get("payload_source") == "well-known" or _PATH_PAYLOAD.search(path):
        return None
    return path


def swap_paths(records: list[dict[str, Any]], share: float, seed: int) -> tuple[list[dict[str, Any]], int]:
    """``records`` with ``share`` of the rows' plain paths replaced by another row's plain path (seeded)."""
    if share <= 0:
        return records, 0
    rng = random.Random(f"path-swap/{seed}")
    pool = [p for p in (_plain_path(r) for r in records) if p is not None]
    out, swapped = [], 0
    for rec in records:
        path = _plain_path(rec)
        if path is not None and pool and rng.random() < share:
            query = str(rec.get("path") or "/").partition("?")[2]
            rec = {**rec, "path": rng.choice(pool) + (f"?{query}" if query else "")}
            swapped += 1
        out.append(rec)
    return out, swapped


def encode(records: list[dict[str, Any]]) -> Encoded:
    inputs = [feat.split_input(feat.from_record(r)) for r in records]
    labels = np.array([labels_of(r) for r in records], dtype=np.int64).reshape(-1, 3)
    return Encoded(inputs, labels[:, 0], labels[:, 1], labels[:, 2], records)


def training_sides(records: list[dict[str, Any]], cfg: RunConfig) -> tuple[Encoded, Encoded, int]:
    """The training records encoded as (train, validation, rows given another row's path): the path swap first, then
    a stable draw per row (its index and the run's seed) puts the validation share aside."""
    h = [int(hashlib.sha256(f"{cfg.seed}/{i}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF for i in range(len(records))]
    swapped_rows, swapped = swap_paths(records, cfg.train.path_swap, cfg.seed)
    enc = encode(swapped_rows)
    return (enc.subset([i for i in range(len(enc)) if h[i] >= cfg.train.validation_share]),
            enc.subset([i for i in range(len(enc)) if h[i] < cfg.train.validation_share]), swapped)


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], str]:
    data = path.read_bytes()
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    return rows, hashlib.sha256(data).hexdigest()


def tensors(inputs: Sequence[feat.ModelInput]) -> tuple[torch.Tensor, ...]:
    ids = feat.pad_ids([i.ids for i in inputs])
    cids = feat.pad_ids([i.client_ids for i in inputs if i.client_ids is not None])
    return (torch.from_numpy(ids), torch.tensor([i.numeric for i in inputs], dtype=torch.float32),
            torch.from_numpy(cids), torch.tensor([i.client_numeric for i in inputs], dtype=torch.float32))


def batches(enc: Encoded, size: int, rng: random.Random | None) -> Iterator[tuple[np.ndarray, tuple[torch.Tensor, ...]]]:
    """Batches of rows of similar payload length (shuffled in chunks when ``rng`` is given)."""
    order = list(range(len(enc)))
    if rng is not None:
        rng.shuffle(order)
        chunks = [sorted(order[i:i + size * 32], key=lambda j: len(enc.inputs[j].ids)) for i in range(0, len(order), size * 32)]
        groups = [c[i:i + size] for c in chunks for i in range(0, len(c), size)]
        rng.shuffle(groups)
    else:
        order.sort(key=lambda j: len(enc.inputs[j].ids))
        groups = [order[i:i + size] for i in range(0, len(order), size)]
    for g in groups:
        idx = np.array(g)
        yield idx, tensors([enc.inputs[i] for i in g])


# ---------------------------------------------------------------------------------------------------- training

def loss_fn(outs: tuple[torch.Tensor, ...], payload: torch.Tensor, kind: torch.Tensor, client: torch.Tensor, opt: Optim) -> torch.Tensor:
    """Label-smoothed CE + Brier on payload and client (rows with a known client); CE on attack_kind for attacks."""
    p_logits, k_logits, c_logits = outs

    def ce_brier(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p = torch.softmax(logits, dim=-1)
        ce = F.cross_entropy(logits, y, label_smoothing=opt.label_smoothing)
        return ce + opt.brier_weight * ((p - F.one_hot(y, p.shape[-1]).to(p.dtype)) ** 2).sum(-1).mean()

    loss = ce_brier(p_logits, payload)
    known = client >= 0
    if known.any():
        loss = loss + opt.client_weight * ce_brier(c_logits[known], client[known])
    attacks = kind >= 0
    if attacks.any():
        loss = loss + opt.kind_weight * F.cross_entropy(k_logits[attacks], kind[attacks], label_smoothing=opt.label_smoothing)
    return loss


@torch.no_grad()
def predict(net: SplitNet, enc: Encoded, size: int = 256) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logits (payload, attack_kind, client) for every row, in row order."""
    net.eval()
    out = [np.zeros((len(enc), len(o)), dtype=np.float32) for _, o in QUESTIONS]
    for idx, t in batches(enc, size, None):
        for arr, logits in zip(out, net(*t), strict=True):
            arr[idx] = logits.numpy()
    return out[0], out[1], out[2]


@torch.no_grad()
def representations(net: SplitNet, enc: Encoded, size: int = 256) -> np.ndarray:
    """The payload head's input vector (``Half.outputs``) for every row, in row order."""
    net.eval()
    out = np.zeros((len(enc), 2 * net.cfg.payload.width), dtype=np.float32)
    for idx, t in batches(enc, size, None):
        out[idx] = net.payload.outputs(t[0], t[1])[1].numpy()
    return out


def familiarity_labels(enc: Encoded, opts: FamiliarityOptions) -> list[str]:
    """The class of each row for the familiarity statistics: benign, or attack (per kind when asked and the kind has
    ``min_rows`` rows)."""
    kinds = {k: int((enc.kind[enc.payload == 1] == i).sum()) for i, k in enumerate(KINDS)}
    out = []
    for payload, kind in zip(enc.payload, enc.kind, strict=True):
        if payload == 0:
            out.append("benign")
        elif opts.per_kind and kind >= 0 and kinds[KINDS[kind]] >= opts.min_rows:
            out.append(f"attack/{KINDS[kind]}")
        else:
            out.append("attack")
    return out


@dataclass
class FamiliarityResult:
    """The fitted statistics, their threshold, and what the manifest records of them."""

    fit: FamiliarityFit
    threshold: float
    manifest: dict[str, Any]
    metrics: dict[str, Any]
    eval_distance: np.ndarray


def fit_familiarity_of(net: SplitNet, tr: Encoded, cal: Encoded, ev: Encoded, temps: dict[str, float],
                       opts: FamiliarityOptions, seed: int, log: Any) -> FamiliarityResult:
    """Fit the statistics on (a sample of) the training rows, threshold them on the calibration rows, measure on eval."""
    rows = list(range(len(tr)))
    if len(rows) > opts.max_rows:
        rows = sorted(random.Random(f"familiarity/{seed}").sample(rows, opts.max_rows))
    sample = tr.subset(rows)
    fit = fit_familiarity(representations(net, sample), familiarity_labels(sample, opts), opts.shrinkage)
    cal_d = fit.distance(representations(net, cal))
    threshold = float(np.quantile(cal_d, opts.quantile))
    ev_d = fit.distance(representations(net, ev))
    pa = softmax(predict(net, ev)[0], temps["payload"])[:, 1]
    metrics: dict[str, Any] = {"threshold": round(threshold, 5),
                               "calibration_unfamiliar": round(float((cal_d > threshold).mean()), 5),
                               "eval_unfamiliar": round(float((ev_d > threshold).mean()), 5) if len(ev) else None}
    for name, rows_of in (("benign", ev.payload == 0), ("attack", ev.payload == 1)):
        blocked = rows_of & (pa >= 0.95)
        # of the eval rows the model would block on P(attack) alone: the share it would abstain on instead
        metrics[f"eval_{name}_p_attack_ge_0.95"] = int(blocked.sum())
        metrics[f"eval_{name}_p_attack_ge_0.95_unfamiliar"] = (round(float((ev_d[blocked] > threshold).mean()), 5)
                                                              if blocked.any() else None)
    log(f"familiarity: {len(fit.classes)} classes over {fit.rows} training rows (shrinkage {fit.shrinkage}), threshold "
        f"{threshold:.3f} (calibration quantile {opts.quantile}); {json.dumps(metrics)}")
    manifest = {"output": FAMILIARITY_OUTPUT, "threshold": round(threshold, 6), "quantile": opts.quantile,
                "distance": "Mahalanobis, tied shrunk covariance, nearest class mean",
                "representation": f"the payload head's input ({fit.means.shape[1]} values)", "classes": list(fit.classes),
                "shrinkage": fit.shrinkage, "training_rows": fit.rows, "calibration_rows": len(cal)}
    return FamiliarityResult(fit, threshold, manifest, metrics, ev_d)


def val_loss(net: SplitNet, enc: Encoded, opt: Optim) -> float:
    p, k, c = predict(net, enc)
    outs = tuple(torch.from_numpy(a) for a in (p, k, c))
    return float(loss_fn(outs, torch.from_numpy(enc.payload), torch.from_numpy(enc.kind), torch.from_numpy(enc.client), opt))


def train(cfg: RunConfig, tr: Encoded, val: Encoded, log: Any) -> tuple[SplitNet, list[dict[str, Any]]]:
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.set_num_threads(cfg.train.threads)
    opt = cfg.train
    net = SplitNet(SplitConfig(cfg.payload, cfg.client))
    ema = copy.deepcopy(net)
    optim = torch.optim.AdamW(net.parameters(), lr=opt.lr, weight_decay=opt.weight_decay)
    steps_per_epoch = math.ceil(len(tr) / opt.batch_size)
    total = steps_per_epoch * opt.epochs

    def lr_at(step: int) -> float:
        if step < opt.warmup_steps:
            return opt.lr * (step + 1) / opt.warmup_steps
        frac = (step - opt.warmup_steps) / max(1, total - opt.warmup_steps)
        return opt.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))

    rng = random.Random(cfg.seed)
    started = time.time()
    history: list[dict[str, Any]] = []
    best: tuple[float, dict[str, Any]] | None = None
    step = 0
    for epoch in range(opt.epochs):
        net.train()
        running = 0.0
        for n, (idx, t) in enumerate(batches(tr, opt.batch_size, rng)):
            for g in optim.param_groups:
                g["lr"] = lr_at(step)
            outs = net(*t)
            loss = loss_fn(outs, torch.from_numpy(tr.payload[idx]), torch.from_numpy(tr.kind[idx]), torch.from_numpy(tr.client[idx]), opt)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optim.step()
            with torch.no_grad():
                d = min(opt.ema_decay, (1 + step) / (10 + step))
                for pe, pn in zip(ema.parameters(), net.parameters(), strict=True):
                    pe.mul_(d).add_(pn.detach(), alpha=1 - d)
            step += 1
            running += float(loss.detach())
            if n % 200 == 0:
                log(f"epoch {epoch + 1} step {n}/{steps_per_epoch} loss {running / (n + 1):.4f} ({time.time() - started:.0f}s)")
            if time.time() - started > opt.max_minutes * 60:
                break
        v = val_loss(ema, val, opt)
        history.append({"epoch": epoch + 1, "train_loss": round(running / max(1, steps_per_epoch), 5), "val_loss": round(v, 5),
                        "seconds": round(time.time() - started, 1)})
        log(f"epoch {epoch + 1}: train {running / max(1, steps_per_epoch):.4f} validation {v:.4f} ({time.time() - started:.0f}s)")
        if best is None or v < best[0]:
            best = (v, copy.deepcopy(ema.state_dict()))
        if time.time() - started > opt.max_minutes * 60:
            log("time budget reached")
            break
    assert best is not None
    ema.load_state_dict(best[1])
    ema.eval()
    return ema, history


# ---------------------------------------------------------------------------------------------------- measuring

def question_metrics(logits: np.ndarray, labels: np.ndarray, t: float) -> dict[str, float]:
    keep = labels >= 0
    if not keep.any():
        return {"rows": 0}
    p = softmax(logits[keep], t)
    y = labels[keep]
    return {"rows": int(keep.sum()), "accuracy": round(float((p.argmax(1) == y).mean()), 5),
            "ece": round(float(ece(p, y)), 5), "brier": round(float(brier(p, y)), 5)}


def measure(net: SplitNet, enc: Encoded, temps: dict[str, float]) -> dict[str, Any]:
    p, k, c = predict(net, enc)
    kind_labels = np.where(enc.payload == 1, enc.kind, -1)
    out = {"payload": question_metrics(p, enc.payload, temps["payload"]),
           "attack_kind": question_metrics(k, kind_labels, temps["attack_kind"]),
           "client": question_metrics(c, enc.client, temps["client"])}
    pa = softmax(p, temps["payload"])[:, 1]
    benign = enc.payload == 0
    attacks = enc.payload == 1
    out["policy"] = {"benign_p_attack_ge_0.95": round(float((pa[benign] >= 0.95).mean()), 5) if benign.any() else None,
                     "attack_p_attack_ge_0.95": round(float((pa[attacks] >= 0.95).mean()), 5) if attacks.any() else None}
    return out


def breakdown(logits: tuple[np.ndarray, np.ndarray, np.ndarray], enc: Encoded, temps: dict[str, float],
              key: str, unfamiliar: np.ndarray | None = None) -> dict[str, dict[str, Any]]:
    """Per value of record field ``key``: rows, payload accuracy, client accuracy, P(attack) >= 0.95 share (and, given
    ``unfamiliar`` per row, the share of the rows beyond the familiarity threshold)."""
    p, _, c = logits
    pa = softmax(p, temps["payload"])
    pc = softmax(c, temps["client"])
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(enc.records):
        groups.setdefault(str(r.get(key) or "-"), []).append(i)
    out = {}
    for value, idx in sorted(groups.items()):
        ix = np.array(idx)
        y = enc.payload[ix]
        yc = enc.client[ix]
        known = yc >= 0
        out[value] = {"rows": len(ix), "payload_accuracy": round(float((pa[ix].argmax(1) == y).mean()), 4),
                      "blocked_0.95": round(float((pa[ix, 1] >= 0.95).mean()), 4),
                      "client_accuracy": round(float((pc[ix][known].argmax(1) == yc[known]).mean()), 4) if known.any() else None}
        if unfamiliar is not None:
            out[value]["unfamiliar"] = round(float(unfamiliar[ix].mean()), 4)
    return out


# ---------------------------------------------------------------------------------------------------- export

class HalfGraph(torch.nn.Module):
    """One half as a graph of its own (its outputs as a tuple)."""

    def __init__(self, half: torch.nn.Module) -> None:
        super().__init__()
        self.inner = half

    def forward(self, ids: torch.Tensor, numeric: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.inner(ids, numeric))


def familiarity_nodes(path: Path) -> list[str]:
    """The names of the nodes of ``path`` that compute the familiarity distance (``PayloadGraph``)."""
    import onnx

    return [n.name for n in onnx.load(str(path)).graph.node if n.name.startswith(FAMILIARITY_NODES)]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(net: SplitNet, cfg: RunConfig, temps: dict[str, float], sample: Sequence[feat.ModelInput], info: dict[str, Any],
           log: Any, familiarity: FamiliarityResult | None = None) -> Path:
    from models.export import convert_fp16, quantize_int8, session

    directory = Path(cfg.repository) / cfg.name / cfg.version
    directory.mkdir(parents=True, exist_ok=True)
    # traced on random rows two buckets long (as models.export does), not on a sample that may fit one bucket
    gen = torch.Generator().manual_seed(0)
    args = (torch.randint(1, 300, (2, 2 * feat.BUCKET), dtype=torch.int64, generator=gen), torch.rand(2, split.NUM_PAYLOAD, generator=gen),
            torch.randint(1, 300, (2, 2 * feat.BUCKET), dtype=torch.int64, generator=gen), torch.rand(2, split.NUM_CLIENT, generator=gen))
    names = input_names()
    outputs = output_names()
    net.eval()
    payload_graph = PayloadGraph(net.payload, Familiarity(familiarity.fit) if familiarity is not None else None)
    payload_outputs = (*outputs[:2], *((FAMILIARITY_OUTPUT,) if familiarity is not None else ()))
    parts = {"files": ("model", payload_graph, args[:2], names[:2], payload_outputs),
             "client_files": ("client", HalfGraph(net.client), args[2:], names[2:], outputs[2:])}
    files: dict[str, dict[str, Path]] = {}
    for part, (stem, module, part_args, part_inputs, part_outputs) in parts.items():
        fp32 = directory / f"{stem}.onnx"
        axes = {n: ({0: "batch", 1: "tokens"} if n.endswith("ids") else {0: "batch"}) for n in part_inputs}
        axes |= {n: {0: "batch"} for n in part_outputs}
        torch.onnx.export(module, part_args, str(fp32), input_names=list(part_inputs), output_names=list(part_outputs),
                          opset_version=OPSET, dynamic_axes=axes, dynamo=False)
        # the distance stays fp32 in every file: int8 weights would blur it, and its squares overflow fp16
        keep = familiarity_nodes(fp32)
        quantize_int8(fp32, directory / f"{stem}.int8.onnx", exclude=keep)
        convert_fp16(fp32, directory / f"{stem}.fp16.onnx", exclude=keep)
        files[part] = {"fp32": fp32, "int8": directory / f"{stem}.int8.onnx", "fp16": directory / f"{stem}.fp16.onnx"}
    # parity: fp32 ONNX vs torch, int8 vs fp32 (probabilities)
    t = tensors(sample)
    net.eval()  # exporting a wrapper put back its (training) mode on the halves
    with torch.no_grad():
        ref = [torch.softmax(o, -1).numpy() for o in net(*t)]
        ref_distance = familiarity.fit.distance(net.payload.outputs(t[0], t[1])[1].numpy()) if familiarity is not None else None
    parity: dict[str, float] = {}
    for precision in ("fp32", "int8"):
        outs: list[np.ndarray] = session(files["files"][precision]).run(list(payload_outputs), {"ids": t[0].numpy(),
                                                                                                 "numeric": t[1].numpy()})
        if ref_distance is not None:
            # relative to the threshold: how far the shipped distance moves a row towards or away from abstaining
            assert familiarity is not None
            parity[f"distance_{precision}"] = round(float(np.abs(outs.pop() - ref_distance).max()) / familiarity.threshold, 5)
        outs += session(files["client_files"][precision]).run(list(outputs[2:]), {"client_ids": t[2].numpy(),
                                                                                  "client_numeric": t[3].numpy()})
        parity[precision] = round(max(float(np.abs(softmax(o) - r).max()) for o, r in zip(outs, ref, strict=True)), 5)
    log(f"export: parity (max |delta p| over {len(sample)} rows) fp32 {parity['fp32']}, int8 {parity['int8']}"
        + (f"; distance / threshold fp32 {parity['distance_fp32']}, int8 {parity['distance_int8']}" if ref_distance is not None else ""))
    if parity["fp32"] > 1e-3:
        raise SystemExit(f"fp32 ONNX differs from the network by {parity['fp32']}")
    if parity.get("distance_fp32", 0.0) > 1e-3:
        raise SystemExit(f"the fp32 ONNX payload distance differs from the fitted statistics' by {parity['distance_fp32']} "
                         "of the threshold")
    widths = feat.NUMERIC_WIDTHS[feat.FEATURE_VERSION]
    manifest = {
        "name": cfg.name, "version": cfg.version, "channel": cfg.channel, "family": mf.FAMILY,
        "feature_version": feat.FEATURE_VERSION, "feature_fingerprint": feat.FEATURE_FINGERPRINT,
        "tokenizer": {"kind": "bytes+phrases", "vocab_size": feat.VOCAB_SIZE, "phrases": len(feat.PHRASES),
                      "max_tokens": feat.MAX_TOKENS, "patch": feat.PATCH, "bucket": feat.BUCKET, "pad_id": feat.PAD_ID,
                      "encoder": "gateway.features.split_input"},
        "architecture": SplitConfig(cfg.payload, cfg.client).to_dict(),
        **{part: {k: {"path": p.name, "sha256": _sha(p), "size": p.stat().st_size} for k, p in paths.items()}
           for part, paths in files.items()},
        "inputs": [{"name": "ids", "dtype": "int64", "shape": ["batch", "tokens"]},
                   {"name": "numeric", "dtype": "float32", "shape": ["batch", widths["numeric"]]},
                   {"name": "client_ids", "dtype": "int64", "shape": ["clients", "client_tokens"]},
                   {"name": "client_numeric", "dtype": "float32", "shape": ["clients", widths["client_numeric"]]}],
        "outputs": [{"name": f"{q}_logits", "question": q} for q, _ in QUESTIONS],
        "questions": [{"id": q, "options": list(o), "description": DESCRIPTIONS[q],
                       **({"given": {"question": "payload", "option": "attack"}} if q == "attack_kind" else {})}
                      for q, o in QUESTIONS],
        "temperature": {q: round(v, 5) for q, v in temps.items()},
        # the CPU runs fp32, within the latency budget: int8 is faster, but its activations are quantized per run, so
        # a score moves with its batch-mates (by up to the int8 parity above)
        "prefer": {"cpu": "fp32", "cuda": "fp16"},
        "opset": OPSET, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "training_data": info["data"], "metrics": {**info["metrics"], "parity": parity}, "training": info["training"],
    }
    if familiarity is not None:
        manifest["familiarity"] = familiarity.manifest
    if cfg.policy:
        manifest["policy"] = cfg.policy
    (directory / mf.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    mf.load(directory, feature_version=feat.FEATURE_VERSION, feature_fingerprint=feat.FEATURE_FINGERPRINT, name=cfg.name)
    return directory


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.train_split", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--train", type=Path, required=True, help="training records (JSONL); a seeded share is validation")
    ap.add_argument("--calib", type=Path, required=True, help="calibration records (temperatures)")
    ap.add_argument("--eval", type=Path, required=True, help="held-out records (metrics only)")
    ap.add_argument("--generator", default="", help="the command lines that wrote the files (recorded in the manifest)")
    ap.add_argument("--version", help="override the config's version")
    ap.add_argument("--channel", help="override the config's channel")
    ap.add_argument("--repository", help="override the config's repository")
    ap.add_argument("--no-export", action="store_true", help="train and measure only")
    ap.add_argument("--report", type=Path, help="write the metrics and per-family tables here (JSON)")
    ap.add_argument("--epochs", type=int)
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    for key in ("version", "channel", "repository"):
        if getattr(args, key):
            setattr(cfg, key, getattr(args, key))
    if args.epochs:
        cfg.train.epochs = args.epochs
    started = time.time()

    def log(msg: str) -> None:
        print(f"[{time.time() - started:7.1f}s] {msg}", flush=True)

    data: dict[str, Any] = {"generator": args.generator}
    sides = {}
    for side in ("train", "calib", "eval"):
        rows, digest = read_jsonl(getattr(args, side))
        sides[side] = rows
        data[side] = {"path": getattr(args, side).name, "rows": len(rows), "sha256": digest,
                      "sources": sorted({str(r.get("source", "-")) for r in rows})[:40]}
    t0 = time.time()
    tr, val, swapped = training_sides(sides["train"], cfg)
    data["train"]["path_swap"] = {"share": cfg.train.path_swap, "rows": swapped}
    cal = encode(sides["calib"])
    ev = encode(sides["eval"])
    log(f"data: encoded {len(tr) + len(val) + len(cal) + len(ev)} rows in {time.time() - t0:.0f}s (train {len(tr)}, validation {len(val)}, "
        f"calibration {len(cal)}, eval {len(ev)}); payload attacks in train {int(tr.payload.sum())}")
    net, history = train(cfg, tr, val, log)
    p, k, c = predict(net, cal)
    temps = {"payload": fit_temperature(p, cal.payload),
             "attack_kind": fit_temperature(k[cal.kind >= 0], cal.kind[cal.kind >= 0]) if (cal.kind >= 0).any() else 1.0,
             "client": fit_temperature(c[cal.client >= 0], cal.client[cal.client >= 0]) if (cal.client >= 0).any() else 1.0}
    log(f"calibration: temperatures {', '.join(f'{q} {t:.3f}' for q, t in temps.items())}")
    metrics: dict[str, Any] = {"calibration": measure(net, cal, temps), "eval": measure(net, ev, temps)}
    familiarity = fit_familiarity_of(net, tr, cal, ev, temps, cfg.familiarity, cfg.seed, log) if cfg.familiarity.enabled else None
    if familiarity is not None:
        metrics["familiarity"] = familiarity.metrics
    for side in ("calibration", "eval"):
        log(f"{side}: {json.dumps(metrics[side])}")
    logits = predict(net, ev)
    unfamiliar = familiarity.eval_distance > familiarity.threshold if familiarity is not None else None
    tables = {key: breakdown(logits, ev, temps, key, unfamiliar)
              for key in ("browser_family", "attack_family", "attack_kind", "client_kind", "front", "site_type", "source")}
    if args.report:
        args.report.write_text(json.dumps({"metrics": metrics, "tables": tables, "temperature": temps, "history": history},
                                          indent=2) + "\n", encoding="utf-8")
    info = {"data": data, "metrics": metrics,
            "training": {"seed": cfg.seed, "history": history, "seconds": round(time.time() - started, 1),
                         "optim": cfg.train.__dict__, "torch": torch.__version__}}
    if not args.no_export:
        directory = export(net, cfg, temps, cal.inputs[:256], info, log, familiarity)
        log(f"wrote {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
