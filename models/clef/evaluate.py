"""Run the zero-shot suite (``models/zeroshot``) on a shipped clef and on the keyword baseline.

``python -m models.clef.evaluate --model models/repository/clef/1`` prints accuracy, ECE
(15 bins) and Brier per task for both, and with ``--write-manifest`` records them in the
model's manifest (``metrics.suite``). The suite's tasks and wording are disjoint from the
training data; the baseline is fitted on clef's generated calibration split.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from gateway.clef import Question, QuestionSet, ZeroShotModel
from models.clef import calibration
from models.clef.baseline import KeywordBaseline
from models.clef.data import generate

SUITE = Path(__file__).resolve().parents[1] / "zeroshot"


@dataclass(frozen=True)
class SuiteTask:
    """One labelled task of the suite: a question and (state, gold option index) examples."""

    name: str
    question: Question
    examples: tuple[tuple[str, int], ...]


def load_suite(folder: Path = SUITE) -> list[SuiteTask]:
    tasks = []
    for path in sorted(folder.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        q = doc["question"]
        question = Question(id=q["id"], options=tuple(q.get("options") or ()), criteria=q.get("criteria", ""), type=q.get("type", "choice"))
        examples = []
        for ex in doc["examples"]:
            if question.type == "bool":
                gold = 0 if ex["label"] is True else 1
            else:
                gold = question.options.index(ex["label"])
            examples.append((str(ex["state"]), gold))
        tasks.append(SuiteTask(doc["task"], question, tuple(examples)))
    return tasks


def clef_probabilities(model: ZeroShotModel, task: SuiteTask, batch: int = 16) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for lo in range(0, len(task.examples), batch):
        items = [QuestionSet(state, (task.question,)) for state, _ in task.examples[lo:lo + batch]]
        for answers in model.answer(items):
            probs = answers[0].probabilities
            keys = ("true", "false") if task.question.type == "bool" else task.question.options
            out.append(np.array([probs[k] for k in keys]))
    return out


def fitted_baseline(seed: int = 1234, states: int = 9000) -> KeywordBaseline:
    data = generate(states=states, seed=seed)
    items = [(r.state, Question(id="q", options=r.options, criteria=r.criteria or "q", type=r.qtype), r.label) for r in data.calib]  # type: ignore[arg-type]
    return KeywordBaseline().fit(items)


def run(model: ZeroShotModel, tasks: Sequence[SuiteTask], baseline: KeywordBaseline,
        png: Path | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """Per-task and overall accuracy/ECE/Brier of clef and the baseline; optionally a reliability diagram."""
    results: dict[str, dict[str, dict[str, float]]] = {}
    pooled: dict[str, tuple[list[np.ndarray], list[int]]] = {"clef": ([], []), "keyword": ([], [])}
    for task in tasks:
        labels = [y for _, y in task.examples]
        clef_probs = clef_probabilities(model, task)
        base_probs = [baseline.probabilities(s, task.question) for s, _ in task.examples]
        results[task.name] = {"clef": calibration.summary(clef_probs, labels), "keyword": calibration.summary(base_probs, labels)}
        for who, probs in (("clef", clef_probs), ("keyword", base_probs)):
            pooled[who][0].extend(probs)
            pooled[who][1].extend(labels)
    if png is not None:
        calibration.reliability_png(png, {who: calibration.confidences(p, y) for who, (p, y) in pooled.items()},
                                    "zero-shot suite (all tasks)")
    per_task = list(results.values())
    overall: dict[str, dict[str, float]] = {}
    for who in ("clef", "keyword"):
        n = sum(r[who]["n"] for r in per_task)
        overall[who] = {key: sum(r[who][key] * r[who]["n"] for r in per_task) / n for key in ("accuracy", "ece", "brier")}
        overall[who]["n"] = n
    results["all"] = overall
    return results


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| task | n | clef accuracy | clef ECE | clef Brier | keyword accuracy | keyword ECE | keyword Brier |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        c, k = r["clef"], r["keyword"]
        label = "**all (weighted by n)**" if name == "all" else name
        lines.append(f"| {label} | {int(c['n'])} | {c['accuracy']:.3f} | {c['ece']:.3f} | {c['brier']:.3f} | "
                     f"{k['accuracy']:.3f} | {k['ece']:.3f} | {k['brier']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.clef.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="a clef model folder (manifest.json inside)")
    ap.add_argument("--precision", default=None, help="int8 (default on CPU) or fp32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--write-manifest", action="store_true",
                    help="record the results in the model's manifest and draw suite_reliability.png beside it")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = ap.parse_args(argv)
    model = ZeroShotModel.load(args.model, device="cpu", precision=args.precision, threads=args.threads)
    png = args.model / "suite_reliability.png" if args.write_manifest else None
    results = run(model, load_suite(), fitted_baseline(), png)
    print(json.dumps(results, indent=2) if args.json else f"clef {model.version} ({model.precision}) vs keyword baseline\n\n"
          + table(results))
    if args.write_manifest:
        path = args.model / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest.setdefault("metrics", {})["suite"] = {"precision": model.precision, "results": results}
        path.write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
