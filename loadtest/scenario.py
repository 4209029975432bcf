"""Scenario files: which clients come, how many, how fast, in which phases, within which bounds.

A scenario is a YAML file (``loadtest/scenarios/*.yaml``)::

    name: default
    seed: 7
    host: shop.example
    limits: {max_requests: 300000, max_duration_s: 60}
    phases:
      - {name: steady, duration_s: 25}
      - {name: flood, duration_s: 12, flood: true}
    clients:
      person: {sessions_per_s: 6, requests: [3, 8], gap_s: [0.3, 2.0]}
      flood:  {concurrency: 150, phases: [flood]}

Each client kind (see ``loadtest.behaviours.KINDS``) either arrives as sessions
(``sessions_per_s``, Poisson arrivals, each session making ``requests`` requests —
pages for people — with ``gap_s`` between them) or runs as ``concurrency`` closed-loop
workers for the whole of its phases (the flood). ``phases`` limits a kind to some
phases (default: all). Loading reports every problem at once, each with its path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SCENARIOS_DIR = Path(__file__).resolve().parent / "scenarios"


class ScenarioError(Exception):
    """A scenario file is invalid; ``problems`` lists every issue."""

    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class Phase:
    """A stretch of the run with its own name (the flood phase is marked in the plots)."""

    name: str
    duration_s: float
    flood: bool = False


@dataclass(frozen=True)
class ClientMix:
    """How one kind of client arrives and behaves."""

    kind: str
    sessions_per_s: float = 0.0
    concurrency: int = 0
    requests: tuple[int, int] = (1, 1)
    gap_s: tuple[float, float] = (0.0, 0.0)
    phases: tuple[str, ...] = ()
    max_sessions: int = 400
    options: Mapping[str, Any] = field(default_factory=dict)

    def active_in(self, phase: str) -> bool:
        return not self.phases or phase in self.phases


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: phases in order, the client mix, and the run's bounds."""

    name: str
    seed: int
    host: str
    phases: tuple[Phase, ...]
    clients: tuple[ClientMix, ...]
    max_requests: int
    max_duration_s: float
    request_timeout_s: float = 10.0
    description: str = ""
    source: str = "<inline>"

    @property
    def duration_s(self) -> float:
        """Planned length: the phases' total, capped by ``max_duration_s``."""
        return min(self.max_duration_s, sum(p.duration_s for p in self.phases))

    def phase_bounds(self) -> list[tuple[Phase, float, float]]:
        """(phase, start, end) in seconds from the start of the run."""
        out, t = [], 0.0
        for p in self.phases:
            out.append((p, t, t + p.duration_s))
            t += p.duration_s
        return out

    def cut_phases(self) -> tuple[str, ...]:
        """Phases that ``max_duration_s`` stops before their planned end (the run never reaches all of them)."""
        return tuple(p.name for p, _, end in self.phase_bounds() if end > self.max_duration_s + 1e-9)

    def phase_at(self, t: float) -> str:
        for p, start, end in self.phase_bounds():
            if start <= t < end:
                return p.name
        return self.phases[-1].name

    def scaled(self, factor: float) -> Scenario:
        """The same mix with arrival rates and flood concurrency multiplied by ``factor``."""
        clients = tuple(dataclasses.replace(c, sessions_per_s=c.sessions_per_s * factor,
                                            concurrency=max(1, round(c.concurrency * factor)) if c.concurrency else 0)
                        for c in self.clients)
        return dataclasses.replace(self, clients=clients, max_requests=max(1, int(self.max_requests * max(1.0, factor))))

    def shortened(self, seconds: float) -> Scenario:
        """The phases shrunk proportionally to last ``seconds`` in all (for smoke runs)."""
        total = sum(p.duration_s for p in self.phases)
        ratio = seconds / total if total > 0 else 1.0
        phases = tuple(dataclasses.replace(p, duration_s=p.duration_s * ratio) for p in self.phases)
        return dataclasses.replace(self, phases=phases, max_duration_s=min(self.max_duration_s, seconds))


