"""Reproducible generation of generic zero-shot question answering data for clef.

A *state* is composed of one or two decisive sentences (each from a task family of
``models.clef.tasks``) among filler sentences, in random order, so that evidence can
sit anywhere. Each state gets questions about the tasks it shows:

- choice questions with a random subset of the family's options (gold always in,
  order shuffled), labels rendered in a random style (``sunny``, ``SUNNY``,
  ``W2_Sunny``, ``weather_sunny``) and criteria that are a paraphrase, the bare
  noun, or absent;
- bool questions whose criteria state one option ("is the weather rainy?") and are
  true for the gold option, false for a sibling option (a hard negative) or for an
  option of a task the state does not touch; or (40%) a broad statement about the
  family ("bad weather that keeps people indoors") true for a set of its options.

Task families are split by name, not by row: the calibration and validation split use
families the training split never sees, so the temperature is fitted under the same
zero-shot conditions the model is used in. Same seed, same rows, same sha256.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from models.clef.tasks import BOOL_TEMPLATES, CITIES, DAYS, FILLERS, GENERIC_FRAMES, GROUPS, NAMES, TASKS, Task

GENERATOR = "models.clef.data v3"
# families held out of training: the validation (early stopping) and calibration splits
HELD_OUT = ("sport", "season", "speed", "booking", "plant_health", "storm_warning", "loan_decision")


@dataclass(frozen=True)
class Row:
    """One (state, question, gold option index) example; bool gold is 0 for true, 1 for false."""

    state: str
    qtype: str
    criteria: str
    options: tuple[str, ...]
    label: int
    task: str

    def as_json(self) -> dict[str, object]:
        return {"state": self.state, "type": self.qtype, "criteria": self.criteria, "options": list(self.options),
                "label": self.label, "task": self.task}


@dataclass
class Dataset:
    """Generated rows per split, with the hash that the manifest records."""

    train: list[Row] = field(default_factory=list)
    val: list[Row] = field(default_factory=list)
    calib: list[Row] = field(default_factory=list)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for split in (self.train, self.val, self.calib):
            for row in split:
                h.update(json.dumps(row.as_json(), sort_keys=True).encode())
                h.update(b"\n")
        return h.hexdigest()

    @property
    def rows(self) -> int:
        return len(self.train) + len(self.val) + len(self.calib)


def _fill(rng: random.Random, template: str) -> str:
    return template.format(name=rng.choice(NAMES), city=rng.choice(CITIES), day=rng.choice(DAYS), num=rng.randint(2, 999), x="{x}")


def _sentence(rng: random.Random, task: Task, option: str) -> str:
    clause = _fill(rng, rng.choice(task.options[option]))
    frame = _fill(rng, rng.choice(task.frames + GENERIC_FRAMES[:3]))
    text = frame.replace("{x}", clause)
    return text[0].upper() + text[1:]


def _label_style(rng: random.Random, task: Task) -> tuple[str, ...]:
    """How this question spells its options (one style for all its options)."""
    names = list(task.options)
    style = rng.random()
    letter = task.noun[0].upper()
    if style < 0.35:
        return tuple(names)
    if style < 0.5:
        return tuple(n.title() for n in names)
    if style < 0.62:
        return tuple(n.upper().replace(" ", "_") for n in names)
    if style < 0.8:
        # ordinal codes keep the family's order (like P0..P3); nominal ones are arbitrary tags
        order = range(len(names)) if task.ordinal else rng.sample(range(len(names)), len(names))
        return tuple(f"{letter}{i}_{n.title().replace(' ', '')}" for i, n in zip(order, names, strict=True))
    if style < 0.9:
        return tuple(f"{task.noun.replace(' ', '_')}_{n.replace(' ', '_')}" for n in names)
    return tuple(n.replace(" ", "-") for n in names)


def _choice(rng: random.Random, state: str, task: Task, gold: str) -> Row:
    names = list(task.options)
    rendered = dict(zip(names, _label_style(rng, task), strict=True))
    k = rng.randint(2, len(names))
    chosen = [gold, *rng.sample([n for n in names if n != gold], k - 1)]
    if task.ordinal and rng.random() < 0.5:
        chosen.sort(key=names.index)
    else:
        rng.shuffle(chosen)
    r = rng.random()
    criteria = rng.choice(task.criteria) if r < 0.7 else (task.noun if r < 0.85 else "")
    return Row(state, "choice", criteria, tuple(rendered[n] for n in chosen), chosen.index(gold), task.name)


def _bool(rng: random.Random, state: str, task: Task, gold: str, absent: Sequence[Task]) -> Row:
    groups = GROUPS.get(task.name, ())
    if groups and rng.random() < 0.4:
        criteria, members = rng.choice(groups)
        return Row(state, "bool", criteria, (), 0 if gold in members else 1, task.name)
    truth = rng.random() < 0.5
    if truth:
        target_task, opt = task, gold
    elif rng.random() < 0.7:
        target_task, opt = task, rng.choice([n for n in task.options if n != gold])
    else:
        target_task = rng.choice(absent)
        opt = rng.choice(list(target_task.options))
    criteria = rng.choice(BOOL_TEMPLATES).format(noun=target_task.noun, opt=opt)
    return Row(state, "bool", criteria, (), 0 if truth else 1, task.name)


def _state(rng: random.Random, tasks: Sequence[Task]) -> tuple[str, list[tuple[Task, str]]]:
    picked = rng.sample(list(tasks), 2 if rng.random() < 0.35 else 1)
    shown = [(t, rng.choice(list(t.options))) for t in picked]
    sentences = [_sentence(rng, t, o) for t, o in shown]
    r = rng.random()
    fillers = 0 if r < 0.4 else 1 if r < 0.7 else rng.randint(2, 3) if r < 0.9 else rng.randint(4, 7)
    sentences += [_fill(rng, rng.choice(FILLERS)) for _ in range(fillers)]
    rng.shuffle(sentences)
    return (" " if rng.random() < 0.7 else "\n").join(sentences), shown


def generate_rows(rng: random.Random, tasks: Sequence[Task], states: int, all_tasks: Sequence[Task]) -> list[Row]:
    """``states`` states over ``tasks``, each with one choice and (60%) one bool question per shown task."""
    rows: list[Row] = []
    for _ in range(states):
        state, shown = _state(rng, tasks)
        names = {t.name for t, _ in shown}
        absent = [t for t in all_tasks if t.name not in names]
        for task, gold in shown:
            rows.append(_choice(rng, state, task, gold))
            if rng.random() < 0.6:
                rows.append(_bool(rng, state, task, gold, absent))
    return rows


def generate(states: int = 9000, seed: int = 1234, held_out: Iterable[str] = HELD_OUT) -> Dataset:
    """The full dataset: ``states`` training states, and a tenth as many for each held-out split."""
    held = set(held_out)
    train_tasks = [t for t in TASKS if t.name not in held]
    eval_tasks = [t for t in TASKS if t.name in held]
    rng = random.Random(seed)
    ds = Dataset()
    ds.train = generate_rows(rng, train_tasks, states, train_tasks)
    # held-out rows may mention training families as the second task or bool negatives;
    # what matters is that the questions asked are about families never trained on
    held_rows = [r for r in generate_rows(rng, eval_tasks + train_tasks, max(states // 2, 40), TASKS) if r.task in held]
    half = len(held_rows) // 2
    ds.val, ds.calib = held_rows[:half], held_rows[half:]
    return ds
