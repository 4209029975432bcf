"""``clefgate eval``: how rules, the model and the policy treat labelled requests.

    clefgate eval --data requests.jsonl [--json] [--config clefgate.yaml]
    clefgate eval --data a.jsonl --data b.jsonl --config x.yaml --config y.yaml --model-version 1.7.0 --model-version 1.5.0

With several ``--data``, ``--config`` or ``--model-version`` it compares: every setup
(each config, with each model version in it) on every file, in one run, side by side,
each figure with its difference from the first setup in points, and the sources of the
people each setup blocks (``render_comparison``).

Reads one request per line — ``{"method", "path" (with query), "http_version",
"headers": [[name, value], …], "body", "client_ip", "label"}`` (``attack_kind``,
``verified``, ``client`` and ``source`` are used when present; decision-log lines
with a ``label`` work too) — scores every row with the model in batches first, and
then decides each one three ways, in one run, with the pipeline ``clefgate serve``
would compile from the config (``gateway.pipeline.build``: the same stages in the
same order), its model stage answering from the batch (:class:`PrecomputedStage`):

- **rules + model**: ``Pipeline.decide``: the rule table, then the payload detectors
  (``gateway.payload``, counted with the rules' decisions), then ``rules.default``;
  what they leave to the model (a ``score`` rule, or ``rules.default: score``) is
  scored and turned into an action by the configured policy, a fallback rule
  corroborating a block where ``policy.block_attack_corroborated`` says so;
- **model alone**: the model stage alone: every request scored and decided by the
  policy (under its route's named policy), no rules;
- **rules only**: the gateway when the model cannot answer: what a stage before the
  model decided stands, and the same pipeline's model stage, asked the same question
  with the model unavailable, lets the fallback rules (``rules.fallback_files``, the
  injection signatures in the shipped config) decide, the rest forwarded (the
  ``rules-only`` fallback, whatever ``decider.fallback`` says).

The counts by stage (the rules, the default and the payload detectors that decided,
which of the policy's blocks stopped what the model scored, the fallback rules that
corroborated one) are read off the verdicts. Rows are independent: no observer is told
how a row ended, so no client's window or history (and no block it would earn) carries
from one row to the next (a rate-limit rule counts each row once against its client's
limit); the pipeline runs with an eval-only challenge key (no pass cookie in the data
is valid) and its client state in the process (no Redis).

For shadow-mode or partial-rollout policies the action that *would* be enforced is
counted, and the model is evaluated even when ``model.enabled`` is false (the report
says so): the question is what turning it on would do. Labels are the model's ``class`` options: human, good_bot, bad_bot, attack.
The right action is forward for humans and good bots, challenge or block for bad bots,
block for attacks; "accuracy" is the share of requests that got the right action.
ECE (15 bins) and Brier are the model's ``class`` probabilities against the labels.
People are also counted by the browser family their user agent names (:func:`browser_family`: Chrome, Edge,
Opera, Samsung Internet, Firefox, Safari on macOS and on iOS or iPadOS, other), each family's share blocked and
challenged beside Chrome's: a family that a person's browser is judged by must not cost its people more.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import secrets
import sys
from collections import Counter
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gateway import config as config_mod
from gateway import features as feat
from gateway.clients import user_agent_family
from gateway.features.split import CLIENT_NUMERIC_NAMES
from gateway.policy import NO_SYNTAX, SYNTAXLESS, UNFAMILIAR
from gateway.rdns import without_lookups
from gateway.verdict import Action, Probabilities, ScoreRequest, Source, Verdict, attack_probability, class_probabilities

if TYPE_CHECKING:
    from gateway.policy import Policy

CLASSES = ("human", "good_bot", "bad_bot", "attack")
ACTIONS = (Action.FORWARD, Action.CHALLENGE, Action.BLOCK)
SYSTEMS = ("rules_model", "model", "rules_only")
SYSTEM_TITLES = {"rules_model": "rules+model", "model": "model alone", "rules_only": "rules only"}
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "default.yaml"
ECE_BINS = 15
# The targets of the issue that introduced the model (fractions); reported, not enforced.
TARGETS = {"humans_blocked": ("<=", 0.001), "humans_challenged": ("<=", 0.01), "attacks_blocked": (">=", 0.98),
           "bad_bots_stopped": (">=", 0.95), "verified_good_bots_passed": (">=", 0.99), "ece": ("<=", 0.03)}
_ALIASES = {"bot": "bad_bot", "badbot": "bad_bot", "bad-bot": "bad_bot", "goodbot": "good_bot", "good-bot": "good_bot",
            "benign": "human", "malicious": "attack"}
_KINDS = ("sqli", "xss", "traversal", "cmdi", "probe", "other")


class EvalError(Exception):
    """The data or the setup cannot be evaluated (message says what to fix)."""


@dataclass
class Row:
    """One labelled request."""

    features: feat.Features
    label: int
    verified: bool | None
    source: str
    attack_kind: str | None
    logged_input: feat.ModelInput | None = None


@dataclass
class Skipped:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, why: str) -> None:
        self.counts[why] = self.counts.get(why, 0) + 1


def _label(raw: Any) -> tuple[str, str | None] | None:
    if not isinstance(raw, str):
        return None
    text = raw.strip().lower()
    kind = None
    if ":" in text:
        text, kind = text.split(":", 1)
    if text in _KINDS:
        return "attack", text
    text = _ALIASES.get(text, text)
    return (text, kind) if text in CLASSES else None


def read_rows(path: Path, skipped: Skipped, limit: int | None = None) -> list[Row]:
    """Labelled rows of a JSONL file (unlabelled or malformed lines are skipped and counted)."""
    rows: list[Row] = []
    try:
        fh = path.open(encoding="utf-8", errors="surrogateescape")  # a line that is not UTF-8 is skipped, not fatal
    except OSError as exc:
        raise EvalError(f"{path}: cannot read ({exc.strerror})") from exc
    with fh:
        for line in fh:
            if not line.strip():
                continue
            if not line.isascii():
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:
                    skipped.add("not UTF-8")
                    continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, a number past Python's digit limit, or nested too deep
                skipped.add("invalid JSON")
                continue
            if not isinstance(obj, dict):
                skipped.add("not a JSON object")
                continue
            rec = obj["record"] if isinstance(obj.get("record"), dict) else obj
            label = _label(obj.get("label", rec.get("label")))
            if label is None:
                skipped.add("no label (human, good_bot, bad_bot, attack)")
                continue
            if not rec.get("method") or not rec.get("path"):
                skipped.add("no method or path")
                continue
            try:
                f = feat.from_record(rec)
                logged = feat.ModelInput.from_json(obj["input"]) if isinstance(obj.get("input"), dict) else None
            except (TypeError, ValueError) as exc:
                skipped.add(f"unreadable record ({type(exc).__name__})")
                continue
            verified = obj.get("verified", rec.get("verified"))
            rows.append(Row(f, CLASSES.index(label[0]), verified if isinstance(verified, bool) else None,
                            str(obj.get("source", rec.get("source", "")) or ""), label[1] or rec.get("attack_kind"), logged))
            if limit is not None and len(rows) >= limit:
                break
    if not rows:
        raise EvalError(f"{path}: no labelled requests (each line needs a label: human, good_bot, bad_bot or attack)")
    return rows


# ---------------------------------------------------------------------------- metrics

def _softmax_ece(probs: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(ECE with 15 equal-width bins of top-option confidence, multi-class Brier)."""
    if len(labels) == 0:
        return 0.0, 0.0
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    bins = np.clip(np.ceil(conf * ECE_BINS).astype(int) - 1, 0, ECE_BINS - 1)
    ece = 0.0
    for b in range(ECE_BINS):
        sel = bins == b
        if sel.any():
            ece += sel.mean() * abs(float(correct[sel].mean()) - float(conf[sel].mean()))
    onehot = np.eye(probs.shape[1])[labels]
    brier = float(np.mean(np.sum((probs - onehot) ** 2, axis=1)))
    return float(ece), brier


