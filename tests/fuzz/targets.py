"""Fuzz targets: one function of ``bytes`` per surface, each asserting what must hold for any input.

- ``head``: the request-head parser and the forwarded header block (gateway/proxy/downstream.py): any bytes
  fed to a client connection end in a parse, a 4xx/5xx of the gateway's own, never an escaped exception or a
  500 ``internal``; what would go upstream never carries a hop-by-hop field, a client's X-Clefgate-*, an
  underscore twin of a guarded field, the pass cookie, a bare CR/LF, or loses Host.
- ``features``: a request record -> Features -> the model input (gateway/features): ids in the vocabulary,
  at most MAX_TOKENS, a finite numeric vector, the decision-log JSON round trip gives the same ids.
- ``rules``: rule conditions (gateway/rules): a fuzzed rule compiles or is refused with ConfigError, and the
  shipped table plus the fuzzed one evaluate any request to None, a Verdict or a ScoreRequest.
- ``decision``: the decision API's validation (gateway/jev.py): any body is refused with an ApiError of 4xx,
  or parses into items whose text is valid Unicode and whose request records build a model input.

``tests/fuzz/run.py`` drives them with atheris (coverage-guided); ``tests/fuzz/test_fuzz_smoke.py`` with
Hypothesis for a short run in ``make test``, and replays every saved finding.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent


class _Provider:
    """Reads typed values off the fuzz bytes (a FuzzedDataProvider that works without atheris too)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def bytes(self, most: int) -> bytes:
        n = min(self.byte() % (most + 1), len(self.data) - self.pos)
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def text(self, most: int) -> str:
        raw = self.bytes(most)
        mode = self.byte() % 3
        if mode == 0:
            return raw.decode("latin-1")
        if mode == 1:
            return raw.decode("utf-8", "replace")
        return raw.decode("utf-16-le", "surrogatepass") if len(raw) % 2 == 0 and _surrogates_ok(raw) else raw.decode("latin-1")

    def pick(self, choices: list[Any] | tuple[Any, ...]) -> Any:
        return choices[self.byte() % len(choices)]

    def rest(self) -> bytes:
        out = self.data[self.pos:]
        self.pos = len(self.data)
        return out


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogates_ok(raw: bytes) -> bool:
    try:
        raw.decode("utf-16-le", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------------------- request head

_HEAD_STATE: dict[str, Any] = {}
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
NEVER_FORWARDED = {b"connection", b"keep-alive", b"proxy-connection", b"te", b"transfer-encoding", b"upgrade", b"trailer",
                   b"proxy-authorization", b"proxy-authenticate", b"content-length", b"expect"}


def _head_setup() -> dict[str, Any]:
    """One event loop, runtime and data plane, reused by every input (rules default to block: nothing goes upstream)."""
    if _HEAD_STATE:
        return _HEAD_STATE
    from gateway import config as configmod
    from gateway.proxy import DataPlane
    from gateway.proxy.downstream import ClientConnection
    from gateway.runtime import RuntimeRef, build_runtime

    loop = asyncio.new_event_loop()
    cfg = configmod.validate({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"default": "block"},
                              "logging": {"access_log": "", "level": "error"}, "trusted_proxies": ["127.0.0.0/8"],
                              "limits": {"max_pipelined": 4}})
    runtime = loop.run_until_complete(build_runtime(cfg))
    plane = DataPlane(RuntimeRef(runtime), loop)
    seen: list[Any] = []

    class Recording(ClientConnection):
        def on_headers_complete(self) -> None:
            try:
                super().on_headers_complete()
            finally:
                if self.reading is not None:
                    seen.append(self.reading)

    _HEAD_STATE.update(loop=loop, plane=plane, conn=Recording, seen=seen)
    return _HEAD_STATE


