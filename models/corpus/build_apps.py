"""Extract the real-application request shapes (``models/corpus/data/apps-<source>.json``) from public API
descriptions, SDKs and documents.

Each source is one function that turns its description into shapes (see ``APPS-FORMAT`` in the data files'
``SOURCES.md`` section ``apps-*.json``) and one entry in ``SOURCES``; ``main`` writes the file of every source
selected with ``--only`` (a source name or a kind from ``KINDS``). Values come from the description itself (enum
values, documented examples, defaults); where it gives only a type, a value is drawn with a fixed-seed
``random.Random`` from ``data/words.txt``, so every run writes the same bytes.

API descriptions (kind ``api``):

- ``botocore`` (PyPI, pinned in the ``train`` extra): ``botocore/data/<service>/<date>/service-2.json.gz`` read
  from the wheel, each request built the way its protocol sends it (rest-json, rest-xml without an XML body,
  json, query, ec2);
- ``github``: GitHub's REST API description, ``generated/api.github.com.json`` of the npm package
  ``@octokit/openapi`` (the description of ``github/rest-api-description`` as published for the SDKs).

    pip download botocore==1.44.8 --no-deps -d /tmp/wheels
    npm pack @octokit/openapi@23.0.2 && tar xzf octokit-openapi-23.0.2.tgz -C /tmp/octo
    python -m models.corpus.build_apps --only api --botocore-wheel /tmp/wheels/botocore-1.44.8-py3-none-any.whl \\
        --octokit-openapi /tmp/octo/package
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import random
import re
import string
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

GROUPS = ("api", "write", "telemetry", "post", "form", "search", "page")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
BODY_KINDS = (None, "json", "form", "raw")
CONTEXTS = ("xhr", "xhr-write", "nav", "nav-post", "beacon")
SLOT_KINDS = ("query", "json", "form", "raw", "path")
SHAPE_KEYS = {"app", "group", "method", "path", "query", "body_kind", "body", "content_type", "context", "slots"}
PLACEHOLDERS = ("{id}", "{word}")
MAX_BODY = 6 * 1024          # bytes of a serialised body; larger ones are cut at a value boundary or skipped
MAX_FILE = 1_500_000         # bytes of one data file

BOTOCORE_VERSION = "1.44.8"
OCTOKIT_OPENAPI_VERSION = "23.0.2"


# ---------------------------------------------------------------------------------------------- shared helpers

def load_words(path: Path = DATA / "words.txt") -> list[str]:
    return [w for w in path.read_text().split() if w]


def dump(obj: Any) -> str:
    """The canonical text of a data file: compact, sorted keys, trailing newline (byte-identical runs)."""
    return json.dumps(obj, indent=None, separators=(",", ":"), sort_keys=True) + "\n"


def write_source(out_dir: Path, source: str, half: str, origin: str, licence: str,
                 shapes: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``apps-<source>.json`` after checking every shape; returns its path."""
    bad = [(i, p) for i, s in enumerate(shapes) for p in shape_problems(s)]
    if bad:
        raise SystemExit(f"{source}: {len(bad)} malformed shapes, e.g. {bad[:3]}")
    text = dump({"source": source, "half": half, "from": origin, "licence": licence, "shapes": list(shapes)})
    if len(text.encode()) > MAX_FILE:
        raise SystemExit(f"{source}: {len(text.encode())} bytes, over {MAX_FILE}")
    path = out_dir / f"apps-{source}.json"
    path.write_text(text, encoding="utf-8")
    return path