def _rate(mask: np.ndarray, sel: np.ndarray) -> float | None:
    return round(float(mask[sel].mean()), 6) if sel.any() else None


def system_metrics(actions: np.ndarray, labels: np.ndarray, verified: np.ndarray) -> dict[str, Any]:
    """Outcome rates, decision accuracy and the label x action matrix of one system."""
    fwd, chal, blk = (actions == i for i in range(3))
    is_ = {c: labels == i for i, c in enumerate(CLASSES)}
    right = np.where(is_["attack"], blk, np.where(is_["bad_bot"], chal | blk, fwd))
    matrix = {c: {a.value: int(((labels == i) & (actions == j)).sum()) for j, a in enumerate(ACTIONS)} for i, c in enumerate(CLASSES)}
    per_action = {}
    for j, a in enumerate(ACTIONS):
        taken = actions == j
        wanted = {0: ~(is_["attack"] | is_["bad_bot"]), 1: is_["bad_bot"], 2: is_["attack"] | is_["bad_bot"]}[j]
        per_action[a.value] = {"count": int(taken.sum()), "precision": _rate(wanted, taken)}
    return {
        "humans_blocked": _rate(blk, is_["human"]), "humans_challenged": _rate(chal, is_["human"]),
        "attacks_blocked": _rate(blk, is_["attack"]), "bad_bots_stopped": _rate(chal | blk, is_["bad_bot"]),
        "good_bots_passed": _rate(fwd, is_["good_bot"]), "verified_good_bots_passed": _rate(fwd, is_["good_bot"] & verified),
        "accuracy": round(float(right.mean()), 6) if len(right) else None,
        "per_class": {c: {"right_action": _rate(right, is_[c]), "support": int(is_[c].sum())} for c in CLASSES},
        "per_action": per_action, "matrix": matrix,
    }


