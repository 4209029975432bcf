"""Train clef's adapters and routing head: ``python -m models.clef.train``.

Steps: generate the data (fixed seed), run the frozen lower layers of MiniLM once per
distinct text and keep the hidden states, train adapters + head on the top layers with
label-smoothed cross-entropy plus a Brier term, keep the best step by validation NLL
on held-out task families, fit the temperature per question type on the calibration
split (also held-out families), and write ``adapters.npz``, ``head.npz`` and
``train_report.json`` to the output folder. ``models.clef.export`` turns that into a
shipped model.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

from gateway.clef import hypothesis_text
from models.clef import calibration
from models.clef.data import GENERATOR, Row, generate
from models.clef.network import ClefNet, backbone_path, load_backbone, tiny_backbone

DEFAULT_OUT = Path("models/work/clef")


def hypotheses(row: Row) -> list[str]:
    """The texts embedded for a row's options (bool: the criteria; its "false" is the null head)."""
    if row.qtype == "bool":
        return [hypothesis_text(row.criteria, None)]
    return [hypothesis_text(row.criteria, o) for o in row.options]


def load_tokenizer(path: Path | None = None) -> Tokenizer:
    tok = Tokenizer.from_file(str(path or backbone_path() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


class HiddenCache:
    """Frozen lower-layer hidden states per distinct text (fp16, unpadded)."""

    def __init__(self, net: ClefNet, tokenizer: Tokenizer, max_tokens: int = 128, batch: int = 64) -> None:
        self.net, self.tokenizer, self.max_tokens, self.batch = net, tokenizer, max_tokens, batch
        self.hidden: dict[str, torch.Tensor] = {}

    def add(self, texts: Sequence[str], progress: bool = False) -> None:
        todo = sorted({t for t in texts if t not in self.hidden}, key=len)
        encs = self.tokenizer.encode_batch(todo, add_special_tokens=True)
        started = time.time()
        for lo in range(0, len(todo), self.batch):
            ids, mask = _pad([[*e.ids[:self.max_tokens - 1], e.ids[-1]] if len(e.ids) > self.max_tokens else e.ids
                              for e in encs[lo:lo + self.batch]])
            h = self.net.lower(ids, mask).to(torch.float16)
            for j, text in enumerate(todo[lo:lo + self.batch]):
                self.hidden[text] = h[j, : int(mask[j].sum())].clone()
            if progress and (lo // self.batch) % 20 == 0:
                print(f"  lower layers: {lo + len(encs[lo:lo + self.batch])}/{len(todo)} texts, {time.time() - started:.0f}s", flush=True)

    def batch_of(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(self.hidden[t].shape[0] for t in texts)
        dim = next(iter(self.hidden.values())).shape[1]
        h = torch.zeros(len(texts), width, dim)
        mask = torch.zeros(len(texts), width, dtype=torch.long)
        for i, t in enumerate(texts):
            x = self.hidden[t]
            h[i, : x.shape[0]] = x.float()
            mask[i, : x.shape[0]] = 1
        return h, mask


def _pad(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask


def row_logits(net: ClefNet, cache: HiddenCache, rows: Sequence[Row]) -> list[torch.Tensor]:
    """Option logits per row: states and hypotheses of the batch go through the adapted layers once."""
    states = list(dict.fromkeys(r.state for r in rows))
    hyps = list(dict.fromkeys(h for r in rows for h in hypotheses(r)))
    s = net.upper(*cache.batch_of(states))
    h = net.upper(*cache.batch_of(hyps))
    pair = net.pair_logits(s, h)
    null = net.null_logits(s)
    si = {t: i for i, t in enumerate(states)}
    hi = {t: i for i, t in enumerate(hyps)}
    out: list[torch.Tensor] = []
    for r in rows:
        k = si[r.state]
        idx = torch.tensor([hi[t] for t in hypotheses(r)])
        lg = pair[k, idx]
        out.append(torch.stack([lg[0], null[k]]) if r.qtype == "bool" else lg + net.contrast_logits(s[k], h[idx]))
    return out


def loss_of(logits: Sequence[torch.Tensor], rows: Sequence[Row], smoothing: float, brier_weight: float) -> torch.Tensor:
    total = torch.zeros(())
    for lg, r in zip(logits, rows, strict=True):
        target = torch.tensor(r.label)
        total = total + nn.functional.cross_entropy(lg.unsqueeze(0), target.unsqueeze(0), label_smoothing=smoothing)
        p = torch.softmax(lg, dim=0)
        onehot = nn.functional.one_hot(target, lg.shape[0]).to(p.dtype)
        total = total + brier_weight * ((p - onehot) ** 2).sum()
    return total / len(rows)


@torch.no_grad()
def predict(net: ClefNet, cache: HiddenCache, rows: Sequence[Row], batch: int = 64) -> list[np.ndarray]:
    net.eval()
    out: list[np.ndarray] = []
    for lo in range(0, len(rows), batch):
        out.extend(lg.numpy().astype(np.float64) for lg in row_logits(net, cache, rows[lo:lo + batch]))
    return out


def evaluate_split(logits: Sequence[np.ndarray], rows: Sequence[Row], temps: dict[str, float]) -> dict[str, dict[str, float]]:
    """Accuracy/ECE/Brier/NLL per question type at the given temperatures."""
    out: dict[str, dict[str, float]] = {}
    for qtype in ("choice", "bool"):
        sel = [i for i, r in enumerate(rows) if r.qtype == qtype]
        lgs, ys = [logits[i] for i in sel], [rows[i].label for i in sel]
        probs = [calibration.softmax(lg, temps[qtype]) for lg in lgs]
        stats = calibration.summary(probs, ys)
        stats["nll"] = calibration.nll(lgs, ys, temps[qtype]) if ys else 0.0
        out[qtype] = stats
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m models.clef.train", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default models/work/clef)")
    ap.add_argument("--states", type=int, default=9000, help="generated training states")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--rank", type=int, default=8, help="adapter rank")
    ap.add_argument("--adapt-from", type=int, default=4, help="first adapted layer (layers below are frozen and cached)")
    ap.add_argument("--head-rank", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-minutes", type=float, default=25.0, help="stop training after this long (best step kept)")
    ap.add_argument("--eval-every", type=int, default=100, help="steps between validation passes")
    ap.add_argument("--tiny", action="store_true", help="random 2-layer backbone: a pipeline check in seconds (tests)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)

    data = generate(states=args.states, seed=args.seed)
    print(f"data: {len(data.train)} train / {len(data.val)} val / {len(data.calib)} calibration rows, sha256 {data.sha256()[:12]}",
          flush=True)
    backbone = tiny_backbone() if args.tiny else load_backbone()
    net = ClefNet(backbone, adapt_from=1 if args.tiny else args.adapt_from, rank=args.rank, head_rank=args.head_rank)
    tokenizer = load_tokenizer()
    cache = HiddenCache(net, tokenizer)
    texts = [t for split in (data.train, data.val, data.calib) for r in split for t in (r.state, *hypotheses(r))]
    t0 = time.time()
    cache.add(texts, progress=not args.tiny)
    t_lower = time.time() - t0
    print(f"lower layers cached for {len(cache.hidden)} texts in {t_lower:.0f}s", flush=True)

    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    # --epochs 0 trains nothing: the zero-shot prior alone, calibrated like the trained model (an ablation)
    steps = math.ceil(len(data.train) / args.batch * args.epochs)
    warm = min(50, steps // 10 + 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / max(steps, 1))))
    rng = random.Random(args.seed)
    order: list[Row] = []
    best: dict[str, object] = {"nll": float("inf"), "step": 0, "state": net.adapter_state()}
    ones = {"choice": 1.0, "bool": 1.0}
    history: list[dict[str, float]] = []
    deadline = t_start + args.max_minutes * 60
    t0 = time.time()
    # step 0 is the zero-shot prior alone (adapters and bilinear term start at zero)
    val = evaluate_split(predict(net, cache, data.val), data.val, ones)
    prior_val = {q: dict(v) for q, v in val.items()}
    print(f"step 0 (prior) val acc choice {val['choice']['accuracy']:.3f} bool {val['bool']['accuracy']:.3f} "
          f"nll choice {val['choice']['nll']:.3f} bool {val['bool']['nll']:.3f}", flush=True)
    step = 0
    for step in range(1, steps + 1):
        if len(order) < args.batch:
            fresh = list(data.train)
            rng.shuffle(fresh)
            order.extend(fresh)
        rows, order = order[: args.batch], order[args.batch:]
        net.train()
        loss = loss_of(row_logits(net, cache, rows), rows, smoothing=0.05, brier_weight=0.5)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        last = step == steps or time.time() > deadline
        if step % args.eval_every == 0 or last:
            val = evaluate_split(predict(net, cache, data.val), data.val, ones)
            val_nll = (val["choice"]["nll"] * val["choice"]["n"] + val["bool"]["nll"] * val["bool"]["n"]) / max(
                val["choice"]["n"] + val["bool"]["n"], 1)
            history.append({"step": step, "loss": loss.item(), "val_nll": val_nll, "val_acc_choice": val["choice"]["accuracy"],
                            "val_acc_bool": val["bool"]["accuracy"]})
            print(f"step {step}/{steps} loss {loss.item():.3f} val nll {val_nll:.3f} acc choice {val['choice']['accuracy']:.3f} "
                  f"bool {val['bool']['accuracy']:.3f} ({time.time() - t0:.0f}s)", flush=True)
            if val_nll < best["nll"]:  # type: ignore[operator]
                best = {"nll": val_nll, "step": step, "state": net.adapter_state()}
        if last:
            break
    t_train = time.time() - t0
    net.load_adapter_state(best["state"])  # type: ignore[arg-type]

    calib_logits = predict(net, cache, data.calib)
    temps = {}
    for qtype in ("choice", "bool"):
        sel = [i for i, r in enumerate(data.calib) if r.qtype == qtype]
        temps[qtype] = calibration.fit_temperature([calib_logits[i] for i in sel], [data.calib[i].label for i in sel])
    before = evaluate_split(calib_logits, data.calib, ones)
    after = evaluate_split(calib_logits, data.calib, temps)
    print(f"temperature {temps}; calibration split before {before}; after {after}", flush=True)
    curves = {}
    for name, t in (("before", ones), ("after", temps)):
        probs = [calibration.softmax(lg, t[r.qtype]) for lg, r in zip(calib_logits, data.calib, strict=True)]
        curves[name] = calibration.confidences(probs, [r.label for r in data.calib])
    calibration.reliability_png(args.out / "reliability.png", curves, "clef: held-out task families (calibration split)")

    np.savez(args.out / "adapters.npz", **{k: v.numpy() for k, v in best["state"].items()})  # type: ignore[union-attr]
    np.savez(args.out / "head.npz", **net.head_arrays())  # type: ignore[arg-type]
    report = {
        "generator": GENERATOR, "seed": args.seed, "states": args.states, "tiny": args.tiny,
        "training_data": {"sha256": data.sha256(), "rows": data.rows, "generator": GENERATOR,
                          "splits": {"train": len(data.train), "val": len(data.val), "calib": len(data.calib)}},
        "config": {"rank": args.rank, "adapt_from": net.adapt_from, "head_rank": args.head_rank, "batch": args.batch,
                   "lr": args.lr, "epochs": args.epochs, "steps_run": step, "best_step": best["step"], "threads": args.threads},
        "prior_val": prior_val, "temperature": temps, "calibration_before": before, "calibration_after": after, "history": history,
        "prior_only": steps == 0,
        "seconds": {"lower_cache": round(t_lower, 1), "train": round(t_train, 1), "total": round(time.time() - t_start, 1)},
    }
    (args.out / "train_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}/adapters.npz, head.npz, train_report.json, reliability.png in {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