def shape_problems(shape: Mapping[str, Any]) -> list[str]:
    """Why ``shape`` does not follow the format (empty when it does)."""
    out = []
    if set(shape) - SHAPE_KEYS:
        out.append(f"unknown keys {sorted(set(shape) - SHAPE_KEYS)}")
    if shape.get("group") not in GROUPS or shape.get("method") not in METHODS or shape.get("context") not in CONTEXTS:
        out.append("group, method or context")
    path = shape.get("path")
    if not isinstance(path, str) or not path.startswith("/") or "?" in path \
            or re.sub(r"\{id\}|\{word\}", "", path).count("{") or re.sub(r"\{id\}|\{word\}", "", path).count("}"):
        out.append(f"path {path!r}")
    query = shape.get("query")
    if not isinstance(query, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                              for p in query):
        out.append("query")
        query = []
    kind, body = shape.get("body_kind"), shape.get("body")
    if kind not in BODY_KINDS:
        out.append(f"body_kind {kind!r}")
    elif (kind is None and body is not None) or (kind == "json" and not isinstance(body, dict)) \
            or (kind == "form" and not (isinstance(body, dict) and all(isinstance(v, str) for v in body.values()))) \
            or (kind == "raw" and not isinstance(body, str)):
        out.append("body does not match body_kind")
    if (kind == "raw") != ("content_type" in shape):
        out.append("content_type is for raw bodies only")
    if body is not None and len((body if isinstance(body, str) else json.dumps(body)).encode()) > MAX_BODY + 512:
        out.append("body over the size limit")
    names = {name for name, _ in query}
    for slot in shape.get("slots", []):
        where, what = slot
        if (where == "query" and what not in names) or (where in ("json", "form") and not (isinstance(body, dict) and what in body)) \
                or (where == "raw" and not (isinstance(body, str) and what and what in body)) \
                or (where == "path" and not (what == "last" and isinstance(path, str) and path.rstrip("/").endswith(PLACEHOLDERS))) \
                or where not in SLOT_KINDS:
            out.append(f"slot {slot!r}")
    return out


class Draw:
    """Plausible values for members a description types but does not exemplify, from one seeded generator."""

    def __init__(self, rng: random.Random, words: Sequence[str]) -> None:
        self.rng, self.words = rng, words

    def word(self) -> str:
        return self.rng.choice(self.words)

    def words_text(self, lo: int = 3, hi: int = 8) -> str:
        text = " ".join(self.word() for _ in range(self.rng.randint(lo, hi)))
        return text[0].upper() + text[1:]

    def name(self) -> str:
        return "-".join(self.word() for _ in range(self.rng.randint(1, 2)))

    def hexid(self, n: int = 17) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(n))

    def digits(self, n: int = 12) -> str:
        return str(self.rng.randint(1, 9)) + "".join(self.rng.choice(string.digits) for _ in range(n - 1))

    def token(self, n: int = 24) -> str:
        return "".join(self.rng.choice(string.ascii_letters + string.digits) for _ in range(n))

    def integer(self, lo: float | None = None, hi: float | None = None) -> int:
        lo_i = int(lo) if lo is not None else 1
        hi_i = int(hi) if hi is not None else max(lo_i, 1) * 100
        hi_i = min(hi_i, lo_i + 1000) if hi is None or hi_i - lo_i > 1000 else hi_i
        return self.rng.randint(lo_i, max(lo_i, hi_i))

    def number(self, lo: float | None = None, hi: float | None = None) -> float:
        low = lo if lo is not None else 0.0
        high = hi if hi is not None else low + 100.0
        return round(self.rng.uniform(low, high), 2)

    def timestamp(self) -> str:
        return (f"20{self.rng.randint(22, 26)}-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"
                f"T{self.rng.randint(0, 23):02d}:{self.rng.randint(0, 59):02d}:{self.rng.randint(0, 59):02d}Z")

    def epoch(self) -> int:
        return self.rng.randint(1_650_000_000, 1_790_000_000)

    def blob(self) -> str:
        return base64.b64encode(bytes(self.rng.randrange(256) for _ in range(self.rng.randint(6, 24)))).decode()

    def named_string(self, name: str, service: str = "app") -> str:
        """A value for a string member from the words of its name (Arn, Id, Name, Description, Url ...)."""
        low = name.lower()
        if low.endswith("arn") or low.endswith("arns"):
            return f"arn:aws:{service}:us-east-1:{self.digits()}:{self.word()}/{self.name()}"
        if "email" in low:
            return f"{self.word()}.{self.word()}@example.com"
        if low.endswith(("url", "uri", "endpoint")):
            return f"https://example.com/{self.word()}/{self.word()}"
        if "cidr" in low:
            return f"10.{self.rng.randint(0, 255)}.{self.rng.randint(0, 255)}.0/{self.rng.choice((16, 20, 24, 28))}"
        if low.endswith(("ipaddress", "ip", "ips")):
            return f"10.{self.rng.randint(0, 255)}.{self.rng.randint(0, 255)}.{self.rng.randint(1, 254)}"
        if "region" in low:
            return self.rng.choice(("us-east-1", "eu-west-1", "ap-southeast-2", "us-west-2"))
        if low.endswith(("token", "secret", "password")):
            return self.token()
        if low.endswith(("id", "ids", "identifier", "key", "sha", "hash", "number")):
            return self.hexid(self.rng.choice((8, 12, 17, 32)))
        if any(k in low for k in ("description", "message", "comment", "summary", "body", "text", "note", "reason")):
            return self.words_text()
        if low.endswith(("date", "time", "since", "until")):
            return self.timestamp()
        if "version" in low:
            return f"{self.rng.randint(1, 5)}.{self.rng.randint(0, 20)}.{self.rng.randint(0, 9)}"
        if "path" in low or "prefix" in low:
            return f"{self.word()}/{self.word()}/"
        return self.name()

    def bounded_string(self, name: str, pattern: str | None, lo: int | None, hi: int | None, service: str = "app") -> str:
        """``named_string`` held to the length bounds and, where Python's ``re`` reads it, to the pattern."""
        candidates = [self.named_string(name, service), self.name(), self.word(), self.hexid(12), self.digits(12),
                      self.word().upper(), self.token(12), self.word().capitalize()]
        rx = None
        if pattern:
            try:
                rx = re.compile(pattern)
            except (re.error, OverflowError):
                rx = None
        for value in candidates:
            value = _fit(value, lo, hi, self)
            if rx is None or rx.fullmatch(value):
                return value
        return _fit(candidates[0], lo, hi, self)