def class_metrics(probs: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Per-class precision/recall and the confusion matrix of the model's ``class`` answer."""
    pred = probs.argmax(axis=1)
    k = len(CLASSES)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (labels, pred), 1)
    per = {}
    for i, c in enumerate(CLASSES):
        tp = int(confusion[i, i])
        per[c] = {"precision": round(tp / max(1, int(confusion[:, i].sum())), 6), "recall": round(tp / max(1, int(confusion[i].sum())), 6),
                  "support": int(confusion[i].sum())}
    ece, brier = _softmax_ece(probs, labels)
    return {"accuracy": round(float((pred == labels).mean()), 6), "per_class": per,
            "confusion": {c: dict(zip(CLASSES, map(int, confusion[i]), strict=True)) for i, c in enumerate(CLASSES)},
            "ece": round(ece, 6), "brier": round(brier, 6)}


# ---------------------------------------------------------------------------- setup

def load_config(path: Path | None) -> config_mod.Config:
    """The gateway config to evaluate (backends are not needed: a placeholder fills them)."""
    source = path or DEFAULT_CONFIG
    raw = config_mod.read_yaml(str(source)) or {}
    if not isinstance(raw, dict):
        raise config_mod.ConfigError(["<top>: expected a map"], str(source))
    if not raw.get("backends"):
        raw = {**raw, "backends": {"eval": {"servers": ["http://127.0.0.1:9"]}}, "default_backend": "eval"}
    return config_mod.validate(raw, str(source))


def _effective(verdict: Verdict) -> int:
    action = verdict.shadow_action or verdict.action
    return ACTIONS.index(action)


class PrecomputedStage:
    """The model stage eval builds its pipeline with: each row's probabilities, scored for every row in one batch
    beforehand, made a verdict by the pipeline's policy (the ``ScoreStage`` that ``Decider.stage`` is in serve).

    ``probabilities`` is the current row's; with None it answers as a model that cannot (the ``rules-only``
    fallback: forwarded, unless a fallback rule decides). ``answered`` is the last question it answered with
    them (the features, with the client's window, and the request under its route's policy) and its answer;
    None while it has not been asked about the current row.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.probabilities: Probabilities | None = None
        self.answered: tuple[feat.Features, ScoreRequest, Verdict] | None = None

    def row(self, probabilities: Probabilities | None) -> None:
        """Answer the next questions with ``probabilities`` (None: unavailable), forgetting the last row's."""
        self.probabilities, self.answered = probabilities, None

    async def decide(self, features: feat.Features, request: ScoreRequest) -> Verdict:
        if self.probabilities is None:
            return self.policy.fallback_verdict(features, request, "rules-only")
        verdict = self.policy.verdict(features, self.probabilities, request)
        self.answered = (features, request, verdict)
        return verdict


def _settled(outcome: Verdict | Awaitable[Verdict] | ScoreRequest | None) -> Verdict:
    """The verdict a pipeline (or its model stage) answered: eval's model stage never waits, so an awaitable ends at its first step."""
    if isinstance(outcome, Verdict):
        return outcome
    if outcome is None or isinstance(outcome, ScoreRequest):
        raise RuntimeError(f"a deciding stage answered {outcome!r}, not a verdict")
    steps = outcome.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    steps.close()
    raise RuntimeError("the pipeline waited for something other than eval's model stage")


def offline(cfg: config_mod.Config) -> config_mod.Config:
    """``cfg`` as eval compiles it: client state kept in this process (no Redis), and a challenge key of eval's own.

    Eval answers no challenge, so it needs none of the servers' keys (a config whose keys live in their
    environment evaluates as it is), and under a key no client ever held no pass cookie in the data is
    valid: every row is decided as a client without a pass. Nothing is looked up in DNS (``rdns.without_lookups``): the data holds no
    answer for the rows' addresses, which count as answered with no name.
    """
    key = config_mod.ChallengeKeyConfig(id="eval", secret=secrets.token_urlsafe(48))
    return dataclasses.replace(without_lookups(cfg), redis=config_mod.RedisConfig(),
                               challenge=dataclasses.replace(cfg.challenge, keys=[key], dev_generate_secret=False))


