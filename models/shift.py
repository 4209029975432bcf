"""Calibration under source shift: how far a temperature fitted on a model's own sources holds on sources it never saw.

    python -m models.shift --config models/configs/clef-flash-2.yaml \\
        --train A.jsonl --calib A-CAL.jsonl --other B.jsonl [--report shift.txt]

A model is trained on one half of the corpus's sources (``models.corpus.generate --half a``) exactly as
``models.train_split`` trains (the same encoding, path swap, validation share, schedule and seed). Each
question's temperature is then fitted twice: on calibration rows from the training half's sources (what a
release ships) and on rows of the other half, whose browser data, user agents, payload corpora, site types,
libraries and scanners the model never saw. Both are applied to both sides, and the table gives accuracy, ECE
(15 bins) and NLL for each pairing; for the payload question it adds the shares of attacks and of benign rows
at or over P(attack) ``--threshold`` (the policy's ``block_attack``). ``make model-shift`` runs it both ways
and keeps the current table in ``loadtest/reports/model/shift.txt``.

What it answers: the temperature that calibrates unseen sources against the one that calibrates seen ones,
and what the unseen sources' temperature would do to a block threshold. It trains and measures; it exports
nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models import train_split as ts
from models.calibrate import ece, fit_temperature, nll, softmax

QUESTIONS = ("payload", "client")
SIDES = ("own", "other")  # calibration rows from the training half's sources, rows of the other half


@dataclass(frozen=True)
class Cell:
    """One question's figures on one side at one temperature."""
    accuracy: float
    ece: float
    nll: float
    attacks_over: float | None = None  # payload only: attacks at P(attack) >= threshold
    benign_over: float | None = None   # payload only: benign rows at P(attack) >= threshold


@dataclass(frozen=True)
class Shift:
    """Temperatures fitted on each side, and every (question, side, temperature side) cell."""
    temperature: dict[tuple[str, str], float]          # (question, side fitted on) -> T
    cells: dict[tuple[str, str, str], Cell]              # (question, side measured, side whose T) -> figures
    rows: dict[str, int]
    threshold: float


def cell(logits: np.ndarray, labels: np.ndarray, t: float, question: str, threshold: float) -> Cell:
    p = softmax(logits, t)
    c = Cell(float((p.argmax(1) == labels).mean()), float(ece(p, labels)), nll(logits, labels, t))
    if question != "payload":
        return c
    attack = p[:, 1] >= threshold
    return Cell(c.accuracy, c.ece, c.nll, float(attack[labels == 1].mean()) if (labels == 1).any() else 0.0,
                float(attack[labels == 0].mean()) if (labels == 0).any() else 0.0)


def measure(logits: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]], threshold: float) -> Shift:
    """``logits[(question, side)] = (logits, labels)`` with unlabelled rows left out -> the fitted table."""
    temperature = {(q, s): fit_temperature(*logits[(q, s)]) for q in QUESTIONS for s in SIDES}
    cells = {(q, s, ts_): cell(*logits[(q, s)], temperature[(q, ts_)], q, threshold)
             for q in QUESTIONS for s in SIDES for ts_ in SIDES}
    rows = {s: len(logits[("payload", s)][1]) for s in SIDES}
    return Shift(temperature, cells, rows, threshold)


def labelled(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = labels >= 0
    return logits[keep], labels[keep]


def render(shift: Shift, title: str) -> str:
    pct = "{:.2%}".format
    lines = [title, f"rows: own sources {shift.rows['own']}, other sources {shift.rows['other']}; "
             f"block threshold P(attack) >= {shift.threshold}", ""]
    for q in QUESTIONS:
        lines.append(f"{q}: temperature fitted on own sources {shift.temperature[(q, 'own')]:.3f}, "
                     f"on other sources {shift.temperature[(q, 'other')]:.3f}")
        head = f"  {'measured on':<15}{'temperature':<14}{'accuracy':>10}{'ECE':>9}{'NLL':>9}"
        if q == "payload":
            head += f"{'attacks >= thr':>16}{'benign >= thr':>15}"
        lines.append(head)
        for s in SIDES:
            for t in SIDES:
                c = shift.cells[(q, s, t)]
                line = f"  {s + ' sources':<15}{'of ' + t:<14}{pct(c.accuracy):>10}{c.ece:>9.4f}{c.nll:>9.4f}"
                if c.attacks_over is not None and c.benign_over is not None:
                    line += f"{pct(c.attacks_over):>16}{pct(c.benign_over):>15}"
                lines.append(line)
        lines.append("")
    return "\n".join(lines)


def run(config: Path, train: Path, calib: Path, other: Path, threshold: float, log: Callable[[str], None] = print) -> Shift:
    cfg = ts.load_config(config)
    tr, val, _ = ts.training_sides(ts.read_jsonl(train)[0], cfg)
    net, _ = ts.train(cfg, tr, val, log)
    logits: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for side, path in (("own", calib), ("other", other)):
        e = ts.encode(ts.read_jsonl(path)[0])
        p, _, c = ts.predict(net, e)
        logits[("payload", side)] = labelled(p, e.payload)
        logits[("client", side)] = labelled(c, e.client)
    return measure(logits, threshold)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.shift", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, required=True, help="a two-question config (models/configs/clef-flash-2.yaml)")
    ap.add_argument("--train", type=Path, required=True, help="training rows from one half's sources")
    ap.add_argument("--calib", type=Path, required=True, help="calibration rows from the same half's sources")
    ap.add_argument("--other", type=Path, required=True, help="rows from the other half's sources")
    ap.add_argument("--threshold", type=float, default=0.95, help="the block threshold on P(attack) (default 0.95)")
    ap.add_argument("--title", default="", help="the table's first line")
    ap.add_argument("--report", type=Path, help="append the table to this file")
    args = ap.parse_args(argv)
    started = time.time()
    shift = run(args.config, args.train, args.calib, args.other, args.threshold,
                lambda msg: print(f"[{time.time() - started:7.1f}s] {msg}", flush=True))
    text = render(shift, args.title or f"trained on {args.train.name}; own sources {args.calib.name}, other sources {args.other.name}")
    print(text)
    if args.report:
        with args.report.open("a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