def _fit(value: str, lo: int | None, hi: int | None, draw: Draw) -> str:
    if hi is not None and hi > 0 and len(value) > hi:
        value = value[:hi]
    if lo is not None and len(value) < lo:
        value += draw.hexid(lo - len(value))
    return value


def cut_body(body: dict[str, Any], limit: int = MAX_BODY) -> dict[str, Any] | None:
    """``body`` with trailing top-level members dropped until it fits ``limit`` bytes (None when none fits)."""
    keys = list(body)
    while keys:
        trimmed = {k: body[k] for k in keys}
        if len(json.dumps(trimmed, separators=(",", ":")).encode()) <= limit:
            return trimmed
        keys.pop()
    return None


def read_only(name: str) -> bool:
    """Whether an operation named ``name`` (``ListBuckets``, ``issues/list-for-repo``) only reads."""
    head = re.split(r"[/_-]", name)[-1] if "/" in name else name
    return bool(re.match(r"(get|list|describe|search|query|batch-?get|head|check|lookup|scan|select|view|preview|export|download|validate|test)",
                         head, re.IGNORECASE))


def placeholder(name: str) -> str:
    """``{id}`` for identifiers, numbers, keys and hashes; ``{word}`` for names, paths and everything else."""
    low = re.sub(r"[^a-z]", "", name.lower())
    return "{id}" if re.search(r"(id|ids|identifier|arn|key|number|sha|hash|token|ref|version|index)$", low) else "{word}"