def evaluate(rows: Sequence[Row], cfg: config_mod.Config, scorer: Any) -> dict[str, Any]:
    """Decide every row three ways and measure each (see the module docstring)."""
    from gateway.decider import policy_notes
    from gateway.pipeline import build

    # the pipeline serve would compile from cfg, its model stage answering from the batch below; no observer is
    # told how a row ended, so no client's window or history carries from one row to the next
    pipeline = build(offline(cfg), PrecomputedStage)
    stage, model, policy = pipeline.scorer, pipeline.stage("model"), pipeline.policy
    assert isinstance(stage, PrecomputedStage) and policy is not None

    version = getattr(scorer, "feature_version", feat.V1_VERSION)
    # a logged input is reused when the scorer reads its feature version; any other row is featurized for the scorer
    logged = [r.logged_input if r.logged_input is not None and r.logged_input.version == version else None for r in rows]
    fresh = iter(feat.featurize_batch([r.features for r, li in zip(rows, logged, strict=True) if li is None], version))
    inputs = [li if li is not None else next(fresh) for li in logged]
    probs_rows: list[Mapping[str, Mapping[str, float]]] = []
    for lo in range(0, len(inputs), 256):
        probs_rows += scorer.run_inputs(inputs[lo:lo + 256])
    labels = np.array([r.label for r in rows], dtype=np.int64)
    verified = np.array([bool(r.verified) if r.verified is not None else r.label == 1 for r in rows])
    cls = np.array([[class_probabilities(p)[c] for c in CLASSES] for p in probs_rows], dtype=np.float64)
    actions = {s: np.zeros(len(rows), dtype=np.int64) for s in SYSTEMS}
    decided_by_rule = np.zeros(len(rows), dtype=bool)
    # what decided, read off the verdicts: the rule (or the default, or a detector) before the model, and the payload
    # detectors' hits by detector/kind; which of the policy's blocks stopped what the model scored, and the fallback
    # rules that corroborated a model verdict short of a block (rules + model)
    rule_hits: dict[str, int] = {}
    payload_hits: dict[str, int] = {}
    policy_blocks = {"p_attack": 0, "combined_risk": 0}
    held_back = {"unfamiliar": 0, "no_syntax": 0}
    # by label: what the model scored whose P(attack) the policy did not count, no value holding the syntax of any attack
    syntaxless = dict.fromkeys(CLASSES, 0)
    corroborating: dict[str, int] = {}
    block = ACTIONS.index(Action.BLOCK)
    for i, (row, probs) in enumerate(zip(rows, probs_rows, strict=True)):
        f = row.features
        stage.row(probs)
        verdict = _settled(pipeline.decide(f))  # rules + model
        answered = stage.answered
        actions["rules_model"][i] = _effective(verdict)
        actions["model"][i] = _effective(_settled(stage.decide(f, pipeline.routed(f, ScoreRequest()))))  # the model stage alone
        if answered is None:
            # a stage before the model decided, as it would with the model unavailable
            decided_by_rule[i] = True
            actions["rules_only"][i] = actions["rules_model"][i]
            rule_hits[verdict.rule or verdict.source.value] = rule_hits.get(verdict.rule or verdict.source.value, 0) + 1
            if verdict.payload and verdict.rule is None:  # before the model, only the payload detectors' blocks name a payload
                key = f"{verdict.payload[0].detector}/{verdict.payload[0].kind}"
                payload_hits[key] = payload_hits.get(key, 0) + 1
            continue
        # rules only: the same pipeline's model stage, asked the same question with the model unavailable
        asked, request, said = answered
        stage.row(None)
        actions["rules_only"][i] = _effective(_settled(model.run(asked, request)))
        if request.challenge is not None and verdict.action is not Action.BLOCK:
            # a rule challenged it and its payload was scored (rules.score_challenged): short of a block, the rule decided
            decided_by_rule[i] = True
            rule_hits[verdict.rule or "?"] = rule_hits.get(verdict.rule or "?", 0) + 1
            continue
        if said.source is Source.MODEL and SYNTAXLESS in said.reason:
            syntaxless[CLASSES[row.label]] += 1
        if verdict is not said:
            # changed after the model answered: in eval only a corroborating fallback rule does that (no pass
            # cookie is valid under eval's key, and no client earns a block without observers feeding its history)
            corroborating[verdict.rule or "?"] = corroborating.get(verdict.rule or "?", 0) + 1
        elif actions["rules_model"][i] == block:
            policy_blocks["p_attack" if attack_probability(probs) >= policy.thresholds(said.policy).block_attack else "combined_risk"] += 1
        elif said.source is Source.MODEL and said.action is Action.CHALLENGE:
            # a block on P(attack) alone the policy held back: the payload unfamiliar to the model, or no value's syntax
            for why, words in (("unfamiliar", UNFAMILIAR), ("no_syntax", NO_SYNTAX)):
                if words in said.reason:
                    held_back[why] += 1
    ece, brier = _softmax_ece(cls, labels)
    scored = ~decided_by_rule
    ece_scored, brier_scored = _softmax_ece(cls[scored], labels[scored])
    systems = {s: system_metrics(actions[s], labels, verified) for s in SYSTEMS}
    for s in SYSTEMS:
        systems[s]["ece"] = round(ece, 6) if s != "rules_only" else None
        systems[s]["brier"] = round(brier, 6) if s != "rules_only" else None
    systems["rules_model"]["decided_by_rules"] = int(decided_by_rule.sum())
    systems["rules_model"]["scored_by_model"] = int(scored.sum())
    systems["rules_model"]["ece_scored"] = round(ece_scored, 6)
    systems["rules_model"]["brier_scored"] = round(brier_scored, 6)
    kinds = [(r.attack_kind, p["attack_kind"]) for r, p in zip(rows, probs_rows, strict=True)
             if r.label == 3 and r.attack_kind in _KINDS and "attack_kind" in p]
    kind_acc = (round(sum(1 for k, p in kinds if max(p, key=lambda o: p[o]) == k) / len(kinds), 6) if kinds else None)
    main = systems["rules_model"]
    # what the gateway knew of the client: a first request (no window, or an empty one) versus one with history
    # (a decision-log row carries the client's window only inside the logged model input)
    requests_at = feat.NUMERIC_NAMES.index("client_requests")
    client_requests_at = CLIENT_NUMERIC_NAMES.index("client_requests")

    def had_history(r: Row) -> bool:
        li = r.logged_input
        if li is None:
            return bool(r.features.client and r.features.client.requests)
        return bool(li.client_numeric[client_requests_at] if li.version != feat.V1_VERSION else li.numeric[requests_at])

    history = np.array([had_history(r) for r in rows])
    contexts = {name: {"n": int(sel.sum()), **{k: v for k, v in system_metrics(actions["rules_model"][sel], labels[sel], verified[sel]).items()
                                             if k in CONTEXT_KEYS}}
                for name, sel in (("first_request", ~history), ("with_history", history))}
    out: dict[str, Any] = {
        "n": len(rows),
        **{k: main[k] for k in ("humans_blocked", "humans_challenged", "attacks_blocked", "bad_bots_stopped", "good_bots_passed",
                                "verified_good_bots_passed", "accuracy")},
        "ece": round(ece, 6), "brier": round(brier, 6),
        "labels": {c: int((labels == i).sum()) for i, c in enumerate(CLASSES)},
        "model": getattr(scorer, "label", "?"), "provider": getattr(scorer, "provider", "?"), "precision": getattr(scorer, "precision", "?"),
        "policy": policy.describe(), "rules": list(cfg.rules.files), "model_enabled": cfg.model.enabled, "systems": systems,
        "policy_notes": list(policy_notes(scorer.manifest, cfg.policy)) if hasattr(scorer, "manifest") else [],
        "model_class": class_metrics(cls, labels), "attack_kind_accuracy": kind_acc,
        "rule_hits": dict(sorted(rule_hits.items(), key=lambda kv: -kv[1])),
        "payload_hits": dict(sorted(payload_hits.items(), key=lambda kv: -kv[1])),
        "policy_blocks": {**policy_blocks, "corroborated": sum(corroborating.values()), "held_back": held_back,
                          "syntaxless": syntaxless,
                          "corroborating_rules": dict(sorted(corroborating.items(), key=lambda kv: -kv[1]))},
        "errors_by_source": _errors_by_source(rows, actions["rules_model"]),
        "humans_blocked_by_source": _blocked_people(rows, actions["rules_model"]),
        "people_by_family": people_by_family(rows, actions["rules_model"]),
        "by_client_context": contexts,
    }
    out["targets"] = {k: {"op": op, "target": t, "value": out.get(k) if k != "verified_good_bots_passed" else main[k],
                          "met": _met(out.get(k) if k != "verified_good_bots_passed" else main[k], op, t)}
                      for k, (op, t) in TARGETS.items()}
    return out