_TOP_KEYS = {"name", "description", "seed", "host", "limits", "phases", "clients", "request_timeout_s"}
_MIX_KEYS = {"sessions_per_s", "concurrency", "requests", "gap_s", "phases", "max_sessions", "options"}


def _number(value: Any, where: str, problems: list[str], *, minimum: float = 0.0, integer: bool = False) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        problems.append(f"{where}: expected {'an integer' if integer else 'a number'}, got {value!r}")
        return None
    if value < minimum:
        problems.append(f"{where}: must be >= {minimum:g} (got {value!r})")
        return None
    return value


def _range(value: Any, where: str, problems: list[str], *, integer: bool) -> tuple[Any, Any] | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value, value]
    if not isinstance(value, list) or len(value) != 2:
        problems.append(f"{where}: expected [low, high] or a single number, got {value!r}")
        return None
    lo = _number(value[0], f"{where}[0]", problems, integer=integer)
    hi = _number(value[1], f"{where}[1]", problems, integer=integer)
    if lo is None or hi is None:
        return None
    if hi < lo:
        problems.append(f"{where}: high ({hi!r}) is below low ({lo!r})")
        return None
    return lo, hi


def parse(raw: Any, source: str = "<inline>", known_kinds: tuple[str, ...] | None = None) -> Scenario:
    """Validate a scenario mapping; raise ScenarioError listing every problem."""
    if known_kinds is None:
        from loadtest.behaviours import KINDS
        known_kinds = tuple(KINDS)
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        raise ScenarioError([f"<top>: expected a map, got {type(raw).__name__}"], source)
    for key in raw:
        if key not in _TOP_KEYS:
            problems.append(f"{key}: unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    name = str(raw.get("name") or Path(source).stem)
    seed = raw.get("seed", 7)
    if not isinstance(seed, int) or isinstance(seed, bool):
        problems.append(f"seed: expected an integer, got {seed!r}")
        seed = 7
    host = raw.get("host", "shop.example")
    if not isinstance(host, str) or not host or any(c.isspace() for c in host):
        problems.append(f"host: expected a host name, got {host!r}")
        host = "shop.example"
    timeout = _number(raw.get("request_timeout_s", 10.0), "request_timeout_s", problems, minimum=0.1) or 10.0

    limits = raw.get("limits") or {}
    max_requests, max_duration = 1_000_000, 600.0
    if not isinstance(limits, Mapping):
        problems.append("limits: expected a map with max_requests and max_duration_s")
    else:
        for key in limits:
            if key not in ("max_requests", "max_duration_s"):
                problems.append(f"limits.{key}: unknown key (known: max_requests, max_duration_s)")
        if "max_requests" not in limits or "max_duration_s" not in limits:
            problems.append("limits: both max_requests and max_duration_s are required (a run must stop by itself)")
        mr = _number(limits.get("max_requests", max_requests), "limits.max_requests", problems, minimum=1, integer=True)
        md = _number(limits.get("max_duration_s", max_duration), "limits.max_duration_s", problems, minimum=0.1)
        max_requests = int(mr) if mr is not None else max_requests
        max_duration = float(md) if md is not None else max_duration

    phases: list[Phase] = []
    raw_phases = raw.get("phases")
    if not isinstance(raw_phases, list) or not raw_phases:
        problems.append("phases: required, a non-empty list of {name, duration_s}")
    else:
        for i, item in enumerate(raw_phases):
            where = f"phases[{i}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item.get("name"):
                problems.append(f"{where}: expected {{name, duration_s[, flood]}}")
                continue
            for key in item:
                if key not in ("name", "duration_s", "flood"):
                    problems.append(f"{where}.{key}: unknown key (known: name, duration_s, flood)")
            if any(p.name == item["name"] for p in phases):
                problems.append(f"{where}.name: duplicate phase {item['name']!r}")
            d = _number(item.get("duration_s"), f"{where}.duration_s", problems, minimum=0.1)
            flood = item.get("flood", False)
            if not isinstance(flood, bool):
                problems.append(f"{where}.flood: expected true or false, got {flood!r}")
                flood = False
            if d is not None:
                phases.append(Phase(item["name"], float(d), flood))
    phase_names = {p.name for p in phases}

    clients: list[ClientMix] = []
    raw_clients = raw.get("clients")
    if not isinstance(raw_clients, Mapping) or not raw_clients:
        problems.append("clients: required, a map of client kind -> {sessions_per_s | concurrency, ...}")
        raw_clients = {}
    for kind, spec in raw_clients.items():
        where = f"clients.{kind}"
        if kind not in known_kinds:
            problems.append(f"{where}: unknown client kind (known: {', '.join(known_kinds)})")
            continue
        if not isinstance(spec, Mapping):
            problems.append(f"{where}: expected a map")
            continue
        for key in spec:
            if key not in _MIX_KEYS:
                problems.append(f"{where}.{key}: unknown key (known: {', '.join(sorted(_MIX_KEYS))})")
        rate = _number(spec.get("sessions_per_s", 0.0), f"{where}.sessions_per_s", problems)
        conc = _number(spec.get("concurrency", 0), f"{where}.concurrency", problems, integer=True)
        if rate is not None and conc is not None and bool(rate) == bool(conc):
            problems.append(f"{where}: give exactly one of sessions_per_s (arriving sessions) or concurrency (closed-loop workers)")
        reqs = _range(spec.get("requests", [1, 1]), f"{where}.requests", problems, integer=True)
        if reqs is not None and reqs[0] < 1:
            problems.append(f"{where}.requests: sessions make at least one request")
        gap = _range(spec.get("gap_s", [0.0, 0.0]), f"{where}.gap_s", problems, integer=False)
        kind_phases = spec.get("phases", [])
        if not isinstance(kind_phases, list) or not all(isinstance(p, str) for p in kind_phases):
            problems.append(f"{where}.phases: expected a list of phase names")
            kind_phases = []
        for p in kind_phases:
            if phase_names and p not in phase_names:
                problems.append(f"{where}.phases: unknown phase {p!r} (known: {', '.join(sorted(phase_names))})")
        max_sessions = _number(spec.get("max_sessions", 400), f"{where}.max_sessions", problems, minimum=1, integer=True)
        options = spec.get("options", {})
        if not isinstance(options, Mapping):
            problems.append(f"{where}.options: expected a map")
            options = {}
        clients.append(ClientMix(kind, float(rate or 0.0), int(conc or 0), tuple(reqs or (1, 1)),  # type: ignore[arg-type]
                                 tuple(gap or (0.0, 0.0)), tuple(kind_phases), int(max_sessions or 400), dict(options)))  # type: ignore[arg-type]
    if problems:
        raise ScenarioError(problems, source)
    return Scenario(name=name, seed=seed, host=host, phases=tuple(phases), clients=tuple(clients), max_requests=max_requests,
                    max_duration_s=max_duration, request_timeout_s=float(timeout), description=str(raw.get("description", "")),
                    source=source)


def load(name_or_path: str) -> Scenario:
    """A scenario by file path, or by name from ``loadtest/scenarios/`` (``default``, ``smoke``)."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = SCENARIOS_DIR / f"{name_or_path}.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        known = ", ".join(sorted(p.stem for p in SCENARIOS_DIR.glob("*.yaml")))
        raise ScenarioError([f"cannot read: {exc.strerror} (shipped scenarios: {known})"], str(path)) from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ScenarioError([f"{where}{getattr(exc, 'problem', None) or exc}"], str(path)) from exc
    return parse(raw, str(path))