def _dedupe(shapes: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for s in shapes:
        key = json.dumps(s, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def _string_slots(query: Sequence[Sequence[str]], string_query: set[str], body_kind: str | None,
                  body: Any, string_body: set[str], path: str) -> list[list[str]]:
    slots = [["query", n] for n in dict.fromkeys(n for n, _ in query) if n in string_query]
    if body_kind in ("json", "form") and isinstance(body, dict):
        slots += [[body_kind, k] for k in body if k in string_body]
    if path.rstrip("/").endswith(PLACEHOLDERS):
        slots.append(["path", "last"])
    return slots


# ---------------------------------------------------------------------------------------------- botocore

BOTOCORE_PROTOCOLS = ("rest-json", "json", "query", "ec2", "rest-xml")
BOTOCORE_OPS_PER_SERVICE = 7
BOTOCORE_FORM_OPS_PER_SERVICE = 25    # the query and ec2 protocols send forms, the rarest body among the services
BOTOCORE_SEED = 20


def botocore_services(wheel: Path) -> dict[str, dict[str, Any]]:
    """The newest ``service-2`` model of every service in the botocore wheel, by service directory name."""
    newest: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as z:
        for member in sorted(z.namelist()):
            m = re.fullmatch(r"botocore/data/([^/]+)/([^/]+)/service-2\.json(?:\.gz)?", member)
            if m and member > newest.get(m.group(1), ""):
                newest[m.group(1)] = member
        out = {}
        for service, member in sorted(newest.items()):
            raw = z.read(member)
            out[service] = json.loads(gzip.decompress(raw) if member.endswith(".gz") else raw)
    return out


def _protocol(model: Mapping[str, Any]) -> str | None:
    meta = model.get("metadata", {})
    for p in [*meta.get("protocols", []), meta.get("protocol")]:
        if p in BOTOCORE_PROTOCOLS:
            return str(p)
    return None


class _Boto:
    """Values for one service model, serialised the way its protocol sends them."""

    def __init__(self, service: str, model: Mapping[str, Any], draw: Draw, protocol: str) -> None:
        self.service, self.shapes, self.draw, self.protocol = service, model["shapes"], draw, protocol
        self.prefix = model.get("metadata", {}).get("endpointPrefix", service)

    def is_string(self, ref: Mapping[str, Any]) -> bool:
        return bool(self.shapes[ref["shape"]]["type"] == "string")

    def pick(self, shape: Mapping[str, Any], depth: int) -> list[str]:
        members = shape.get("members", {})
        required = [m for m in shape.get("required", []) if m in members]
        if shape.get("union"):
            return [self.draw.rng.choice(sorted(members))] if members else []
        optional = [m for m in members if m not in required and not members[m].get("deprecated")]
        keep = self.draw.rng.random() < 0.5 if depth == 0 else self.draw.rng.random() < 0.3
        extra = [m for m in optional if self.draw.rng.random() < (0.35 if keep else 0.15)]
        return [m for m in members if m in required or m in extra][: 10 if depth == 0 else 5]

    def scalar(self, name: str, shape: Mapping[str, Any], where: str) -> Any:
        kind, draw = shape["type"], self.draw
        if shape.get("enum"):
            return draw.rng.choice(shape["enum"])
        if kind == "string":
            return draw.bounded_string(name, shape.get("pattern"), shape.get("min"), shape.get("max"), self.prefix)
        if kind in ("integer", "long"):
            return draw.integer(shape.get("min"), shape.get("max"))
        if kind in ("float", "double"):
            return draw.number(shape.get("min"), shape.get("max"))
        if kind == "boolean":
            return draw.rng.random() < 0.5
        if kind == "timestamp":
            fmt = shape.get("timestampFormat") or ("unixTimestamp" if where == "json" else "iso8601")
            return draw.epoch() if fmt == "unixTimestamp" else draw.timestamp()
        if kind == "blob":
            return draw.blob()
        return None

    def json_value(self, name: str, ref: Mapping[str, Any], depth: int) -> Any:
        shape = self.shapes[ref["shape"]]
        kind = shape["type"]
        if kind == "structure":
            if depth >= 2 or shape.get("document"):
                return None
            return self.json_struct(shape, depth + 1)
        if kind == "list":
            items = [self.json_value(name, shape["member"], depth) for _ in range(self.draw.rng.randint(1, 3))]
            items = [i for i in items if i is not None]
            return items or None
        if kind == "map":
            if depth >= 2:
                return None
            out = {}
            for _ in range(self.draw.rng.randint(1, 2)):
                key = self.scalar("Key", self.shapes[shape["key"]["shape"]], "json")
                value = self.json_value("Value", shape["value"], depth + 1)
                if value is not None:
                    out[str(key)] = value
            return out or None
        return self.scalar(name, shape, "json")

    def json_struct(self, shape: Mapping[str, Any], depth: int) -> dict[str, Any]:
        out = {}
        for m in self.pick(shape, depth):
            ref = shape["members"][m]
            value = self.json_value(m, ref, depth)
            if value is not None:
                out[ref.get("locationName", m)] = value
        return out

    def form_value(self, prefix: str, ref: Mapping[str, Any], depth: int, out: dict[str, str], strings: set[str]) -> None:
        """Flatten one member as the query (``Name.member.1``) or ec2 (``Name.1``) serialiser does."""
        shape = self.shapes[ref["shape"]]
        kind, ec2 = shape["type"], self.protocol == "ec2"
        if kind == "structure":
            if depth >= 2:
                return
            for m in self.pick(shape, depth + 1):
                sub = shape["members"][m]
                key = sub.get("queryName") or (sub.get("locationName", m)[:1].upper() + sub.get("locationName", m)[1:] if ec2
                                               else sub.get("locationName", m))
                self.form_value(f"{prefix}.{key}", sub, depth + 1, out, strings)
        elif kind == "list":
            member = shape["member"]
            for i in range(1, self.draw.rng.randint(1, 3) + 1):
                if ec2 or shape.get("flattened"):
                    self.form_value(f"{prefix}.{i}", member, depth, out, strings)
                else:
                    self.form_value(f"{prefix}.{member.get('locationName', 'member')}.{i}", member, depth, out, strings)
        elif kind == "map":
            base = prefix if shape.get("flattened") else f"{prefix}.entry"
            for i in range(1, self.draw.rng.randint(1, 2) + 1):
                key_name = shape["key"].get("locationName", "key")
                value_name = shape["value"].get("locationName", "value")
                self.form_value(f"{base}.{i}.{key_name}", shape["key"], depth, out, strings)
                self.form_value(f"{base}.{i}.{value_name}", shape["value"], depth + 1, out, strings)
        else:
            value = self.scalar(prefix.rsplit(".", 1)[-1], shape, "query")
            if value is None:
                return
            out[prefix] = ("true" if value else "false") if isinstance(value, bool) else str(value)
            if kind == "string":
                strings.add(prefix)

    def query_value(self, name: str, ref: Mapping[str, Any]) -> list[str]:
        shape = self.shapes[ref["shape"]]
        if shape["type"] == "list":
            inner = self.shapes[shape["member"]["shape"]]
            return [str(self.scalar(name, inner, "query")) for _ in range(self.draw.rng.randint(1, 2))] \
                if inner["type"] not in ("structure", "list", "map") else []
        if shape["type"] in ("structure", "map"):
            return []
        value = self.scalar(name, shape, "query")
        return [] if value is None else [("true" if value else "false") if isinstance(value, bool) else str(value)]


def botocore_operation(service: str, model: Mapping[str, Any], op_name: str, draw: Draw) -> dict[str, Any] | None:
    """One request of ``op_name`` as the SDK sends it, or None when the protocol's body is not JSON or a form."""
    protocol = _protocol(model)
    if protocol is None:
        return None
    op = model["operations"][op_name]
    boto = _Boto(service, model, draw, protocol)
    in_shape = boto.shapes[op["input"]["shape"]] if "input" in op else {"members": {}}
    members = in_shape.get("members", {})
    app = service
    query: list[list[str]] = []
    string_query: set[str] = set()
    body: Any = None
    body_kind: str | None = None
    string_body: set[str] = set()
    content_type = None

    if protocol in ("query", "ec2"):
        method, path = "POST", "/"
        form = {"Action": op_name, "Version": str(model["metadata"]["apiVersion"])}
        for m in boto.pick(in_shape, 0):
            ref = members[m]
            key = ref.get("queryName") or ((ref.get("locationName", m)[:1].upper() + ref.get("locationName", m)[1:])
                                           if protocol == "ec2" else ref.get("locationName", m))
            boto.form_value(key, ref, 0, form, string_body)
        body, body_kind = form, "form"
    elif protocol == "json":
        method, path = "POST", "/"
        body, body_kind = boto.json_struct(in_shape, 0), "json"
        string_body = {members[m].get("locationName", m) for m in members if boto.is_string(members[m])}
    else:
        http = op.get("http", {})
        method = http.get("method", "POST")
        uri = http.get("requestUri", "/")
        path, _, static = uri.partition("?")
        for pair in filter(None, static.split("&")):
            name, _, value = pair.partition("=")
            query.append([name, value])
        by_location = {ref.get("locationName", m): (m, ref) for m, ref in members.items() if ref.get("location") == "uri"}

        def fill(match: re.Match[str]) -> str:
            label = match.group(1).rstrip("+")
            m_ref = by_location.get(label)
            shape = boto.shapes[m_ref[1]["shape"]] if m_ref else {"type": "string"}
            if shape.get("enum") or shape["type"] in ("integer", "long"):
                return str(boto.scalar(label, shape, "uri"))
            return placeholder(label)

        path = re.sub(r"\{([^}]+)\}", fill, path)
        chosen = set(boto.pick(in_shape, 0))
        for m, ref in members.items():
            if ref.get("location") == "querystring" and (m in chosen or m in in_shape.get("required", [])):
                name = ref.get("locationName", m)
                for value in boto.query_value(m, ref):
                    query.append([name, value])
                if boto.is_string(ref):
                    string_query.add(name)
        payload = in_shape.get("payload")
        if payload:
            ref = members[payload]
            shape = boto.shapes[ref["shape"]]
            if protocol == "rest-json" and shape["type"] == "structure" and payload in chosen | set(in_shape.get("required", [])):
                body = boto.json_struct(shape, 0)
                string_body = {shape["members"][m].get("locationName", m) for m in shape.get("members", {})
                               if boto.is_string(shape["members"][m])}
            elif protocol == "rest-xml" and (payload in in_shape.get("required", []) or shape["type"] != "structure"):
                return None
        else:
            body_members = {m: ref for m, ref in members.items() if "location" not in ref}
            if body_members and protocol == "rest-xml":
                if any(m in chosen for m in body_members) or any(m in body_members for m in in_shape.get("required", [])):
                    return None
            elif body_members and method not in ("GET", "HEAD", "DELETE"):
                body = boto.json_struct({"members": body_members, "required": in_shape.get("required", [])}, 0)
                string_body = {ref.get("locationName", m) for m, ref in body_members.items() if boto.is_string(ref)}
        if body is not None:
            body_kind = "json"
        elif method in ("POST", "PUT", "PATCH") and protocol == "rest-json":
            body, body_kind = {}, "json"
    if isinstance(body, dict) and body_kind == "json":
        body = cut_body(body)
        if body is None:
            return None
    if isinstance(body, dict) and body_kind == "form" and len(json.dumps(body).encode()) > MAX_BODY:
        return None
    group = "api" if method in ("GET", "HEAD") or read_only(op_name) else "write"
    shape_out: dict[str, Any] = {
        "app": app, "group": group, "method": method, "path": path or "/", "query": query,
        "body_kind": body_kind, "body": body, "context": "xhr" if group == "api" else "xhr-write",
        "slots": _string_slots(query, string_query, body_kind, body, string_body - {"Action", "Version"}, path or "/"),
    }
    if content_type:
        shape_out["content_type"] = content_type
    return shape_out


def botocore_shapes(services: Mapping[str, Mapping[str, Any]], words: Sequence[str], seed: int = BOTOCORE_SEED,
                    per_service: int = BOTOCORE_OPS_PER_SERVICE,
                    form_per_service: int = BOTOCORE_FORM_OPS_PER_SERVICE) -> list[dict[str, Any]]:
    """Up to ``per_service`` operations (``form_per_service`` for the form protocols) of every service whose
    protocol sends JSON, a form or no body."""
    rng = random.Random(seed)
    draw = Draw(rng, words)
    out = []
    for service in sorted(services):
        model = services[service]
        if _protocol(model) is None:
            continue
        ops = sorted(model.get("operations", {}))
        rng.shuffle(ops)
        taken, limit = 0, per_service if _protocol(model) not in ("query", "ec2") else form_per_service
        for op_name in ops:
            if taken >= limit:
                break
            if model["operations"][op_name].get("deprecated"):
                continue
            shape = botocore_operation(service, model, op_name, draw)
            if shape is not None:
                out.append(shape)
                taken += 1
    return _dedupe(out)


def botocore_file(args: argparse.Namespace) -> dict[str, Any]:
    if not args.botocore_wheel:
        raise SystemExit(f"--botocore-wheel is needed: pip download botocore=={BOTOCORE_VERSION} --no-deps -d /tmp/wheels")
    wheel = Path(args.botocore_wheel)
    if f"botocore-{BOTOCORE_VERSION}-" not in wheel.name:
        raise SystemExit(f"{wheel.name} is not botocore {BOTOCORE_VERSION}")
    shapes = botocore_shapes(botocore_services(wheel), load_words())
    return {"source": "botocore", "half": "a", "from": f"botocore=={BOTOCORE_VERSION}", "licence": "Apache-2.0",
            "shapes": shapes}


# ---------------------------------------------------------------------------------------------- GitHub (OpenAPI)

GITHUB_SEED = 21
GITHUB_VARIANTS = 4


class _OpenAPI:
    """Values from one OpenAPI 3 document: documented examples first, then enums, defaults and types."""

    def __init__(self, spec: Mapping[str, Any], draw: Draw) -> None:
        self.spec, self.draw = spec, draw

    def resolve(self, node: Any) -> Any:
        seen = 0
        while isinstance(node, dict) and "$ref" in node and seen < 20:
            target: Any = self.spec
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node, seen = target, seen + 1
        return node

    def value(self, name: str, schema: Any, depth: int) -> Any:
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        for key in ("oneOf", "anyOf"):
            if schema.get(key):
                return self.value(name, schema[key][0], depth)
        if schema.get("allOf"):
            return self.value(name, self.merged(schema), depth)
        if "example" in schema and not isinstance(schema["example"], (dict, list)) and schema["example"] is not None:
            return schema["example"]
        if schema.get("enum"):
            choices = [e for e in schema["enum"] if e is not None]
            return self.draw.rng.choice(choices) if choices else None
        if "default" in schema and schema["default"] is not None and not isinstance(schema["default"], (dict, list)):
            return schema["default"]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind == "object" or "properties" in schema:
            if depth >= 2:
                return None
            return self.obj(schema, depth + 1)
        if kind == "array":
            items = [self.value(name, schema.get("items", {}), depth) for _ in range(self.draw.rng.randint(1, 3))]
            items = [i for i in items if i is not None]
            return items or None
        if kind == "integer":
            return self.draw.integer(schema.get("minimum"), schema.get("maximum"))
        if kind == "number":
            return self.draw.number(schema.get("minimum"), schema.get("maximum"))
        if kind == "boolean":
            return self.draw.rng.random() < 0.5
        if kind == "string":
            fmt = schema.get("format")
            if fmt == "date-time":
                return self.draw.timestamp()
            if fmt == "date":
                return self.draw.timestamp()[:10]
            if fmt == "uri":
                return f"https://example.com/{self.draw.word()}"
            if fmt == "email":
                return f"{self.draw.word()}@example.com"
            return self.draw.bounded_string(name, schema.get("pattern"), schema.get("minLength"), schema.get("maxLength"),
                                            "github")
        return None

    def merged(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        """An object schema with the properties and required names of its ``allOf`` parts (first ``oneOf``)."""
        schema = self.resolve(schema)
        for key in ("oneOf", "anyOf"):
            if schema.get(key) and not schema.get("properties"):
                return self.merged(schema[key][0])
        out: dict[str, Any] = {"type": "object", "properties": dict(schema.get("properties", {})),
                               "required": list(schema.get("required", []))}
        for part in schema.get("allOf", []):
            part = self.merged(part)
            out["properties"].update(part["properties"])
            out["required"] += part["required"]
        return out

    def obj(self, schema: Mapping[str, Any], depth: int, rich: bool = False) -> dict[str, Any]:
        props = schema.get("properties", {})
        required = [p for p in schema.get("required", []) if p in props]
        rate = 0.6 if rich else 0.2
        keep = [p for p in props if p in required or self.draw.rng.random() < rate][: 10 if depth <= 1 else 5]
        out = {}
        for p in keep:
            prop = self.resolve(props[p])
            if isinstance(prop, dict) and (prop.get("deprecated") or prop.get("readOnly")):
                continue
            value = self.value(p, prop, depth)
            if value is not None:
                out[p] = value
        return out

    def is_string(self, schema: Any) -> bool:
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return False
        choices = schema.get("oneOf") or schema.get("anyOf")
        if choices:
            return self.is_string(choices[0])
        kind = schema.get("type")
        if kind is None and schema.get("enum"):
            return all(isinstance(e, str) for e in schema["enum"] if e is not None)
        return kind == "string" or (isinstance(kind, list) and "string" in kind)


def github_operation(spec: Mapping[str, Any], path: str, method: str, draw: Draw, variant: int) -> dict[str, Any] | None:
    """Request ``variant`` of one operation: variant 0 sends what is required, later ones documented examples and
    optional parameters."""
    api = _OpenAPI(spec, draw)
    item = spec["paths"][path]
    op = item[method]
    params = [api.resolve(p) for p in [*item.get("parameters", []), *op.get("parameters", [])]]
    by_name = {p["name"]: p for p in params if p.get("in") == "path"}

    def fill(match: re.Match[str]) -> str:
        param = by_name.get(match.group(1), {})
        schema = api.resolve(param.get("schema", {}))
        if schema.get("enum"):
            return str(draw.rng.choice(schema["enum"]))
        if schema.get("type") == "integer":
            return placeholder(match.group(1) + "_id")
        return placeholder(match.group(1))

    url = re.sub(r"\{([^}]+)\}", fill, path)
    query: list[list[str]] = []
    string_query: set[str] = set()
    for p in params:
        if p.get("in") != "query":
            continue
        if not p.get("required") and draw.rng.random() >= (0.25 if variant == 0 else 0.55):
            continue
        schema = api.resolve(p.get("schema", {}))
        if "example" in p and not isinstance(p["example"], (dict, list)):
            value: Any = p["example"]
        else:
            value = api.value(p["name"], schema, 1)
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if value is None or isinstance(value, dict):
            continue
        query.append([p["name"], ("true" if value else "false") if isinstance(value, bool) else str(value)])
        if api.is_string(schema):
            string_query.add(p["name"])
    body: Any = None
    body_kind = None
    string_body: set[str] = set()
    content = api.resolve(op.get("requestBody", {})).get("content", {})
    media = content.get("application/json")
    if media is not None:
        schema = api.resolve(media.get("schema", {}))
        examples = [api.resolve(e).get("value") for _, e in sorted(media.get("examples", {}).items())]
        examples = [e for e in examples if isinstance(e, dict)]
        if variant > 0 and examples:
            body = examples[(variant - 1) % len(examples)]
        elif isinstance(media.get("example"), dict) and variant > 0:
            body = media["example"]
        else:
            body = api.obj(api.merged(schema), 1, rich=variant > 0)
        if not isinstance(body, dict):
            return None
        body = cut_body(body)
        if body is None:
            return None
        body_kind = "json"
        props = api.merged(schema)["properties"]
        string_body = {k for k, v in body.items() if isinstance(v, str) and (k not in props or api.is_string(props[k]))}
    elif content:
        return None
    route = re.sub(r"\{[^}]+\}", "", path)
    if method.upper() in ("GET", "HEAD"):
        group = "search" if route.startswith("/search/") else "api"
    else:
        group = "write"
    return {
        "app": "github", "group": group, "method": method.upper(), "path": url, "query": query,
        "body_kind": body_kind, "body": body, "context": "xhr" if group in ("api", "search") else "xhr-write",
        "slots": _string_slots(query, string_query, body_kind, body, string_body, url),
    }


def github_shapes(spec: Mapping[str, Any], words: Sequence[str], seed: int = GITHUB_SEED,
                  variants: int = GITHUB_VARIANTS) -> list[dict[str, Any]]:
    """``variants`` requests of every operation of the description, identical ones kept once."""
    draw = Draw(random.Random(seed), words)
    out = []
    for path in sorted(spec["paths"]):
        for method in ("get", "post", "put", "patch", "delete"):
            if method not in spec["paths"][path]:
                continue
            for variant in range(variants):
                shape = github_operation(spec, path, method, draw, variant)
                if shape is not None:
                    out.append(shape)
    return _dedupe(out)


def github_file(args: argparse.Namespace) -> dict[str, Any]:
    if not args.octokit_openapi:
        raise SystemExit(f"--octokit-openapi is needed: npm pack @octokit/openapi@{OCTOKIT_OPENAPI_VERSION}, unpacked")
    root = Path(args.octokit_openapi)
    version = json.loads((root / "package.json").read_text())["version"]
    if version != OCTOKIT_OPENAPI_VERSION:
        raise SystemExit(f"{root} holds @octokit/openapi {version}, not {OCTOKIT_OPENAPI_VERSION}")
    spec = json.loads((root / "generated" / "api.github.com.json").read_text())
    shapes = github_shapes(spec, load_words())
    return {"source": "github", "half": "b", "from": f"@octokit/openapi@{OCTOKIT_OPENAPI_VERSION}", "licence": "MIT",
            "shapes": shapes}


# ---------------------------------------------------------------------------------------------- command line

SOURCES: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "botocore": botocore_file,
    "github": github_file,
}
KINDS: dict[str, tuple[str, ...]] = {
    "api": ("botocore", "github"),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", default=[],
                   help=f"a source ({', '.join(SOURCES)}) or a kind ({', '.join(KINDS)}); repeatable; all when absent")
    p.add_argument("--out", default=str(DATA), help="folder the apps-<source>.json files go to")
    p.add_argument("--botocore-wheel", help=f"botocore-{BOTOCORE_VERSION}-py3-none-any.whl")
    p.add_argument("--octokit-openapi", help="the unpacked npm package @octokit/openapi (its package/ folder)")
    return p


def selected(only: Sequence[str]) -> list[str]:
    if not only:
        return list(SOURCES)
    names: list[str] = []
    for item in (x for arg in only for x in arg.split(",") if x):
        if item in KINDS:
            names += KINDS[item]
        elif item in SOURCES:
            names.append(item)
        else:
            raise SystemExit(f"unknown source or kind {item!r}")
    return list(dict.fromkeys(names))


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    for name in selected(args.only):
        obj = SOURCES[name](args)
        path = write_source(Path(args.out), obj["source"], obj["half"], obj["from"], obj["licence"], obj["shapes"])
        print(f"{path}: {len(obj['shapes'])} shapes, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