def _met(value: float | None, op: str, target: float) -> bool | None:
    if value is None:
        return None
    return value <= target if op == "<=" else value >= target


def _errors_by_source(rows: Sequence[Row], actions: np.ndarray, top: int = 12) -> list[dict[str, Any]]:
    """Where rules + model got the action wrong, grouped by the rows' ``source`` (when the data has one)."""
    wrong: dict[str, list[int]] = {}
    for row, a in zip(rows, actions, strict=True):
        if not row.source:
            continue
        ok = a == 2 if row.label == 3 else (a >= 1 if row.label == 2 else a == 0)
        key = "/".join(row.source.split("/")[:3])
        stats = wrong.setdefault(key, [0, 0])
        stats[1] += 1
        stats[0] += 0 if ok else 1
    ranked = sorted(((k, v) for k, v in wrong.items() if v[0]), key=lambda kv: -kv[1][0])[:top]
    return [{"source": k, "wrong": v[0], "of": v[1]} for k, v in ranked]


# ---------------------------------------------------------------------------- report

CONTEXT_ROWS = (("humans blocked", "humans_blocked"), ("humans challenged", "humans_challenged"),
                ("attacks blocked", "attacks_blocked"), ("bad bots challenged or blocked", "bad_bots_stopped"))
CONTEXT_KEYS = frozenset(key for _, key in CONTEXT_ROWS)
CONTEXT_TITLES = {"first_request": "first request", "with_history": "client with history"}


FAMILIES = ("chrome", "edge", "opera", "samsung", "firefox", "safari-mac", "safari-ios", "other")
_IOS = ("iPhone", "iPad", "iPod")


