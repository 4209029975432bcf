"""Rule files -> validated -> compiled ``RuleTable``, with every problem reported at once.

A rule file is YAML: either a list of rules, or a map with ``rules:`` (and an optional
``description:``). A list entry ``{include: other.yaml}`` splices that file's rules in at
that position (paths relative to the including file). Each problem is reported as
``file:rule: message`` where ``rule`` is the rule's name or ``#n`` (its 1-based position
in its file); file-level problems as ``file: message``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from gateway.clients import ClientState
from gateway.config import ClientsConfig, Config, ConfigError
from gateway.features import Features
from gateway.rules.conditions import CONDITION_KEYS, Context, Emitter, compile_conditions, conjunction, did_you_mean, uses_reverse_dns
from gateway.rules.iplist import NamedLists
from gateway.rules.table import ACTIONS, CompiledRule, RuleTable
from gateway.verdict import Action, ScoreRequest, Source, Verdict

log = logging.getLogger("clefgate.rules")

META_KEYS = ("name", "description")
ACTION_KEYS = ("action", "status", "difficulty", "backend", "continue", "policy", "bot_likeness", "inspect")
# a score rule's bot_likeness: challenge (the policy weighs the client's look, the default) or ignore (P(attack) alone)
BOT_LIKENESS = ("challenge", "ignore")
RULE_KEYS = META_KEYS + CONDITION_KEYS + ACTION_KEYS
OVERRIDABLE = ("allow", "block", "challenge", "score")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")  # matched whole (fullmatch): "$" would let a trailing newline in


class RuleFileError(ConfigError):
    """ConfigError for rule files; also names the rules that would challenge, so the caller can
    still report a missing challenge key in the same run."""

    def __init__(self, problems: list[str], source: str, challengers: list[str]) -> None:
        super().__init__(problems, source)
        self.challengers = challengers


@dataclass
class RuleOptions:
    """What the rules are checked against and the defaults they inherit."""

    backends: Collection[str] = ()
    policies: Collection[str] = ()
    lists_dir: str = ""
    disabled: Sequence[str] = ()
    actions: Mapping[str, str] = field(default_factory=dict)
    inspect: Mapping[str, object] = field(default_factory=dict)  # rules.inspect: a rule's inspect by its name
    difficulty: int = 16
    block_status: int = 403
    clients: ClientsConfig = field(default_factory=ClientsConfig)
    known_elsewhere: Collection[str] = ()  # rule names of the other rule set (rules.files vs rules.fallback_files)
    fallback: bool = False  # compiling rules.fallback_files: they decide without waiting, so no reverse_dns
    # the injection signatures (:func:`is_signature`) read value by value: the names of those a request matches
    # (``PayloadInspector.matched``); None reads every ``inputs`` condition over the whole request
    signatures: Callable[[Features], Collection[str]] | None = None


@dataclass
class _Entry:
    raw: Mapping[str, Any]
    file: str
    label: str
    folder: Path  # the folder of the file the rule is in: its lists/ is where list:NAME is looked up


# shipped rules that changed name: a config naming the old one (rules.disabled, rules.actions) means the new one
RENAMED = {"block-wordpress-probes": "wordpress-paths", "block-phpmyadmin-probes": "database-panel-paths"}


def renamed(names: Sequence[str], *, warn: bool = True) -> list[str]:
    """``names`` with every old name of a shipped rule replaced by its current one (logged when ``warn``)."""
    old = [n for n in names if n in RENAMED]
    if old and warn:
        log.warning("rules: %s renamed; configure %s", ", ".join(f"{n} is now {RENAMED[n]}" for n in old),
                    ", ".join(RENAMED[n] for n in old))
    return [RENAMED.get(n, n) for n in names]


def from_config(cfg: Config, state: ClientState, *, fallback: bool = False,
                signatures: Callable[[Features], Collection[str]] | None = None) -> RuleTable:
    """Compile ``cfg.rules.files`` (or ``rules.fallback_files``); raises ConfigError listing every problem.

    ``rules.disabled`` and ``rules.actions`` may name a rule of either set, by its current name or an old one
    (:data:`RENAMED`). ``signatures``: see :attr:`RuleOptions.signatures`.
    """
    files, other = (cfg.rules.fallback_files, cfg.rules.files) if fallback else (cfg.rules.files, cfg.rules.fallback_files)
    # both rule sets are compiled from one config: the old names are reported once, with the first
    actions = dict(zip(renamed(list(cfg.rules.actions), warn=not fallback), cfg.rules.actions.values(), strict=True))
    opts = RuleOptions(backends=list(cfg.backends), policies=list(cfg.policy.routes), lists_dir=cfg.rules.lists_dir,
                       disabled=renamed(cfg.rules.disabled, warn=not fallback), actions=actions,
                       inspect=dict(zip(renamed(list(cfg.rules.inspect), warn=False), cfg.rules.inspect.values(), strict=True)),
                       difficulty=cfg.challenge.difficulty,
                       block_status=cfg.challenge.block_status, clients=cfg.clients, known_elsewhere=rule_names(other),
                       fallback=fallback, signatures=signatures)
    return load(files, opts, state)


def rule_names(files: Sequence[str]) -> set[str]:
    """Names of the rules in ``files`` (includes followed; problems are left to ``load``)."""
    if not files:
        return set()
    base = Path(files[0]).resolve().parent
    entries: list[_Entry] = []
    for f in files:
        _read_file(Path(f).resolve(), base, entries, [], [], stack=())
    return {n for e in entries if isinstance(n := e.raw.get("name"), str)}


def inputs_signatures(files: Sequence[str], disabled: Collection[str] = (), actions: Mapping[str, str] | None = None) -> list[tuple[str, list[str]]]:
    """``(name, patterns)`` of each named block rule in ``files`` whose only condition is ``inputs``.

    The payload inspector (``gateway.payload``) applies these per location. A rule with
    other conditions too is left out (its patterns alone would not mean what the rule
    means), as are disabled rules and rules whose action ``rules.actions`` overrides.
    Problems are left to ``load``, which reports them when the table compiles.
    """
    if not files:
        return []
    base = Path(files[0]).resolve().parent
    entries: list[_Entry] = []
    for f in files:
        _read_file(Path(f).resolve(), base, entries, [], [], stack=())
    out: list[tuple[str, list[str]]] = []
    for e in entries:
        name, patterns = e.raw.get("name"), e.raw.get("inputs")
        action = (actions or {}).get(name, e.raw.get("action")) if isinstance(name, str) else None
        if not is_signature(name, e.raw, action) or name in disabled:
            continue
        patterns = [patterns] if isinstance(patterns, str) else patterns
        if isinstance(patterns, list) and patterns and all(isinstance(p, str) for p in patterns):
            out.append((name, list(patterns)))
    return out


def is_signature(name: object, raw: Mapping[str, Any], action: object) -> TypeGuard[str]:
    """An injection signature: a named block rule whose only condition is ``inputs`` (``action`` after ``rules.actions``)."""
    return isinstance(name, str) and action == "block" and [k for k in raw if k in CONDITION_KEYS] == ["inputs"]


def load(files: Sequence[str], opts: RuleOptions, state: ClientState) -> RuleTable:
    """Read, validate and compile rule files in order; raises ConfigError(problems, source=first file)."""
    if not files:
        return RuleTable([], [])
    base = Path(files[0]).resolve().parent
    problems: list[str] = []
    entries: list[_Entry] = []
    read: list[str] = []
    for f in files:
        _read_file(Path(f).resolve(), base, entries, problems, read, stack=())

    configured = NamedLists(Path(opts.lists_dir)) if opts.lists_dir else None
    beside: dict[Path, NamedLists] = {}
    emit = Emitter()
    compiled: list[CompiledRule] = []
    seen: dict[str, str] = {}
    for entry in entries:
        name = entry.raw.get("name")
        if isinstance(name, str) and name in seen:
            problems.append(f"{entry.file}:{entry.label}: name: duplicate rule name {name!r} (first in {seen[name]})")
        elif isinstance(name, str):
            seen[name] = entry.file
        if isinstance(name, str) and name in opts.disabled:
            continue
        lists = configured or beside.setdefault(entry.folder, NamedLists(entry.folder / "lists"))
        rule = _compile_rule(entry, opts, lists, state, emit, problems)
        if rule is not None:
            compiled.append(rule)

    users = _list_users(entries)
    for where, names in (("rules.disabled", list(opts.disabled)), ("rules.actions", list(opts.actions)), ("rules.inspect", list(opts.inspect))):
        for n in names:
            if n not in seen and n not in opts.known_elsewhere:
                hint = (f" ({n!r} is a named list; the rules using it: {', '.join(users[n])})" if n in users
                        else did_you_mean(n, list(seen)))
                problems.append(f"{where}: unknown rule {n!r}{hint}")
    for n, action in opts.actions.items():
        if action not in OVERRIDABLE:
            problems.append(f"rules.actions.{n}: {action!r} is not one of {', '.join(OVERRIDABLE)}")

    catch_all: CompiledRule | None = None
    for rule in compiled:
        if catch_all is not None:
            problems.append(f"{rule.file}:{rule.label}: unreachable: rule {catch_all.label!r} ({catch_all.file}) before it matches every request")
        elif rule.catch_all:
            catch_all = rule

    if problems:
        raise RuleFileError(problems, str(files[0]), [r.label for r in compiled if r.action == "challenge"])
    return RuleTable(compiled, read, emit)


def _list_users(entries: Sequence[_Entry]) -> dict[str, list[str]]:
    """List name -> the names of the rules whose conditions refer to it (``list:NAME``, at any depth)."""
    users: dict[str, list[str]] = {}

    def walk(value: Any, rule: str) -> None:
        if isinstance(value, str) and value.startswith("list:"):
            names = users.setdefault(value[5:], [])
            if rule not in names:
                names.append(rule)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v, rule)
        elif isinstance(value, list):
            for v in value:
                walk(v, rule)

    for entry in entries:
        name = entry.raw.get("name")
        if isinstance(name, str):
            walk({k: v for k, v in entry.raw.items() if k in CONDITION_KEYS}, name)
    return users


def _display(path: Path, base: Path) -> str:
    """A rule file as messages show it: relative to the first file's folder, or absolute when outside it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def _read_file(path: Path, base: Path, entries: list[_Entry], problems: list[str], read: list[str], stack: tuple[Path, ...],
               included_at: str = "") -> None:
    shown = _display(path, base)
    if path in stack:
        chain = " -> ".join(_display(p, base) for p in (*stack, path))
        problems.append(f"{included_at}: include: {shown!r} includes itself ({chain})")
        return
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(f"{included_at}: include: cannot read {shown!r}: {exc.strerror}" if included_at else f"{shown}: cannot read: {exc.strerror}")
        return
    except UnicodeDecodeError as exc:
        problems.append(f"{shown}: not UTF-8 text (byte {exc.start})")
        return
    read.append(str(path))
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problems.append(f"{shown}: {where}{getattr(exc, 'problem', None) or exc}")
        return
    if doc is None:
        return
    if isinstance(doc, Mapping):
        unknown = [k for k in doc if k not in ("rules", "description")]
        for k in unknown:
            problems.append(f"{shown}: {k}: unknown key{did_you_mean(str(k), ['rules', 'description'])} (a rule file has rules and description)")
        doc = doc.get("rules") or []
    if not isinstance(doc, list):
        problems.append(f"{shown}: expected a list of rules (or a map with 'rules:'), got {type(doc).__name__}")
        return
    for i, raw in enumerate(doc, 1):
        if isinstance(raw, Mapping) and set(raw) == {"include"}:
            target = raw["include"]
            if not isinstance(target, str):
                problems.append(f"{shown}:#{i}: include: expected a file name")
                continue
            _read_file((path.parent / target).resolve(), base, entries, problems, read, (*stack, path), f"{shown}:#{i}")
            continue
        if not isinstance(raw, Mapping):
            problems.append(f"{shown}:#{i}: expected a map (a rule), got {type(raw).__name__}")
            continue
        name = raw.get("name")
        # a name a problem line cannot show as it is (a line break in it) is named by its position
        label = name if isinstance(name, str) and name and name.isprintable() else f"#{i}"
        entries.append(_Entry(raw, shown, label, path.parent))


