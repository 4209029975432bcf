"""Train, calibrate, export and evaluate Clef-flash in one reproducible run.

    python -m models.train --config models/configs/clef-flash.yaml

1. **Data.** Generate the three sides of the source split (``models.data``): the
   training side (split into train / validation rows by a seeded hash), the
   calibration side (sources the network never trains on, so the temperature is
   fitted for new traffic) and the evaluation side (user agents, path templates,
   payload productions and texts neither saw), written to ``<work_dir>/eval.jsonl``.
   Labelled files (``--data FILE``: JSONL records, decision logs with labels,
   combined access logs with a label column) are split train / validation /
   calibration by the same seeded hash.
2. **Encode** every row with ``gateway.features.model_input`` — the serving code.
3. **Train** with a fixed seed: label-smoothed cross-entropy plus a Brier term on
   ``class``; cross-entropy on ``attack_kind`` for attack rows only; AdamW, warm-up
   then cosine decay; early stopping on the validation loss; a progress bar.
4. **Calibrate**: one temperature per question on the calibration split; ECE (15
   bins) and Brier before and after, on the calibration and the evaluation split; a
   reliability diagram.
5. **Export** fp32 / int8 / fp16 ONNX with a parity check, and write
   ``models/repository/<name>/<version>/`` with the manifest and the diagram.

``main(argv) -> int`` is what ``clefgate train`` calls.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from torch.nn import functional as F

from gateway import features as feat
from gateway.config import PolicyConfig
from gateway.decider import manifest as mf
from models.calibrate import brier, ece, fit_temperature, reliability_png, softmax
from models.data import formats
from models.data.generate import generate, write_jsonl
from models.flash import QUESTIONS, FlashConfig, FlashNet, Net, build

CLASSES = QUESTIONS[0][1]
KINDS = QUESTIONS[1][1]


# ---------------------------------------------------------------------------- config

@dataclass
class DataConfig:
    """Where the training rows come from and how they are split."""

    generated_rows: int = 60000
    calibration_rows: int = 8000
    eval_rows: int = 16000
    eval_seed: int = 7
    extra: list[str] = field(default_factory=list)
    access_log_weight: float = 0.5
    validation_share: float = 0.08
    # share of the extra (user-supplied) rows used for calibration; generated calibration
    # rows come from the calibration side of the source split instead
    calibration_share: float = 0.10
    # share of the hard-negative searches drawn from the pools (people's and bots'; on the training side after
    # real text) that are developer questions (models.data.devqueries), on the training and calibration sides;
    # 0 (the 1.5.0 config) leaves the pools without them
    dev_questions: float = 0.0
    # add the training-only page shapes of models.data.site.ROUTES (false in the 1.5.0 config)
    routes: bool = False
    # add people's PUT/PATCH/DELETE XHR (models.data.site.REST_WRITES) to the training side (false in the shipped configs)
    rest_writes: bool = False
    # share of the training side's injections written in an evasion encoding (models.data.attacks.evade; 0 in the shipped configs)
    evasions: float = 0.0
    # share of the training side's site pages drawn under a directory sites mount apps at (models.data.site.MOUNTS;
    # 0 in the shipped configs)
    mounts: float = 0.0
    # share of the training side's JSON-body injections sent the way a page's script sends a write, Origin and fetch
    # metadata included, as people's REST_WRITES are (models.data.generate; 0 in the shipped configs)
    xhr_attacks: float = 0.0


@dataclass
class OptimConfig:
    """Optimisation and stopping."""

    epochs: int = 8
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_steps: int = 200
    label_smoothing: float = 0.02
    brier_weight: float = 0.5
    kind_weight: float = 0.3
    patience: int = 2
    threads: int = 2
    max_minutes: float = 17.0
    # exponential moving average of the weights (0 = off): validation, calibration and
    # export use the averaged network, which generalises better than the last step's
    ema_decay: float = 0.0
    # which epoch's weights to keep: "validation" (lowest validation loss) or
    # "calibration" (most attacks blocked at select_threshold on the calibration side
    # while people blocked there stay ≤ select_max_humans_blocked; validation rows share
    # sources with training, the calibration side does not). Stopping stays on the
    # validation loss either way.
    select: str = "validation"
    select_threshold: float = 0.95
    select_max_humans_blocked: float = 0.001
    # developer text in the choice: this many people searching and posting the Markdown measurement set
    # (``realtext --source markdown``, the pinned transformers' docstrings; never trained on) are scored each
    # epoch, and ``select: calibration`` keeps only epochs blocking at most ``select_max_text_blocked`` of them
    # (0 rows: not read; the shipped configs leave it at 0)
    select_text_rows: int = 0
    select_max_text_blocked: float = 0.005
    # model.members > 1: one seed per member. Each member is a whole run of its own (its seed's training and
    # calibration rows, initialisation, order and epoch choice); the version averages them. The first should be
    # the config's seed: the version's calibration and held-out figures are read on that seed's rows.
    member_seeds: list[int] = field(default_factory=list)
    # how many member runs at once (each with ``threads`` threads)
    member_parallel: int = 2
    # knowledge distillation: the class target of every training row mixes its label with a teacher version's
    # calibrated probabilities, ``(1 - distill_weight) * label + distill_weight * teacher``, for cross-entropy and
    # Brier alike. ``distill_from`` names the teacher, ``"<name>@<version>"`` in export.repository (its fp32 file, on
    # the CPU); "" (every shipped version so far) trains on the labels alone. One network then learns what an
    # ensemble answers, at one network's cost.
    distill_from: str = ""
    distill_weight: float = 0.5


@dataclass
class ExportConfig:
    """What to write at the end."""

    repository: str = "models/repository"
    precisions: list[str] = field(default_factory=lambda: ["fp32", "int8", "fp16"])
    enabled: bool = True
    channel: str = "stable"  # "opt-in": the version loads only where a config names it ("latest" skips it)
    policy: dict[str, float | None] = field(default_factory=dict)  # thresholds it was evaluated with (gateway warns on others)


@dataclass
class TrainConfig:
    """A training run (YAML: ``models/configs/*.yaml``)."""

    name: str = "clef-flash"
    version: str = "1.0.0"
    seed: int = 1
    work_dir: str = "models/work/clef-flash"
    data: DataConfig = field(default_factory=DataConfig)
    model: FlashConfig = field(default_factory=FlashConfig)
    train: OptimConfig = field(default_factory=OptimConfig)
    export: ExportConfig = field(default_factory=ExportConfig)


def _build(cls: type, raw: Any, where: str, problems: list[str]) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        problems.append(f"{where or '<top>'}: expected a map")
        return cls()
    names = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in names:
            problems.append(f"{where + '.' if where else ''}{key}: unknown key (known: {', '.join(names)})")
            continue
        default = names[key].default if names[key].default is not dataclasses.MISSING else names[key].default_factory()  # type: ignore[misc]
        if dataclasses.is_dataclass(default):
            kwargs[key] = _build(type(default), value, f"{where + '.' if where else ''}{key}", problems)
        elif isinstance(default, bool) and not isinstance(value, bool):
            problems.append(f"{where + '.' if where else ''}{key}: expected true or false")
        elif isinstance(default, (int, float)) and not isinstance(default, bool) and not isinstance(value, (int, float)):
            problems.append(f"{where + '.' if where else ''}{key}: expected a number")
        else:
            kwargs[key] = type(default)(value) if isinstance(default, (int, float, str)) and not isinstance(default, bool) else value
    return cls(**kwargs)


SELECT = ("validation", "calibration")


def _seeds_fit(members: int, seeds: Sequence[int]) -> bool:
    """One different seed per member."""
    return len(seeds) == members and len(set(seeds)) == members


def load_config(path: Path) -> TrainConfig:
    """Read a training config; every unknown key or wrong type is reported at once."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    problems: list[str] = []
    cfg = _build(TrainConfig, raw, "", problems)
    if cfg.train.select not in SELECT:
        problems.append(f"train.select: {cfg.train.select!r} is not one of {', '.join(SELECT)}")
    if cfg.train.select_threshold not in _TRACK:
        problems.append(f"train.select_threshold: {cfg.train.select_threshold} is not one of the tracked thresholds {', '.join(map(str, _TRACK))}")
    if cfg.train.select_text_rows < 0:
        problems.append(f"train.select_text_rows: {cfg.train.select_text_rows} is negative")
    if not 0.0 <= cfg.data.dev_questions <= 1.0:
        problems.append(f"data.dev_questions: {cfg.data.dev_questions} is not a fraction (0-1)")
    if not 0.0 <= cfg.data.evasions < 1.0:
        problems.append(f"data.evasions: {cfg.data.evasions} is not a fraction below 1")
    if not 0.0 <= cfg.data.mounts < 1.0:
        problems.append(f"data.mounts: {cfg.data.mounts} is not a fraction below 1")
    if not 0.0 <= cfg.data.xhr_attacks <= 1.0:
        problems.append(f"data.xhr_attacks: {cfg.data.xhr_attacks} is not a fraction (0-1)")
    if cfg.model.members < 1:
        problems.append(f"model.members: {cfg.model.members} is not a number of networks (1 or more)")
    elif cfg.model.members > 1 and not _seeds_fit(cfg.model.members, cfg.train.member_seeds):
        problems.append(f"train.member_seeds: {cfg.model.members} members need {cfg.model.members} different seeds, "
                        f"got {cfg.train.member_seeds}")
    problems += mf.channel_problems(cfg.export.channel, "export.channel")
    problems += mf.policy_problems(cfg.export.policy, "export.policy")
    if cfg.train.member_parallel < 1:
        problems.append(f"train.member_parallel: {cfg.train.member_parallel} is not a number of runs (1 or more)")
    if not 0.0 <= cfg.train.select_max_text_blocked <= 1.0:
        problems.append(f"train.select_max_text_blocked: {cfg.train.select_max_text_blocked} is not a fraction (0-1)")
    if not 0.0 < cfg.train.distill_weight <= 1.0:
        problems.append(f"train.distill_weight: {cfg.train.distill_weight} is not a fraction in (0, 1]")
    if cfg.train.distill_from and not re.fullmatch(r"[A-Za-z0-9._-]+@[A-Za-z0-9._-]+", cfg.train.distill_from):
        problems.append(f"train.distill_from: {cfg.train.distill_from!r} is not <name>@<version> (e.g. clef-flash@1.7.0)")
    if cfg.train.distill_from and cfg.model.members > 1:
        problems.append("train.distill_from: distils into one network; model.members must be 1")
    if problems:
        raise SystemExit(f"{path}: {len(problems)} problem(s):\n" + "\n".join(f"  {p}" for p in problems))
    return cfg


# ---------------------------------------------------------------------------- data

@dataclass
class Encoded:
    """Encoded rows of one split."""

    inputs: list[feat.ModelInput]
    labels: np.ndarray  # class index
    kinds: np.ndarray  # attack_kind index, -1 when not an attack (masked)
    weights: np.ndarray
    records: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.labels)


def encode(records: Sequence[dict[str, Any]], weights: Sequence[float] | None = None) -> Encoded:
    """Model inputs and targets for records (decision-log inputs of this version are used as logged)."""
    inputs: list[feat.ModelInput] = []
    for rec in records:
        logged = rec.get("model_input")
        mi = feat.ModelInput.from_json(logged, version=feat.V1_VERSION) if isinstance(logged, dict) else None
        inputs.append(mi if mi is not None else feat.model_input(feat.from_record(rec)))
    labels = np.array([CLASSES.index(r["label"]) for r in records], dtype=np.int64)
    kinds = np.array([KINDS.index(r["attack_kind"]) if r["label"] == "attack" and r.get("attack_kind") in KINDS else -1
                      for r in records], dtype=np.int64)
    w = np.ones(len(records), dtype=np.float32) if weights is None else np.asarray(weights, dtype=np.float32)
    return Encoded(inputs, labels, kinds, w, list(records))


def _split_of(seed: int, i: int, val: float, cal: float) -> str:
    u = int.from_bytes(hashlib.sha256(f"{seed}/row/{i}".encode()).digest()[:8], "big") / 2**64
    return "val" if u < val else "cal" if u < val + cal else "train"


@dataclass
class Splits:
    train: Encoded
    val: Encoded
    cal: Encoded
    eval: Encoded
    data_info: dict[str, Any]
    text: Encoded | None = None  # people's developer text the epoch choice reads (``select_text_rows``)


def prepare(cfg: TrainConfig, extra: Sequence[Path], log: Any) -> Splits:
    """Generate, read, split and encode every row of the run."""
    work = Path(cfg.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    written = {}
    for side, rows, seed in (("train", cfg.data.generated_rows, cfg.seed), ("calib", cfg.data.calibration_rows, cfg.seed + 1),
                             ("eval", cfg.data.eval_rows, cfg.data.eval_seed)):
        path = work / f"{side}.jsonl"
        n, digest = write_jsonl(generate(side, rows, seed, dev_questions=cfg.data.dev_questions, routes=cfg.data.routes,
                                         rest_writes=cfg.data.rest_writes, evasions=cfg.data.evasions, mounts=cfg.data.mounts,
                                         xhr_attacks=cfg.data.xhr_attacks), path)
        written[side] = (path, n, digest, seed)
    log(f"data: generated {written['train'][1]} training-side rows (sha256 {written['train'][2][:12]}), "
        f"{written['calib'][1]} calibration-side rows, {written['eval'][1]} held-out rows in {written['eval'][0]}")

    def read(side: str) -> list[dict[str, Any]]:
        with written[side][0].open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]

    records = read("train")
    weights = [1.0] * len(records)
    cal_records = read("calib")
    cal_weights = [1.0] * len(cal_records)
    sources: list[dict[str, Any]] = []
    for path in [Path(p) for p in cfg.data.extra] + list(extra):
        stats = formats.ReadStats()
        got = list(formats.read_any(path, stats))
        base = len(records) + len(cal_records)
        for j, rec in enumerate(got):
            w = cfg.data.access_log_weight if rec.get("source") == "access-log" else 1.0
            if _split_of(cfg.seed, base + j, 0.0, cfg.data.calibration_share) == "cal":
                cal_records.append(rec)
                cal_weights.append(w)
            else:
                records.append(rec)
                weights.append(w)
        sources.append({"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "rows": len(got)})
        log(f"data: {path}: read {stats.read}, kept {stats.kept}, skipped {stats.skipped or 'none'}")
    parts: dict[str, list[int]] = {"train": [], "val": []}
    for i in range(len(records)):
        parts["val" if _split_of(cfg.seed, i, cfg.data.validation_share, 0.0) == "val" else "train"].append(i)
    t0 = time.time()
    enc = {k: encode([records[i] for i in idx], [weights[i] for i in idx]) for k, idx in parts.items()}
    cal = encode(cal_records, cal_weights)
    ev = encode(read("eval"))
    log(f"data: encoded {len(records) + len(cal) + len(ev)} rows in {time.time() - t0:.1f}s "
        f"(train {len(enc['train'])}, validation {len(enc['val'])}, calibration {len(cal)}, eval {len(ev)})")

    def describe(side: str) -> dict[str, Any]:
        _, n, digest, seed = written[side]
        share = cfg.data.dev_questions if side != "eval" else 0.0  # the held-out side draws none
        flag = (f" --dev-questions {share!r}" if share else "") + (" --routes" if cfg.data.routes and side == "train" else "")
        if side == "train":
            flag += (" --rest-writes" if cfg.data.rest_writes else "") + (f" --evasions {cfg.data.evasions!r}" if cfg.data.evasions else "")
            flag += f" --mounts {cfg.data.mounts!r}" if cfg.data.mounts else ""
            flag += f" --xhr-attacks {cfg.data.xhr_attacks!r}" if cfg.data.xhr_attacks else ""
        return {"sha256": digest, "rows": n, "generator": f"models.data.generate --split {side} --rows {n} --seed {seed}{flag}"}

    info = {**describe("train"), "calibration": describe("calib"), "eval": describe("eval"), "extra": sources,
            "split": {"train": len(enc["train"]), "validation": len(enc["val"]), "calibration": len(cal), "eval": len(ev)}}
    text = None
    if cfg.train.select_text_rows > 0:
        from models.data import realtext

        # written like every other side, so the digest is that of the file the generator command below writes
        rows = realtext.sample(realtext.markdown_snippets(), cfg.train.select_text_rows, cfg.seed)
        n, digest = write_jsonl(iter(rows), work / "choice_text.jsonl")
        text = encode(rows)
        info["choice_text"] = {"sha256": digest, "rows": n,
                               "generator": f"models.data.realtext --source markdown --rows {n} --seed {cfg.seed}"}
        log(f"data: {n} people's Markdown text rows for the epoch choice (sha256 {digest[:12]})")
    return Splits(enc["train"], enc["val"], cal, ev, info, text)


def batches(enc: Encoded, batch_size: int, rng: random.Random | None) -> Iterator[tuple[torch.Tensor, ...]]:
    """Length-bucketed batches (similar lengths together, so little padding); shuffled when ``rng``."""
    order = list(range(len(enc)))
    if rng is not None:
        rng.shuffle(order)
    chunk = batch_size * 50
    groups: list[list[int]] = []
    for lo in range(0, len(order), chunk):
        part = sorted(order[lo:lo + chunk], key=lambda i: len(enc.inputs[i].ids))
        groups += [part[j:j + batch_size] for j in range(0, len(part), batch_size)]
    if rng is not None:
        rng.shuffle(groups)
    for idx in groups:
        ids, numeric = feat.pad_batch([enc.inputs[i] for i in idx])
        yield (torch.from_numpy(ids), torch.from_numpy(numeric), torch.from_numpy(enc.labels[idx]),
               torch.from_numpy(enc.kinds[idx]), torch.from_numpy(enc.weights[idx]), torch.tensor(idx))


def loss_fn(outs: tuple[torch.Tensor, ...], y: torch.Tensor, kind: torch.Tensor, w: torch.Tensor, opt: OptimConfig,
            teacher: torch.Tensor | None = None) -> torch.Tensor:
    """Label-smoothed CE + Brier on class; CE on attack_kind for attack rows only.

    With ``teacher`` (its class probabilities for these rows) the class target is the label mixed with them by
    ``opt.distill_weight``; without, the label alone, computed exactly as before distillation existed.
    """
    cls_logits, kind_logits = outs
    p = torch.softmax(cls_logits, dim=-1)
    if teacher is None:
        ce = F.cross_entropy(cls_logits, y, label_smoothing=opt.label_smoothing, reduction="none")
        br = ((p - F.one_hot(y, p.shape[-1]).to(p.dtype)) ** 2).sum(-1)
    else:
        target = (1.0 - opt.distill_weight) * F.one_hot(y, p.shape[-1]).to(p.dtype) + opt.distill_weight * teacher
        ce = F.cross_entropy(cls_logits, target, label_smoothing=opt.label_smoothing, reduction="none")
        br = ((p - target) ** 2).sum(-1)
    loss = ((ce + opt.brier_weight * br) * w).sum() / w.sum()
    mask = kind >= 0
    if mask.any():
        loss = loss + opt.kind_weight * F.cross_entropy(kind_logits[mask], kind[mask], label_smoothing=opt.label_smoothing)
    return loss


def teacher_probabilities(cfg: TrainConfig, enc: Encoded, log: Any, batch_size: int = 512) -> tuple[torch.Tensor, dict[str, Any]]:
    """The ``train.distill_from`` version's calibrated class probabilities for ``enc`` (rows in order, CLASSES order),
    from its fp32 file on the CPU, and what to record about the teacher."""
    from gateway.decider.onnx import ModelLoadError, OnnxOptions, OnnxScorer

    name, version = cfg.train.distill_from.split("@", 1)
    try:
        teacher = OnnxScorer(OnnxOptions(repository=Path(cfg.export.repository), name=name, version=version, variant="fp32",
                                         providers=("cpu",), intra_op_threads=cfg.train.threads, warmup_runs=0))
    except (mf.ManifestError, ModelLoadError) as exc:
        raise SystemExit(f"train.distill_from: {cfg.train.distill_from}: {exc}") from exc
    options = teacher.questions.get("class")
    if options is None or sorted(options) != sorted(CLASSES):
        raise SystemExit(f"train.distill_from: {cfg.train.distill_from} answers class with {options}, not {', '.join(CLASSES)}")
    order = [options.index(c) for c in CLASSES]
    started = time.time()
    probs = np.concatenate([teacher.probabilities(enc.inputs[lo:lo + batch_size])["class"][:, order]
                            for lo in range(0, len(enc), batch_size)]).astype(np.float32)
    teacher.close()
    agree = float((probs.argmax(1) == enc.labels).mean()) if len(enc) else 0.0
    log(f"distill: {cfg.train.distill_from} (fp32, T {teacher.manifest.temperature.get('class', 1.0):.3f}) scored {len(enc)} "
        f"training rows in {time.time() - started:.1f}s; its top class is the label on {agree:.2%} of them; "
        f"target = {1 - cfg.train.distill_weight:g} x label + {cfg.train.distill_weight:g} x teacher")
    spec = teacher.manifest.files["fp32"]
    info = {"model": cfg.train.distill_from, "weight": cfg.train.distill_weight, "file": spec.path, "sha256": spec.sha256,
            "agreement_with_labels": round(agree, 5)}
    return torch.from_numpy(probs), info


@torch.no_grad()
def predict(net: Net, enc: Encoded, batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Logits (class, attack_kind) for every row, in row order."""
    net.eval()
    cls = np.zeros((len(enc), len(CLASSES)), dtype=np.float32)
    kind = np.zeros((len(enc), len(KINDS)), dtype=np.float32)
    for ids, numeric, _, _, _, idx in batches(enc, batch_size, None):
        a, b = net(ids, numeric)
        cls[idx.numpy()] = a.numpy()
        kind[idx.numpy()] = b.numpy()
    return cls, kind


def train_model(cfg: TrainConfig, splits: Splits, log: Any) -> tuple[FlashNet, dict[str, Any]]:
    """Train with early stopping on the validation loss; returns the best network and a history."""
    from tqdm import tqdm

    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    opt_cfg = cfg.train
    if cfg.model.members != 1:  # members are trained apart (train_members) and assembled
        raise ValueError("train_model trains one network: run a model.members > 1 config through main()")
    net = FlashNet(cfg.model)
    decay = [p for n, p in net.named_parameters() if p.ndim >= 2 and "embed" not in n and "trigram" not in n and "position" not in n]
    rest = [p for n, p in net.named_parameters() if not (p.ndim >= 2 and "embed" not in n and "trigram" not in n and "position" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": opt_cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=opt_cfg.lr)
    steps_per_epoch = math.ceil(len(splits.train) / opt_cfg.batch_size)
    total = max(1, steps_per_epoch * opt_cfg.epochs)

    def lr_at(step: int) -> float:
        if step < opt_cfg.warmup_steps:
            return (step + 1) / opt_cfg.warmup_steps
        progress = (step - opt_cfg.warmup_steps) / max(1, total - opt_cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    ema = _Ema(net, opt_cfg.ema_decay) if opt_cfg.ema_decay > 0 else None
    scored = ema.net if ema is not None else net
    best_loss, best_epoch = math.inf, -1
    snapshots: list[dict[str, torch.Tensor]] = []
    history: list[dict[str, Any]] = []
    bad_epochs = 0
    soft = None
    if opt_cfg.distill_from:  # before the clock starts: max_minutes guards training, not the teacher's scoring
        soft, splits.data_info["distilled_from"] = teacher_probabilities(cfg, splits.train, log)
    started = time.time()
    log(f"train: {sum(p.numel() for p in net.parameters()):,} parameters, {steps_per_epoch} steps per epoch, "
        f"up to {opt_cfg.epochs} epochs, {torch.get_num_threads()} threads")
    for epoch in range(opt_cfg.epochs):
        net.train()
        running, seen = 0.0, 0
        bar = tqdm(batches(splits.train, opt_cfg.batch_size, rng), total=steps_per_epoch, desc=f"epoch {epoch + 1}/{opt_cfg.epochs}",
                   unit="batch", file=sys.stderr, leave=False, mininterval=2.0)
        for ids, numeric, y, kind, w, idx in bar:
            loss = loss_fn(net(ids, numeric), y, kind, w, opt_cfg, None if soft is None else soft[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            if ema is not None:
                ema.update(net)
            running += loss.item() * len(y)
            seen += len(y)
            bar.set_postfix(loss=f"{running / seen:.4f}", refresh=False)
        bar.close()
        cls_logits, kind_logits = predict(scored, splits.val)
        val_loss = _val_loss(cls_logits, kind_logits, splits.val)
        val_acc = float((cls_logits.argmax(1) == splits.val.labels).mean())
        held = _calibration_side(scored, splits.cal, splits.text)
        elapsed = (time.time() - started) / 60
        history.append({"epoch": epoch + 1, "train_loss": round(running / max(1, seen), 5), "val_loss": round(val_loss, 5),
                        "val_accuracy": round(val_acc, 5), "calibration_side": held, "minutes": round(elapsed, 2)})
        log(f"epoch {epoch + 1}: train loss {running / max(1, seen):.4f}, validation loss {val_loss:.4f}, "
            f"validation accuracy {val_acc:.4f}; calibration side (unseen sources) "
            f"{', '.join(f'@{t}: attacks blocked {r[0]:.4f}, humans blocked {r[1]:.4f}' + (f', Markdown text blocked {r[2]:.4f}' if len(r) > 2 else '') for t, r in held.items())}"
            f" ({elapsed:.1f} min)")
        snapshots.append({k: v.detach().clone() for k, v in scored.state_dict().items()})
        if val_loss < best_loss - 1e-5:
            best_loss, best_epoch = val_loss, epoch
            bad_epochs = 0
        else:
            bad_epochs += 1
            if bad_epochs >= opt_cfg.patience:
                log(f"early stop: validation loss has not improved for {bad_epochs} epochs")
                break
        if elapsed * (epoch + 2) / (epoch + 1) > opt_cfg.max_minutes:
            log(f"time budget: another epoch would pass {opt_cfg.max_minutes} minutes; stopping")
            break
    chosen = _choose_epoch(history, opt_cfg) if opt_cfg.select == "calibration" else None
    selected_by = "validation" if chosen is None else "calibration"
    chosen = best_epoch if chosen is None else chosen
    h = history[chosen]
    at = h["calibration_side"].get(str(opt_cfg.select_threshold))
    log(f"weights of epoch {chosen + 1} (by {selected_by}): validation loss {h['val_loss']:.4f}"
        + (f", calibration side @{opt_cfg.select_threshold}: attacks blocked {at[0]:.4f}, humans blocked {at[1]:.4f}" if at else "")
        + (f", Markdown text blocked {at[2]:.4f}" if at and len(at) > 2 else ""))
    net.load_state_dict(snapshots[chosen])
    net.eval()
    return net, {"epochs": history, "minutes": round((time.time() - started) / 60, 2), "best_val_loss": round(best_loss, 5),
                 "chosen_epoch": chosen + 1, "selected_by": selected_by}


def _choose_epoch(history: Sequence[dict[str, Any]], opt: OptimConfig) -> int | None:
    """The epoch (index) blocking most attacks on the calibration side among those within the people-blocked bound
    (and, when the choice reads developer text, within ``select_max_text_blocked`` on it).

    Within the people bound but none within the text bound: the one blocking least text (then most attacks).
    None within the people bound: the one blocking fewest people (then least text, then most attacks).
    Ties go to the lower validation loss. None when nothing was measured there.
    """
    key = str(opt.select_threshold)
    rows = [(i, h["calibration_side"][key], h["val_loss"]) for i, h in enumerate(history) if key in h.get("calibration_side", {})]
    if not rows:
        return None
    people = [r for r in rows if r[1][1] <= opt.select_max_humans_blocked]
    within = [r for r in people if len(r[1]) < 3 or r[1][2] <= opt.select_max_text_blocked]
    if within:
        return max(within, key=lambda r: (r[1][0], -r[2]))[0]
    if people:  # people within the bound, developer text over its own: the least text blocked
        return min(people, key=lambda r: (r[1][2], -r[1][0], r[2]))[0]
    return min(rows, key=lambda r: (r[1][1], r[1][2] if len(r[1]) > 2 else 0.0, -r[1][0], r[2]))[0]


class _Ema:
    """An exponential moving average of a network's weights (warm-up: decay grows with the step count)."""

    def __init__(self, net: FlashNet, decay: float) -> None:
        self.net = copy.deepcopy(net)
        self.net.requires_grad_(False)
        self.decay = decay
        self.steps = 0

    @torch.no_grad()
    def update(self, net: FlashNet) -> None:
        self.steps += 1
        d = min(self.decay, (1 + self.steps) / (10 + self.steps))
        torch._foreach_lerp_(list(self.net.parameters()), list(net.parameters()), 1.0 - d)


# block thresholds reported per epoch on the calibration side
_TRACK = (0.95, 0.9, 0.8)


def _calibration_side(net: Net, cal: Encoded, text: Encoded | None = None) -> dict[str, tuple[float, ...]]:
    """(attacks blocked, humans blocked[, developer text blocked]) at each tracked threshold on the calibration side,
    after a temperature fit; the third when ``text`` (people's Markdown text, ``select_text_rows``) is given.

    Sources there are ones the network never trains on, so this tracks generalisation
    (the validation rows share sources with training); ``select: calibration`` keeps
    the epoch by it. Stopping stays on the validation loss.
    """
    if not len(cal):
        return {}
    logits, _ = predict(net, cal)
    temperature = fit_temperature(logits, cal.labels)
    p = softmax(logits, temperature)
    rates = {t: policy_rates(p, cal.labels, _threshold_only(t)) for t in _TRACK}
    if text is None or not len(text):
        return {str(t): (r["attacks_blocked"], r["humans_blocked"]) for t, r in rates.items()}
    text_logits, _ = predict(net, text)
    pt = softmax(text_logits, temperature)
    return {str(t): (r["attacks_blocked"], r["humans_blocked"], policy_rates(pt, text.labels, _threshold_only(t))["humans_blocked"])
            for t, r in rates.items()}


def _threshold_only(block_attack: float) -> PolicyConfig:
    """The policy at one P(attack) threshold, without the later-chosen blocks on combined risk or a corroborating rule.

    Epoch choice and the recorded model-alone rates read the model's own threshold only,
    so ``make model`` keeps rebuilding the same files;
    ``policy.block_risk`` and ``policy.block_attack_corroborated`` are chosen afterwards
    on the calibration samples and real text (models/README.md).
    """
    return PolicyConfig(block_attack=block_attack, block_risk=None, block_attack_corroborated=None)


def _val_loss(cls_logits: np.ndarray, kind_logits: np.ndarray, enc: Encoded) -> float:
    p = softmax(cls_logits)
    loss = float(-np.mean(np.log(np.clip(p[np.arange(len(enc)), enc.labels], 1e-12, 1))))
    mask = enc.kinds >= 0
    if mask.any():
        pk = softmax(kind_logits[mask])
        loss += 0.3 * float(-np.mean(np.log(np.clip(pk[np.arange(mask.sum()), enc.kinds[mask]], 1e-12, 1))))
    return loss


# ---------------------------------------------------------------------------- evaluation

def policy_rates(p: np.ndarray, labels: np.ndarray, policy: PolicyConfig) -> dict[str, float]:
    """Model-alone outcome rates at a policy's thresholds (no rules)."""
    risk = p[:, CLASSES.index("bad_bot")] + p[:, CLASSES.index("attack")]
    block = p[:, CLASSES.index("attack")] >= policy.block_attack
    if policy.block_risk is not None:
        block |= risk >= policy.block_risk
    challenge = ~block & (risk >= policy.challenge_risk)

    def rate(mask: np.ndarray, cls: str) -> float:
        sel = labels == CLASSES.index(cls)
        return round(float(mask[sel].mean()), 5) if sel.any() else 0.0

    return {"humans_blocked": rate(block, "human"), "humans_challenged": rate(challenge, "human"),
            "attacks_blocked": rate(block, "attack"), "bad_bots_stopped": rate(block | challenge, "bad_bot"),
            "good_bots_passed": rate(~block & ~challenge, "good_bot")}


def question_metrics(logits: np.ndarray, labels: np.ndarray, temperature: float, options: Sequence[str]) -> dict[str, Any]:
    """Accuracy, per-option precision/recall, confusion matrix, ECE and Brier before/after temperature."""
    before, after = softmax(logits), softmax(logits, temperature)
    pred = after.argmax(1)
    k = len(options)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (labels, pred), 1)
    per = {}
    for i, name in enumerate(options):
        tp = confusion[i, i]
        per[name] = {"precision": round(float(tp / max(1, confusion[:, i].sum())), 5),
                     "recall": round(float(tp / max(1, confusion[i].sum())), 5), "support": int(confusion[i].sum())}
    return {"n": len(labels), "accuracy": round(float((pred == labels).mean()), 5) if len(labels) else 0.0,
            "per_option": per, "confusion": confusion.tolist(),
            "ece_before": round(ece(before, labels), 5), "ece_after": round(ece(after, labels), 5),
            "brier_before": round(brier(before, labels), 5), "brier_after": round(brier(after, labels), 5)}


def calibrate_and_measure(net: Net, splits: Splits, work: Path, log: Any,
                          show_eval: bool = True) -> tuple[dict[str, float], dict[str, Any], Path]:
    """Fit temperatures on the calibration split; metrics on calibration and held-out eval; the diagram.

    ``show_eval=False`` keeps the held-out figures out of the log (they are still in the metrics): reading
    an experiment's log then tells nothing about the held-out split.
    """
    cal_cls, cal_kind = predict(net, splits.cal)
    kmask = splits.cal.kinds >= 0
    temps = {"class": fit_temperature(cal_cls, splits.cal.labels),
             "attack_kind": fit_temperature(cal_kind[kmask], splits.cal.kinds[kmask]) if kmask.any() else 1.0}
    ev_cls, ev_kind = predict(net, splits.eval)
    ekmask = splits.eval.kinds >= 0
    metrics = {
        "calibration_split": {"class": question_metrics(cal_cls, splits.cal.labels, temps["class"], CLASSES),
                              "attack_kind": question_metrics(cal_kind[kmask], splits.cal.kinds[kmask], temps["attack_kind"], KINDS)},
        "eval": {"class": question_metrics(ev_cls, splits.eval.labels, temps["class"], CLASSES),
                 "attack_kind": question_metrics(ev_kind[ekmask], splits.eval.kinds[ekmask], temps["attack_kind"], KINDS)},
    }
    policy = _threshold_only(PolicyConfig().block_attack)
    metrics["eval"]["policy_model_alone"] = {
        "thresholds": {"block_attack": policy.block_attack, "block_risk": policy.block_risk, "challenge_risk": policy.challenge_risk},
        **policy_rates(softmax(ev_cls, temps["class"]), splits.eval.labels, policy)}
    png = work / "reliability.png"
    reliability_png([("class, held-out eval, before", softmax(ev_cls), splits.eval.labels),
                     ("class, held-out eval, after temperature", softmax(ev_cls, temps["class"]), splits.eval.labels),
                     ("attack_kind (attacks), eval, after", softmax(ev_kind[ekmask], temps["attack_kind"]), splits.eval.kinds[ekmask])], png)
    e = metrics["eval"]["class"]
    c = metrics["calibration_split"]["class"]
    log(f"calibration: T(class) {temps['class']:.3f}, T(attack_kind) {temps['attack_kind']:.3f}; "
        f"calibration split ECE {c['ece_before']:.4f} -> {c['ece_after']:.4f}, Brier {c['brier_before']:.4f} -> {c['brier_after']:.4f}")
    if not show_eval:
        log("held-out eval: measured and written to metrics.json and the manifest, not printed (--hide-eval)")
        return temps, metrics, png
    log(f"held-out eval: accuracy {e['accuracy']:.4f}, ECE {e['ece_before']:.4f} -> {e['ece_after']:.4f}, "
        f"Brier {e['brier_before']:.4f} -> {e['brier_after']:.4f}; model alone at the default policy: "
        f"{json.dumps(metrics['eval']['policy_model_alone'])}")
    return temps, metrics, png


def train_members(cfg: TrainConfig, args: argparse.Namespace, log: Any) -> list[Path]:
    """Train each member as a run of its own (``--member I``, ``train.member_parallel`` at a time); their work dirs.

    A member's log goes to ``<work_dir>/member-I.log``; the first failure stops the others and the run.
    """
    work = Path(cfg.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    common = [sys.executable, "-m", "models.train", "--config", str(args.config), "--work-dir", str(work), "--hide-eval",
              "--member-seeds", ",".join(map(str, cfg.train.member_seeds))]
    for extra in args.data:
        common += ["--data", str(extra)]
    waiting = list(range(1, cfg.model.members + 1))
    running: dict[int, tuple[subprocess.Popen[bytes], Any, float]] = {}
    # a plain ``kill`` of this process must not leave members training: SIGTERM unwinds through ``finally``
    previous = signal.signal(signal.SIGTERM, _exit_on_signal) if threading.current_thread() is threading.main_thread() else None
    try:
        while waiting or running:
            while waiting and len(running) < cfg.train.member_parallel:
                i = waiting.pop(0)
                fh = (work / f"member-{i}.log").open("wb")
                # a SIGTERM between starting a member and recording it would leave that member running: hold it until recorded
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                try:
                    running[i] = (subprocess.Popen([*common, "--member", str(i)], stdout=fh, stderr=subprocess.STDOUT), fh, time.time())
                finally:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                log(f"member {i}: training with seed {cfg.train.member_seeds[i - 1]} (log: {work / f'member-{i}.log'})")
            time.sleep(1.0)
            for i, (proc, fh, t0) in list(running.items()):
                if proc.poll() is None:
                    continue
                fh.close()
                del running[i]
                if proc.returncode != 0:
                    raise SystemExit(f"member {i} failed (exit {proc.returncode}); see {work / f'member-{i}.log'}")
                done = json.loads((work / f"member-{i}" / "metrics.json").read_text(encoding="utf-8"))["training"]
                log(f"member {i}: done in {(time.time() - t0) / 60:.1f} min, weights of epoch {done['chosen_epoch']} "
                    f"(by {done['selected_by']})")
    finally:
        for proc, fh, _ in running.values():
            proc.kill()
            proc.wait()
            fh.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return [work / f"member-{i}" for i in range(1, cfg.model.members + 1)]


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def assemble(runs: Sequence[Path], log: Any) -> tuple[Net, dict[str, Any], list[dict[str, Any]]]:
    """One network answering with the mean of the members' (finished runs') probabilities."""
    checkpoints = [torch.load(run / "model.pt", map_location="cpu", weights_only=False) for run in runs]
    configs = [FlashConfig(**c["config"]) for c in checkpoints]
    if any(c != configs[0] for c in configs):
        raise SystemExit(f"members differ in architecture: {', '.join(str(run) for run in runs)}")
    net = build(dataclasses.replace(configs[0], members=len(runs)))
    for member, checkpoint in zip(net.member_nets(), checkpoints, strict=True):
        member.load_state_dict(checkpoint["state_dict"])
    net.eval()
    history = {"selected_by": "members", "members": [
        {"work_dir": str(run), "temperature": c["temperature"], **c["metrics"]["training"]} for run, c in zip(runs, checkpoints, strict=True)]}
    data = [{k: c["training_data"][k] for k in ("sha256", "rows", "generator", "calibration")} for c in checkpoints]
    log(f"assembled {len(runs)} members ({sum(p.numel() for p in net.parameters()):,} parameters)")
    return net, history, data


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m models.train`` / ``clefgate train``."""
    ap = argparse.ArgumentParser(prog="python -m models.train", description="Train, calibrate and export Clef-flash.")
    ap.add_argument("--config", type=Path, default=Path("models/configs/clef-flash.yaml"), help="training config (YAML)")
    ap.add_argument("--data", type=Path, action="append", default=[],
                    help="extra labelled data: JSONL records, a decision log with labels, or a combined access log with a label column")
    ap.add_argument("--version", default=None, help="version to write (default: the config's)")
    ap.add_argument("--repository", type=Path, default=None, help="model repository (default: the config's)")
    ap.add_argument("--work-dir", type=Path, default=None, help="folder for data, checkpoint and reports (default: the config's)")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed to use instead of the config's: training rows (seed), calibration rows (seed + 1), initialisation "
                         "and order; the held-out rows keep data.eval_seed. Compare a recipe over several seeds: one run says little")
    ap.add_argument("--member-seeds", default=None,
                    help="comma-separated seeds to use instead of the config's train.member_seeds (model.members > 1)")
    ap.add_argument("--member", type=int, default=None, metavar="I",
                    help="train member I (1-based) of a model.members > 1 config alone, as the full run does in "
                         "<work-dir>/member-I: its seed, one network, no export")
    ap.add_argument("--assemble-only", action="store_true",
                    help="model.members > 1: train nothing, assemble the finished member runs in <work-dir>/member-I (e.g. "
                         "trained one by one with --member I, on other machines)")
    ap.add_argument("--no-export", action="store_true", help="train and measure only")
    ap.add_argument("--hide-eval", action="store_true",
                    help="do not print the held-out split's figures (still written to metrics.json and the manifest): for "
                         "experiments compared on the calibration side, so that their logs tell nothing about the held-out split")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    if args.version:
        cfg.version = args.version
    if args.seed is not None:
        cfg.seed = args.seed
    if args.work_dir:
        cfg.work_dir = str(args.work_dir)
    if args.repository:
        cfg.export.repository = str(args.repository)
    if args.member_seeds is not None:
        try:
            cfg.train.member_seeds = [int(v) for v in args.member_seeds.split(",")]
        except ValueError:
            ap.error(f"--member-seeds: {args.member_seeds!r} is not a comma-separated list of whole numbers")
        if not _seeds_fit(cfg.model.members, cfg.train.member_seeds):
            ap.error(f"--member-seeds: model.members is {cfg.model.members}: give {cfg.model.members} different seeds")
    if args.assemble_only and (cfg.model.members == 1 or args.member is not None):
        ap.error("--assemble-only: needs a model.members > 1 config, without --member")
    prefix = "clef-flash"
    if args.member is not None:
        if not 1 <= args.member <= cfg.model.members or cfg.model.members == 1:
            ap.error(f"--member {args.member}: the config has {cfg.model.members} member(s)")
        prefix = f"clef-flash member {args.member}"
        cfg.seed = cfg.train.member_seeds[args.member - 1]
        cfg.work_dir = str(Path(cfg.work_dir) / f"member-{args.member}")
        cfg.model = dataclasses.replace(cfg.model, members=1)
        args.no_export = True

    def log(msg: str) -> None:
        print(f"[{prefix}] {msg}", file=sys.stderr, flush=True)

    started = time.time()
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.train.threads)
    work = Path(cfg.work_dir)
    if cfg.model.members == 1:
        splits = prepare(cfg, args.data, log)
        net, history = train_model(cfg, splits, log)
    else:
        if args.assemble_only:
            runs = [work / f"member-{i}" for i in range(1, cfg.model.members + 1)]
            missing = [str(run / "model.pt") for run in runs if not (run / "model.pt").is_file()]
            if missing:
                raise SystemExit(f"--assemble-only: no finished member run at {', '.join(missing)} (train them with --member I)")
        else:
            runs = train_members(cfg, args, log)
        splits = prepare(cfg, args.data, log)  # the config seed's calibration and held-out rows, which the version is read on
        net, history, member_data = assemble(runs, log)
        splits.data_info["members"] = member_data
    temps, metrics, png = calibrate_and_measure(net, splits, work, log, show_eval=not args.hide_eval)
    metrics["training"] = history
    checkpoint = {"name": cfg.name, "version": cfg.version, "config": net.cfg.to_dict(), "state_dict": net.state_dict(),
                  "temperature": temps, "metrics": metrics, "training_data": splits.data_info,
                  "channel": cfg.export.channel, "policy": dict(cfg.export.policy)}  # a re-export keeps both
    torch.save(checkpoint, work / "model.pt")
    (work / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    if cfg.export.enabled and not args.no_export:
        from models.export import export_version, sample_inputs

        path = export_version(checkpoint, Path(cfg.export.repository), sample=sample_inputs(splits.eval.inputs),
                              precisions=cfg.export.precisions, extra_files={"reliability.png": png})
        report = json.loads((path / "manifest.json").read_text())["parity"]
        log(f"export: {path} ({', '.join(f'{p.name} {p.stat().st_size / 1e6:.2f} MB' for p in sorted(path.glob('*.onnx')))}); "
            f"parity {json.dumps(report)}")
    log(f"done in {(time.time() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