def browser_family(user_agent: str) -> str:
    """The browser family a person's user agent names (one of ``FAMILIES``): Safari split by platform, iOS against macOS
    (an iPad asking for desktop sites names a Mac and counts as one); Chrome and Firefox on iOS are WebKit but name
    themselves (CriOS, FxiOS) and count as theirs, as an Android web view naming Chrome counts as Chrome."""
    name = user_agent_family(user_agent).split(" ", 1)[0]
    if name == "safari":
        return "safari-ios" if any(device in user_agent for device in _IOS) else "safari-mac"
    return name if name in FAMILIES else "other"


def people_by_family(rows: Sequence[Row], actions: np.ndarray) -> dict[str, dict[str, float | int]]:
    """For each browser family with people (label human) among the rows: how many, the share blocked and challenged."""
    counts: dict[str, list[int]] = {}
    for row, action in zip(rows, actions, strict=True):
        if row.label != 0:
            continue
        c = counts.setdefault(browser_family(row.features.user_agent), [0, 0, 0])  # people, challenged, blocked
        c[0] += 1
        if action:  # ACTIONS: forward, challenge, block
            c[action] += 1
    out: dict[str, dict[str, float | int]] = {}
    for fam in FAMILIES:
        if fam in counts:
            n, challenged, blocked = counts[fam]
            out[fam] = {"n": n, "challenged": round(challenged / n, 6), "blocked": round(blocked / n, 6)}
    return out


def _blocked_people(rows: Sequence[Row], actions: np.ndarray, top: int = 8) -> dict[str, int]:
    """The sources of the people (label human) rules + model blocked, most first: what a people-blocked figure is made of."""
    block = ACTIONS.index(Action.BLOCK)
    counts = Counter(row.source or "?" for row, action in zip(rows, actions, strict=True) if row.label == 0 and action == block)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top])


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def render(result: Mapping[str, Any], data: str) -> str:
    """The human-readable report."""
    s = result["systems"]
    lines = [f"clefgate eval: {result['n']} labelled requests from {data} "
             f"({', '.join(f'{k} {v}' for k, v in result['labels'].items())})",
             f"model {result['model']} on {result['provider']} ({result['precision']}); {result['policy']}",
             f"rules: {', '.join(result['rules']) or 'none'}; rules decided {s['rules_model']['decided_by_rules']}, "
             f"the model scored {s['rules_model']['scored_by_model']}"]
    if not result.get("model_enabled", True):
        lines.append("note: model.enabled is false in this config; 'rules+model' shows what turning it on would do")
    lines += [f"note: {n}" for n in result.get("policy_notes", [])]
    lines.append("")
    header = f"{'':32}" + "".join(f"{SYSTEM_TITLES[x]:>14}" for x in SYSTEMS) + f"{'target':>12}"
    lines += [header, "-" * len(header)]
    rows = [("humans blocked", "humans_blocked", _pct), ("humans challenged", "humans_challenged", _pct),
            ("attacks blocked", "attacks_blocked", _pct), ("bad bots challenged or blocked", "bad_bots_stopped", _pct),
            ("good bots passed", "good_bots_passed", _pct), ("verified good bots passed", "verified_good_bots_passed", _pct),
            ("right action (accuracy)", "accuracy", _pct), ("ECE (class, 15 bins)", "ece", _num), ("Brier (class)", "brier", _num)]
    for title, key, fmt in rows:
        target = TARGETS.get(key)
        tgt = f"{target[0]} {fmt(target[1])}" if target else ""
        lines.append(f"{title:32}" + "".join(f"{fmt(s[x][key]):>14}" for x in SYSTEMS) + f"{tgt:>12}")
    mc = result["model_class"]
    lines += ["", f"model alone, class question: accuracy {_pct(mc['accuracy'])}, ECE {_num(mc['ece'])}, Brier {_num(mc['brier'])}"
              + (f"; attack_kind accuracy on attacks {_pct(result['attack_kind_accuracy'])}" if result["attack_kind_accuracy"] is not None else ""),
              f"{'':12}{'precision':>11}{'recall':>9}{'support':>9}   confusion (rows: label, columns: predicted)",
              f"{'':41}" + "".join(f"{c:>10}" for c in CLASSES)]
    for c in CLASSES:
        p = mc["per_class"][c]
        lines.append(f"{c:12}{_pct(p['precision']):>11}{_pct(p['recall']):>9}{p['support']:>9}   "
                     + "".join(f"{mc['confusion'][c][o]:>10}" for o in CLASSES))
    for x in ("rules_model", "rules_only"):
        lines += ["", f"{SYSTEM_TITLES[x]}: actions per label (right action share)",
                  f"{'':12}" + "".join(f"{a.value:>11}" for a in ACTIONS) + f"{'right':>10}"]
        for c in CLASSES:
            m = s[x]["matrix"][c]
            lines.append(f"{c:12}" + "".join(f"{m[a.value]:>11}" for a in ACTIONS) + f"{_pct(s[x]['per_class'][c]['right_action']):>10}")
        lines.append(f"{'precision':12}" + "".join(f"{_pct(s[x]['per_action'][a.value]['precision']):>11}" for a in ACTIONS))
    ctx = result.get("by_client_context")
    if ctx:
        lines += ["", f"{SYSTEM_TITLES['rules_model']} by what the gateway knew of the client:",
                  f"{'':32}" + "".join(f"{CONTEXT_TITLES[k]:>20}" for k in ctx)]
        lines.append(f"{'requests':32}" + "".join(f"{ctx[k]['n']:>20}" for k in ctx))
        for title, key in CONTEXT_ROWS:
            lines.append(f"{title:32}" + "".join(f"{_pct(ctx[k][key]):>20}" for k in ctx))
    pb = result.get("policy_blocks")
    if pb and any(pb[k] for k in ("p_attack", "combined_risk", "corroborated")):
        by_rule = ", ".join(f"{k} {v}" for k, v in list(pb["corroborating_rules"].items())[:5])
        lines += ["", f"{SYSTEM_TITLES['rules_model']}: what the model scored was blocked at P(attack) {pb['p_attack']}, "
                  f"at combined risk {pb['combined_risk']}, corroborated by a fallback rule {pb['corroborated']}"
                  + (f" ({by_rule})" if by_rule else "")]
    held = (pb or {}).get("held_back") or {}
    if any(held.values()):
        lines += [f"{SYSTEM_TITLES['rules_model']}: blocks on P(attack) alone challenged instead: the payload {UNFAMILIAR} "
                  f"{held['unfamiliar']}, {NO_SYNTAX} of the kind named {held['no_syntax']}"]
    syntaxless = (pb or {}).get("syntaxless") or {}
    if any(syntaxless.values()):
        lines += [f"{SYSTEM_TITLES['rules_model']}: P(attack) not counted, {SYNTAXLESS}: "
                  + ", ".join(f"{label} {n}" for label, n in syntaxless.items())]
    lines += _family_lines(result.get("people_by_family") or {})
    if result["rule_hits"]:
        lines += ["", "rules that decided: " + ", ".join(f"{k} {v}" for k, v in list(result["rule_hits"].items())[:10])]
    if result.get("payload_hits"):
        lines += ["payload detectors that decided: " + ", ".join(f"{k} {v}" for k, v in list(result["payload_hits"].items())[:10])]
    if result["errors_by_source"]:
        lines += ["", "rules+model errors by source: " + ", ".join(f"{e['source']} {e['wrong']}/{e['of']}" for e in result["errors_by_source"])]
    missed = [k for k, t in result["targets"].items() if t["met"] is False]
    lines += ["", "targets: all met" if not missed else f"targets missed: {', '.join(missed)}"]
    return "\n".join(lines)