def _compile_rule(entry: _Entry, opts: RuleOptions, lists: NamedLists, state: ClientState, emit: Emitter,
                  problems: list[str]) -> CompiledRule | None:
    raw, label = entry.raw, entry.label
    mine: list[str] = []
    for key in raw:
        if key not in RULE_KEYS:
            hint = did_you_mean(str(key), RULE_KEYS)
            mine.append(f"{key}: unknown key{hint}" if hint else f"{key}: unknown key (conditions: {', '.join(CONDITION_KEYS)})")
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
        mine.append(f"name: {name!r} is not a rule name (letters, digits, and - _ . : ; up to 100)")
    description = raw.get("description", "")
    if not isinstance(description, str):
        mine.append("description: expected a string")
        description = ""

    action = raw.get("action")
    if action is None:
        mine.append(f"action: required (one of {', '.join(ACTIONS)})")
    elif action not in ACTIONS:
        mine.append(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
        action = None
    if isinstance(name, str) and name in opts.actions and opts.actions[name] in OVERRIDABLE:
        if action == "route":
            mine.append(f"action: a route rule cannot be overridden by rules.actions.{name}")
        else:
            action = opts.actions[name]
            # the override's defaults apply (a rule's inspect stays with its allow)
            raw = {k: v for k, v in raw.items() if k not in ("status", "difficulty", "policy", "bot_likeness") and (k != "inspect" or action == "allow")}

    status, difficulty, backend, stop, policy = opts.block_status, opts.difficulty, None, True, None
    for key, applies in (("status", ("block",)), ("difficulty", ("challenge",)), ("backend", ("route",)), ("continue", ("route",)),
                         ("policy", ("score",)), ("bot_likeness", ("score",)), ("inspect", ("allow", "route"))):
        if key in raw and action is not None and action not in applies:
            mine.append(f"{key}: only applies to action {' or '.join(applies)}")
    if "status" in raw:
        status = raw["status"]
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            mine.append(f"status: {status!r} is not a 4xx or 5xx status")
    if "difficulty" in raw:
        difficulty = raw["difficulty"]
        if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not 1 <= difficulty <= 32:
            mine.append(f"difficulty: {difficulty!r} is not between 1 and 32 (bits)")
    if action == "route":
        backend = raw.get("backend")
        if backend is None:
            mine.append("backend: required for action route")
        elif backend not in opts.backends:
            mine.append(f"backend: unknown backend {backend!r}{did_you_mean(str(backend), list(opts.backends))} "
                        f"(known: {', '.join(sorted(opts.backends)) or 'none'})")
        cont = raw.get("continue", False)
        if not isinstance(cont, bool):
            mine.append(f"continue: expected true or false, got {cont!r}")
        stop = not cont
    if "policy" in raw:
        policy = raw["policy"]
        if policy not in opts.policies:
            mine.append(f"policy: unknown policy {policy!r}{did_you_mean(str(policy), list(opts.policies))} "
                        f"(known under policy.routes: {', '.join(sorted(opts.policies)) or 'none'})")
    bot_likeness = raw.get("bot_likeness", BOT_LIKENESS[0])
    if not isinstance(bot_likeness, str) or bot_likeness not in BOT_LIKENESS:
        mine.append(f"bot_likeness: {bot_likeness!r} is not one of {', '.join(BOT_LIKENESS)}")
    # an allow or route rule's forward wins (an operator's allow list is never blocked); inspect: true says it vouches for
    # the client only, not for what it sends, so the payload detectors still read what it lets through
    inspect = raw.get("inspect", False)
    if isinstance(name, str) and name in opts.inspect:
        inspect = opts.inspect[name]
        if action not in ("allow", "route"):
            problems.append(f"rules.inspect.{name}: only applies to allow and route rules ({name!r} is {action})")
            inspect = False
        elif not isinstance(inspect, bool):
            problems.append(f"rules.inspect.{name}: expected true or false, got {inspect!r}")
            inspect = False
    if not isinstance(inspect, bool):
        mine.append(f"inspect: expected true or false, got {inspect!r}")
    elif inspect and not isinstance(name, str):
        # the pipeline knows an inspected rule's forward by the rule's name; an unnamed rule's #n is another file's too
        mine.append("inspect: needs the rule to have a name")
    elif inspect and opts.fallback:
        # a fallback rule's forward decides nothing (decider.fallback does): there is nothing for the detectors to read after it
        mine.append("inspect: not in rules.fallback_files, where an allow decides nothing (decider.fallback does)")
    elif inspect and action == "route" and not stop:
        # a route that continues forwards nothing itself: what the table forwards after it is the later rule's verdict
        mine.append("inspect: a route that continues lets nothing through itself; say it on the rule that does")

    conditions = {k: v for k, v in raw.items() if k in CONDITION_KEYS}
    names_key = uses_reverse_dns(conditions)
    if names_key and opts.fallback:
        mine.append(f"{names_key}: not in rules.fallback_files, which decide without waiting for a lookup (put the rule in rules.files)")
    elif names_key and "user_agent" not in conditions:
        mine.append(f"{names_key}: needs a user_agent condition in the same rule, so that only requests claiming that name "
                    "have their address looked up")
    rule_id = name if isinstance(name, str) and name else f"{entry.file}{label}"
    ctx = Context(lists, state, opts.clients, rule_id, emit)
    exprs = compile_conditions(conditions, ctx, mine)
    claim = None
    if not mine and uses_reverse_dns(conditions):
        claim = conjunction(compile_conditions({"user_agent": conditions["user_agent"]}, ctx, mine))
    problems.extend(f"{entry.file}:{label}: {p}" for p in mine)
    if mine or action is None:
        return None
    if opts.signatures is not None and is_signature(name, raw, action):
        # sig: the names of the signatures the request's values match (per request, on first use)
        exprs = [f"{emit.const(name)} in (sig := {emit.const(opts.signatures)}(f) if sig is None else sig)"]

    explanation = (description.strip(),) if description.strip() else ()
    reason = f"rule {label}: {action}" + (f" to {backend}" if action == "route" else "")
    outcome: Verdict | ScoreRequest | None
    if action == "allow":
        outcome = Verdict(Action.FORWARD, Source.RULE, reason, rule=label, explanation=explanation)
    elif action == "block":
        outcome = Verdict(Action.BLOCK, Source.RULE, reason, rule=label, status=status, explanation=explanation)
    elif action == "challenge":
        outcome = Verdict(Action.CHALLENGE, Source.RULE, reason, rule=label, difficulty=difficulty, explanation=explanation)
    elif action == "score":
        ignored = bot_likeness == "ignore"
        outcome = ScoreRequest(rule=label, policy=policy, reason=reason + (" (bot-likeness ignored)" if ignored else ""),
                               ignore_bot_likeness=ignored)
    else:
        outcome = Verdict(Action.FORWARD, Source.RULE, reason, rule=label, backend=backend, explanation=explanation) if stop else None
    return CompiledRule(label=label, file=entry.file, description=description.strip(), action=action,
                        condition=conjunction(exprs), outcome=outcome, backend=backend, stop=stop, claim=claim, inspect=inspect is True)