class _Transport(asyncio.Transport):
    """A client socket that keeps what the gateway wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.out += line

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


def check_forwarded_block(fwd: bytes, id_header: bytes = b"x-request-id") -> None:
    """What the gateway would send upstream as header fields (each behind CRLF) is well formed and clean."""
    from gateway.proxy.http1 import underscore_twin

    assert fwd == b"" or fwd.startswith(b"\r\n"), fwd[:80]
    names = []
    for line in fwd.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        value = value.strip(b" \t")
        assert sep and _TOKEN.fullmatch(name), line[:120]
        assert b"\r" not in value and b"\n" not in value and b"\x00" not in value, line[:120]
        low = name.lower()
        names.append(low)
        assert low not in NEVER_FORWARDED, line[:120]
        assert not low.startswith(b"x-clefgate-"), line[:120]
        assert not underscore_twin(low.decode("latin-1"), id_header.decode()), line[:120]
        if low == b"cookie":
            pairs = [p.strip(b" \t").split(b"=", 1)[0].rstrip(b" \t") for p in value.split(b";")]
            assert b"clefgate_pass" not in pairs, line[:120]
    assert names.count(b"host") <= 1, names


def head(data: bytes) -> None:
    """Feed ``data`` to a client connection in one or two pieces."""
    st = _head_setup()
    loop, plane, seen = st["loop"], st["plane"], st["seen"]
    seen.clear()
    transport = _Transport()

    async def run() -> None:
        conn = st["conn"](plane)
        conn.connection_made(transport)
        cut = data[0] % (len(data) + 1) if data and data[0] < 64 else len(data)
        for piece in (data[:cut], data[cut:]):
            if piece and not conn.gone:
                conn.data_received(piece)
        await asyncio.sleep(0)
        conn.connection_lost(None)

    loop.run_until_complete(run())
    out = bytes(transport.out)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", out)
    assert b"500" not in statuses, out[:300]
    for ex in seen:
        fwd = getattr(ex, "fwd", b"")
        if fwd:
            check_forwarded_block(fwd)


# ---------------------------------------------------------------------------- features

_METHODS = ["GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE", "PROPFIND", ""]
_NAMES = ["Host", "User-Agent", "Accept", "Accept-Language", "Accept-Encoding", "Cookie", "Referer", "Content-Type",
          "Content-Length", "X-Forwarded-For", "Sec-Fetch-Mode", "Sec-CH-UA", "Authorization", "Origin", "Connection", "X-Custom"]


def record_from(p: _Provider) -> dict[str, Any]:
    headers = []
    for _ in range(p.byte() % 12):
        name = p.pick(_NAMES) if p.byte() % 4 else p.text(24)
        headers.append([name, p.text(120)])
    target = p.text(200)
    if p.byte() % 3:
        target = "/" + target
    return {"method": p.pick(_METHODS) if p.byte() % 5 else p.text(12), "path": target,
            "http_version": p.pick(["1.1", "1.0", "HTTP/1.1", "2", ""]), "headers": headers,
            "body": p.pick([None, p.text(600)]), "client_ip": p.pick(["203.0.113.7", "2001:db8::1", "", p.text(40)])}


def features(data: bytes) -> None:
    from gateway import features as feat
    from gateway.features import ModelInput, from_record, model_input, numeric_vector, serialize

    record = record_from(_Provider(data))
    try:
        f = from_record(record)
    except UnicodeEncodeError:
        # the contract: text that is not Unicode (a lone surrogate that is not an escaped byte) is refused with a
        # ValueError (replay counts the line unreadable, the decision API answers 400); nothing else may raise
        assert not _unicode(json.dumps(record, ensure_ascii=False)), record
        return
    text = serialize(f)
    assert isinstance(text, str)
    mi = model_input(f)
    again = model_input(f)
    assert mi.text == again.text and (mi.ids == again.ids).all() and mi.numeric == again.numeric
    assert mi.ids.ndim == 1 and 0 < len(mi.ids) <= feat.MAX_TOKENS, len(mi.ids)
    assert int(mi.ids.min()) >= 0 and int(mi.ids.max()) < feat.VOCAB_SIZE
    assert len(mi.numeric) == feat.NUM_FEATURES and all(math.isfinite(v) for v in mi.numeric), mi.numeric
    assert list(mi.numeric) == numeric_vector(f)
    line = json.dumps(mi.to_json(), allow_nan=False, ensure_ascii=False)
    back = ModelInput.from_json(json.loads(line))
    assert back is not None and (back.ids == mi.ids).all()
    mi.cache_key()


# ---------------------------------------------------------------------------- rules

_RULE_STATE: dict[str, Any] = {}
_CONDITION_VALUES: list[Any] = ["/", "/a/*", "~^/x", "GET", ["GET", "POST"], 3, -1, ">= 10", "< 0.5", "==1", True, None, {},
                                {"present": ["x-a"]}, {"x-a": "~b"}, ["203.0.113.0/24"], "list:crawlers", "*.example", "~(", "~a{99999}"]


def _rule_setup() -> dict[str, Any]:
    if _RULE_STATE:
        return _RULE_STATE
    from gateway import config as configmod
    from gateway.clients import ClientState
    from gateway.payload import PayloadInspector, signatures_for
    from gateway.rules import RuleOptions, load

    # decided without an event loop: nothing is looked up in DNS, a claimed crawler's address is unverified by name
    state = ClientState(configmod.ClientsConfig(reverse_dns_timeout_s=0))
    injections = str(ROOT / "rules" / "injections.yaml")
    shipped = load([str(ROOT / "rules" / "default.yaml")], RuleOptions(), state)
    fallback = load([injections], RuleOptions(), state)
    # the fallback rules as the pipeline compiles them: their signatures read value by value (every location, uploads too)
    cfg = configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "rules": {"fallback_files": [injections]},
                              "challenge": {"dev_generate_secret": True}}, str(ROOT / "clefgate.yaml"))
    reader = PayloadInspector(cfg, signatures_for(cfg, cfg.rules.fallback_files), fallback=True)
    by_value = load([injections], RuleOptions(signatures=reader.matched), state)
    folder = Path(tempfile.mkdtemp(prefix="clefgate-fuzz-rules-"))
    _RULE_STATE.update(shipped=shipped, fallback=fallback, by_value=by_value, state=state, folder=folder)
    return _RULE_STATE


def rules(data: bytes) -> None:
    import yaml

    from gateway.config import ConfigError
    from gateway.features import from_record
    from gateway.rules import RuleOptions, load
    from gateway.rules.conditions import CONDITION_KEYS
    from gateway.verdict import ScoreRequest, Verdict

    st = _rule_setup()
    p = _Provider(data)
    rule: dict[str, Any] = {"name": "fuzzed", "action": p.pick(["block", "challenge", "allow", "score", "forward", "teapot"])}
    for _ in range(1 + p.byte() % 3):
        key = p.pick(CONDITION_KEYS)
        rule[key] = p.pick(_CONDITION_VALUES) if p.byte() % 2 else p.text(40)
    if p.byte() % 4 == 0:
        rule["any"] = [{p.pick(CONDITION_KEYS): p.text(30)}]
    path = st["folder"] / "fuzzed.yaml"
    path.write_text(yaml.safe_dump({"rules": [rule]}, allow_unicode=True), encoding="utf-8")
    tables = [st["shipped"], st["fallback"], st["by_value"]]
    try:
        tables.append(load([str(path)], RuleOptions(), st["state"]))
    except ConfigError as exc:
        assert exc.problems and all(isinstance(m, str) for m in exc.problems)
    try:
        f = from_record(record_from(p))
    except UnicodeEncodeError:  # a lone surrogate: refused (see ``features``), nothing to evaluate
        return
    for table in tables:
        out = table.evaluate(f)
        assert out is None or isinstance(out, (Verdict, ScoreRequest)), out


# ---------------------------------------------------------------------------- decision API

def _json_from(p: _Provider, depth: int = 0) -> Any:
    kind = p.byte() % (9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return bool(p.byte() & 1)
    if kind == 2:
        return p.pick([0, 1, -1, 7, 4096, 4097, 1 << 70, 0.5, 1e308, float("nan"), float("inf")])
    if kind in (3, 4, 5):
        return p.text(60) if p.byte() % 4 else p.pick(["GET", "/", "clef-flash", "clef", "class", "human", "x\ud800"])
    if kind == 6:
        return [_json_from(p, depth + 1) for _ in range(p.byte() % 4)]
    keys = ["method", "path", "headers", "body", "http_version", "client_ip", "state", "questions", "id", "type", "options",
            "criteria", "model", "input", "max_tokens", "task", "features", "candidates"]
    return {(p.pick(keys) if p.byte() % 5 else p.text(10)): _json_from(p, depth + 1) for _ in range(p.byte() % 5)}


def _decision_body(p: _Provider) -> Any:
    shape = p.byte() % 5
    if shape == 0:
        return {"state": record_from(p) if p.byte() % 2 else _json_from(p), "questions": [
            {"id": "class", "options": ["human", "good_bot", "bad_bot", "attack"]}] if p.byte() % 2 else _json_from(p),
            **({"model": _json_from(p)} if p.byte() % 4 == 0 else {})}
    if shape == 1:
        return {"input": p.text(200) if p.byte() % 3 else _json_from(p), **({"max_tokens": _json_from(p)} if p.byte() % 2 else {})}
    if shape == 2:
        return {"task": p.text(20), "features": _json_from(p), "candidates": _json_from(p) if p.byte() % 2 else ["a", "b"]}
    if shape == 3:
        return [_decision_body(p) for _ in range(p.byte() % 3)]
    return _json_from(p)


def decision(data: bytes) -> None:
    from gateway.config import JevConfig
    from gateway.features import from_record, model_input
    from gateway.jev import ApiError, check_values, parse_item

    p = _Provider(data)
    if p.byte() % 2:
        raw = p.rest()  # the raw body, as the API reads it
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return  # answered 400 invalid_json
    else:
        body = _decision_body(p)
    cfg = JevConfig(max_state_bytes=4096)
    try:
        check_values(body, "")
        if isinstance(body, list):
            items = [parse_item(b, f"[{i}].", cfg) for i, b in enumerate(body)]
        else:
            items = [parse_item(body, "", cfg)]
    except ApiError as err:
        assert 400 <= err.status < 500 and err.code and err.message, (err.status, err.code)
        return
    for item in items:
        item.state.encode("utf-8")  # what the models read is valid Unicode
        for q in item.questions:
            for text in (q.id, q.criteria, *q.options):
                text.encode("utf-8")
        if item.record is not None:
            model_input(from_record(item.record))


TARGETS: dict[str, Callable[[bytes], None]] = {"head": head, "features": features, "rules": rules, "decision": decision}