def _family_lines(families: Mapping[str, Mapping[str, float]]) -> list[str]:
    """People by browser family: each family's shares, and its distance from Chrome's in points."""
    if not families:
        return []
    chrome = families.get("chrome")
    lines = ["", f"{SYSTEM_TITLES['rules_model']}: people by browser family" + (" (points from Chrome)" if chrome else ""),
             f"{'':14}{'people':>8}{'blocked':>10}{'challenged':>12}" + (f"{'± blocked':>12}{'± challenged':>14}" if chrome else "")]
    for fam, m in families.items():
        line = f"{fam:14}{m['n']:>8}{_pct(m['blocked']):>10}{_pct(m['challenged']):>12}"
        if chrome:
            line += "".join(f"{100 * (m[k] - chrome[k]):>+{w}.2f}" for k, w in (("blocked", 12), ("challenged", 14)))
        lines.append(line)
    return lines


COMPARED = (("humans blocked", "humans_blocked"), ("humans challenged", "humans_challenged"), ("attacks blocked", "attacks_blocked"),
            ("bad bots challenged or blocked", "bad_bots_stopped"), ("good bots passed", "good_bots_passed"),
            ("verified good bots passed", "verified_good_bots_passed"), ("right action (accuracy)", "accuracy"))


def render_comparison(results: Sequence[Mapping[str, Any]]) -> str:
    """Setups side by side per data file (rules + model at each setup's policy); differences are from the first setup."""
    setups = list(dict.fromkeys(r["setup"] for r in results))
    files = len(dict.fromkeys(r["data"] for r in results))
    width = 20
    lines = [f"clefgate eval: {len(setups)} setup{'s' * (len(setups) != 1)} on {files} file{'s' * (files != 1)}, rules + model at each "
             "setup's policy; (+/-) is the difference from the first setup in points"]
    for i, name in enumerate(setups):
        first = next(r for r in results if r["setup"] == name)
        lines.append(f"  [{i + 1}] {name}: {first['model']} ({first['precision']}); {first['policy']}"
                     + ("" if first.get("model_enabled", True) else " (model.enabled is false there: shown is what turning it on would do)"))
        lines += [f"      note: {n}" for n in first.get("policy_notes", [])]
    for data in dict.fromkeys(r["data"] for r in results):
        row = {r["setup"]: r for r in results if r["data"] == data}
        base = row[setups[0]]
        skipped = "; skipped lines: " + ", ".join(f"{k} {v}" for k, v in base["skipped"].items()) if base.get("skipped") else ""
        lines += ["", f"{data}: {base['n']} labelled requests ({', '.join(f'{k} {v}' for k, v in base['labels'].items())}){skipped}",
                  f"{'':32}" + "".join(f"{f'[{i + 1}]':>{width}}" for i in range(len(setups))) + f"{'target':>12}"]
        for title, key in COMPARED:
            cells = []
            for j, name in enumerate(setups):
                v, b = row[name].get(key), base.get(key)
                diff = f" ({100 * (v - b):+.2f})" if j and v is not None and b is not None else ""
                cells.append(f"{_pct(v) + diff:>{width}}")
            target = TARGETS.get(key)
            lines.append(f"{title:32}" + "".join(cells) + f"{f'{target[0]} {_pct(target[1])}' if target else '':>12}")
        for i, name in enumerate(setups):
            blocked = row[name].get("humans_blocked_by_source") or {}
            if blocked:
                lines.append(f"  [{i + 1}] people blocked, by source: " + ", ".join(f"{k} {v}" for k, v in blocked.items()))
    return "\n".join(lines)


def _setups(configs: Sequence[Path | None], versions: Sequence[str | None]) -> list[tuple[str, Path | None, str | None]]:
    """(column name, config, model version or None for the config's) for every config with every version."""
    named = len(configs) > 1
    short = len({p.name if p else None for p in configs}) == len(configs)  # file names tell the configs apart
    out = []
    for path in configs:
        label = (path.name if short else str(path)) if path else "shipped config"
        for version in versions:
            name = " ".join(x for x in (label if named or version is None else "", f"model {version}" if version else "") if x)
            out.append((name, path, version))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``clefgate eval``: 0 when the evaluation ran (targets are reported, not enforced), 2 on a setup error."""
    ap = argparse.ArgumentParser(prog="clefgate eval", description="Evaluate rules + model + policy on labelled requests.")
    ap.add_argument("--data", type=Path, action="append", required=True,
                    help="JSONL: one labelled request per line (repeat to compare on several files)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--config", type=Path, action="append", default=None,
                    help="gateway config (rules, policy, model); default: the shipped one (repeat to compare configs)")
    ap.add_argument("--model-version", action="append", default=None, metavar="VERSION",
                    help="model version to use instead of the config's (repeat to compare versions)")
    ap.add_argument("--variant", choices=("auto", "fp32", "int8", "fp16"), default=None, help="model file to use (default: the config's)")
    ap.add_argument("--limit", type=int, default=None, help="read at most this many labelled requests")
    args = ap.parse_args(argv)
    from gateway.decider import manifest as mf
    from gateway.decider.onnx import ModelLoadError, OnnxOptions, OnnxScorer

    repeated = [str(x) for xs in (args.config or [], args.model_version or [], args.data) for x in xs if xs.count(x) > 1]
    if repeated:
        print(f"clefgate eval: given more than once: {', '.join(dict.fromkeys(repeated))}", file=sys.stderr)
        return 2
    setups = _setups(args.config or [None], args.model_version or [None])
    results: list[dict[str, Any]] = []
    read: dict[Path, tuple[list[Row], Skipped]] = {}
    try:
        for name, path, version in setups:
            cfg = load_config(path)
            if version:
                cfg.model.version = version
            base = Path(cfg.source).parent if not cfg.source.startswith("<") else Path.cwd()
            opts = OnnxOptions.from_config(cfg.model, base)
            opts = OnnxOptions(**{**opts.__dict__, "providers": ("cpu",), **({"variant": args.variant} if args.variant else {})})
            try:
                scorer = OnnxScorer(opts)
            except (mf.ManifestError, ModelLoadError) as exc:
                raise EvalError(f"{name}: {exc}" if len(setups) > 1 else str(exc)) from exc
            for data in args.data:
                if data not in read:
                    skipped = Skipped()
                    read[data] = (read_rows(data, skipped, args.limit), skipped)
                rows, skipped = read[data]
                result = evaluate(rows, cfg, scorer)
                results.append({**result, "setup": name, "config": str(path) if path else None, "skipped": skipped.counts, "data": str(data)})
    except (EvalError, config_mod.ConfigError, mf.ManifestError, ModelLoadError) as exc:
        print(f"clefgate eval: {exc}", file=sys.stderr)
        return 2
    if len(results) > 1:
        print(json.dumps({"compare": results}, indent=2) if args.json else render_comparison(results))
        return 0
    result = results[0]
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k not in ("setup", "config")}, indent=2))
    else:
        print(render(result, result["data"]))
        if result["skipped"]:
            print(f"skipped lines: {', '.join(f'{k} {v}' for k, v in result['skipped'].items())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
