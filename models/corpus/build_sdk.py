"""Extract real-application request shapes by running real client software (``data/apps-<source>.json``).

The payload model blocks people on shapes its generator never produced: telemetry beacons and the rich
text that editors post. Writing those shapes from belief would teach the generator our beliefs, so this
script runs the software and records what it sends (format: the ``apps-*.json`` section of
``data/SOURCES.md``):

- ``sdk-telemetry`` (half a): ``sentry-sdk`` inside a small in-memory Django app (its Django, logging and
  stdlib-HTTP integrations make the breadcrumbs and spans; errors are raised by the standard library), a
  capturing transport records the envelopes as the SDK serialises them; ``posthog`` posting its batches to an
  ``http.server`` on 127.0.0.1; OpenTelemetry spans encoded by the OTLP exporter's own encoder as OTLP/JSON.
- ``rendered-posts`` (half b): the long descriptions of the permissively licensed distributions installed
  next to this script, rendered by ``markdown-it-py`` or ``docutils`` and cut into post-sized chunks, posted
  the way forum, comment and CMS editors post them; Django admin change forms built by Django's own forms.

Nothing leaves the machine: the SDKs write to objects in memory or to 127.0.0.1. Ids, clocks, thread ids and
object addresses, which differ on every run, are replaced by values from a fixed-seed ``random.Random`` so
the files are byte-identical on every run on the same set of installed packages.

    python -m models.corpus.build_sdk
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import linecache
import random
import re
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

from models.corpus.build_apps import DATA, MAX_BODY, load_words, write_source

MAX_SLOTS = 8


def _raw_slot(body: str, value: Any) -> str | None:
    """The JSON-escaped form of a string value when it appears as such in ``body``."""
    if not isinstance(value, str) or len(value) < 2:
        return None
    for ensure_ascii in (False, True):
        esc = json.dumps(value, ensure_ascii=ensure_ascii)[1:-1]
        if esc and esc in body:
            return esc
    return None


def _slots(body: str, values: list[Any]) -> list[list[str]]:
    out: list[list[str]] = []
    seen: set[str] = set()
    for v in values:
        s = _raw_slot(body, v)
        if s is not None and s not in seen:
            seen.add(s)
            out.append(["raw", s])
        if len(out) >= MAX_SLOTS:
            break
    return out


# ---------------------------------------------------------------------------------------------- run noise

_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|\+00:00)?$")
_HEX = re.compile(r"^(?:[0-9a-f]{32}|[0-9a-f]{16})$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_ADDR = re.compile(r"0x[0-9a-f]{8,}")


class Denoise:
    """Replaces what differs between runs (ids, clocks, thread ids, addresses) by seeded values.

    One instance per source; a value seen twice maps to the same replacement, so a trace id in an envelope
    header still equals the one in the event."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.addresses = random.Random(seed + 1)   # per occurrence: object reuse differs between runs
        self.ids: dict[str, str] = {}
        self.clock = datetime(2025, 3, 3, 9, 0, 0, tzinfo=UTC)

    def _id(self, v: str) -> str:
        if v not in self.ids:
            if "-" in v:
                b = self.rng.getrandbits(128)
                h = f"{b:032x}"
                h = h[:12] + "4" + h[13:16] + "89ab"[self.rng.randrange(4)] + h[17:]
                self.ids[v] = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            else:
                self.ids[v] = f"{self.rng.getrandbits(len(v) * 4):0{len(v)}x}"
        return self.ids[v]

    def envelope_clock(self) -> Callable[[list[str]], dict[str, str]]:
        """A mapping for one request: distinct timestamps keep their order, spaced by seeded steps."""
        self.clock += timedelta(seconds=self.rng.randint(40, 9000), microseconds=self.rng.randrange(10**6))

        def remap(stamps: list[str]) -> dict[str, str]:
            out: dict[str, str] = {}
            t = self.clock
            for s in sorted(set(stamps)):
                t += timedelta(microseconds=self.rng.randint(30, 90000))
                m = _ISO.match(s)
                assert m is not None
                frac = m.group(7) or ""
                text = t.strftime("%Y-%m-%dT%H:%M:%S")
                if frac:
                    text += f".{t.microsecond:06d}"[: len(frac)]
                out[s] = text + (m.group(8) or "")
            self.clock = t
            return out

        return remap

    def fix(self, obj: Any) -> Any:
        """Seeded replacements in a JSON-like object (ids, addresses, thread ids, sample draws, clocks)."""
        stamps: list[str] = []

        def collect(o: Any) -> None:
            if isinstance(o, dict):
                for v in o.values():
                    collect(v)
            elif isinstance(o, list):
                for v in o:
                    collect(v)
            elif isinstance(o, str) and _ISO.match(o):
                stamps.append(o)

        collect(obj)
        table = self.envelope_clock()(stamps)
        return self._walk(obj, table, None)

    def _walk(self, o: Any, table: dict[str, str], key: str | None) -> Any:
        if isinstance(o, dict):
            return {k: self._walk(v, table, k) for k, v in o.items()}
        if isinstance(o, list):
            return [self._walk(v, table, key) for v in o]
        if isinstance(o, str):
            if o in table:
                return table[o]
            if key == "thread.id" or key == "sample_rand":
                return self._seeded(key, o)
            if _HEX.match(o) or _UUID.match(o):
                return self._id(o)
            return _ADDR.sub(lambda m: f"0x7f{self.addresses.getrandbits(40):010x}", o)
        if isinstance(o, float) and key in ("duration", "sample_rand"):
            return round(self.rng.uniform(0.001, 4.0), 3)
        if isinstance(o, int) and not isinstance(o, bool) and key in ("thread_id", "tid"):
            return int(self._seeded("thread.id", str(o)))
        return o

    def _seeded(self, key: str, o: str) -> str:
        k = key + ":" + o
        if k not in self.ids:
            if key == "sample_rand":
                self.ids[k] = f"{self.rng.random():.6f}"
            else:
                self.ids[k] = str(self.rng.randrange(139_900_000_000_000, 140_600_000_000_000))
        return self.ids[k]


# ---------------------------------------------------------------------------------------------- sentry

# The application the SDKs watch: a few views of a small shop, each passing request input to a standard
# library call that raises on bad input, so the stack traces end in real standard-library frames.
_APP_SOURCE = '''\
import base64
import datetime
import decimal
import ipaddress
import json
import shlex
import statistics
import uuid

from django.db import connection
from django.http import JsonResponse


def _lookup(table, key):
    with connection.cursor() as cur:
        cur.execute("SELECT id, name, price FROM " + table + " WHERE name = %s", [key])
        return cur.fetchall()


def import_order(request):
    payload = request.GET.get("data", "")
    order = json.loads(payload)
    return JsonResponse({"id": order["id"]})


def parse_price(request):
    amount = request.GET.get("amount", "")
    rows = _lookup("product", request.GET.get("name", ""))
    price = decimal.Decimal(amount).quantize(decimal.Decimal("0.01"))
    return JsonResponse({"rows": len(rows), "price": str(price)})


def schedule(request):
    when = request.GET.get("when", "")
    slot = datetime.datetime.strptime(when, "%Y-%m-%d %H:%M")
    return JsonResponse({"slot": slot.isoformat()})


def allow_address(request):
    address = request.GET.get("ip", "")
    net = ipaddress.ip_address(address)
    return JsonResponse({"private": net.is_private})


def decode_token(request):
    token = request.GET.get("token", "")
    raw = base64.b64decode(token, validate=True)
    return JsonResponse({"size": len(raw)})


def average(request):
    values = [int(v) for v in request.GET.getlist("v")]
    mean = statistics.mean(values)
    return JsonResponse({"mean": mean})


def split_command(request):
    line = request.GET.get("cmd", "")
    argv = shlex.split(line)
    return JsonResponse({"argv": argv})


def find_item(request):
    ident = request.GET.get("item", "")
    key = uuid.UUID(ident)
    rows = _lookup("product", str(key))
    return JsonResponse({"rows": len(rows)})


def missing_key(request):
    stock = {"count": 3}
    name = request.GET.get("field", "")
    rows = _lookup("product", name)
    return JsonResponse({"left": stock[name], "rows": len(rows)})


def report(client, view, request, user, props):
    try:
        return globals()[view](request)
    except Exception as exc:
        client.capture_exception(exc, distinct_id=user, properties=props)


def listing(request):
    rows = _lookup("product", request.GET.get("name", ""))
    more = _lookup("category", request.GET.get("category", ""))
    return JsonResponse({"rows": len(rows) + len(more)})
'''

_VIEWS = ("import_order", "parse_price", "schedule", "allow_address", "decode_token", "average",
          "split_command", "find_item", "missing_key", "listing")


def _bad_input(view: str, rng: random.Random, words: list[str]) -> dict[str, Any]:
    """Query input that makes ``view`` raise (the last view, ``listing``, never raises)."""
    w = rng.choice(words)
    if view == "import_order":
        return {"data": rng.choice([f'{{"id": "{w}"', f"{w}", f'{{"{w}": 1}}', "", f"[{rng.randint(1, 99)},"])}
    if view == "parse_price":
        return {"amount": rng.choice([w, f"{rng.randint(1, 99)},{rng.randint(10, 99)}", "", "1e"]), "name": w}
    if view == "schedule":
        return {"when": rng.choice([f"2025-{rng.randint(13, 19)}-01 10:00", f"{w} 10:00", "2025-02-30 9:00"])}
    if view == "allow_address":
        return {"ip": rng.choice([w, f"10.0.{rng.randint(256, 999)}.1", f"{w}.local"])}
    if view == "decode_token":
        return {"token": rng.choice([w + "!", w[:5] + "=" + w[5:], w + "-" + w])}
    if view == "average":
        return {"v": []} if rng.random() < 0.5 else {"v": [w]}
    if view == "split_command":
        return {"cmd": rng.choice([f'tar -czf "{w}.tgz', f"echo '{w}", f'grep "{w} notes.txt'])}
    if view == "find_item":
        return {"item": rng.choice([w, f"{w}-{rng.randint(1, 9999)}", "0" * rng.randint(5, 30)])}
    if view == "missing_key":
        return {"field": w}
    return {"name": w, "category": rng.choice(words)}


class _FakeSocket:
    """A socket for ``http.client`` that answers from memory: the stdlib integration sees a real request."""

    def __init__(self, status: int, body: bytes) -> None:
        reason = http.client.responses.get(status, "OK")
        self.reply = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    def sendall(self, data: bytes) -> None:
        pass

    def makefile(self, mode: str, *args: Any) -> io.BytesIO:
        return io.BytesIO(self.reply)

    def close(self) -> None:
        pass


def _outgoing(rng: random.Random, words: list[str]) -> None:
    """One outgoing HTTP call through ``http.client`` (the SDK records the breadcrumb or span)."""
    host = f"{rng.choice(words)}.internal"
    conn = http.client.HTTPConnection(host, rng.choice([80, 8080, 9200]))
    conn.sock = _FakeSocket(rng.choice([200, 200, 200, 201, 404, 503]), b"{}")  # type: ignore[assignment]
    path = f"/{rng.choice(words)}/{rng.randint(1, 9999)}"
    if rng.random() < 0.5:
        path += "?" + urlencode({rng.choice(words): rng.choice(words)})
    conn.request(rng.choice(["GET", "GET", "POST"]), path, body=None)
    conn.getresponse().read()
    conn.close()


def _django_setup() -> Any:
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            DEBUG=False, ALLOWED_HOSTS=["*"], ROOT_URLCONF="clefgate_sdk_urls", SECRET_KEY="corpus-build",
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.admin",
                            "django.contrib.sessions", "django.contrib.messages"],
            MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
            USE_TZ=True, LOGGING_CONFIG=None,
            TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                        "OPTIONS": {"context_processors": ["django.contrib.auth.context_processors.auth",
                                                           "django.contrib.messages.context_processors.messages",
                                                           "django.template.context_processors.request"]}}],
        )
        django.setup()
    return settings


def _install_app() -> Any:
    """Compile the shop views under a server-like file name and route them (``linecache`` holds the source
    so the SDKs read real context lines)."""
    import types

    from django.urls import path

    name = "/srv/shop/shop/views.py"
    linecache.cache[name] = (len(_APP_SOURCE), None, _APP_SOURCE.splitlines(True), name)
    mod = types.ModuleType("shop.views")
    mod.__file__ = name
    exec(compile(_APP_SOURCE, name, "exec"), mod.__dict__)
    sys.modules["shop.views"] = mod
    urls = types.ModuleType("clefgate_sdk_urls")
    urls.urlpatterns = [path(f"{v.replace('_', '-')}/", getattr(mod, v), name=v) for v in _VIEWS]  # type: ignore[attr-defined]
    sys.modules["clefgate_sdk_urls"] = urls
    from django.db import connection
    with connection.cursor() as cur:
        cur.execute("CREATE TABLE product (id INTEGER PRIMARY KEY, name TEXT, price TEXT)")
        cur.execute("CREATE TABLE category (id INTEGER PRIMARY KEY, name TEXT, price TEXT)")
    return mod


def _sentry_values(env_json: list[Any]) -> list[Any]:
    """String values an application fills from its data, in the order they are worth as slots."""
    out: list[Any] = []
    for ev in env_json:
        if not isinstance(ev, dict):
            continue
        for exc in (ev.get("exception") or {}).get("values", []):
            out.append(exc.get("value"))
        msg = ev.get("message") or (ev.get("logentry") or {}).get("message")
        out.append(msg)
        out.append(ev.get("transaction"))
        req = ev.get("request") or {}
        out.append(req.get("query_string"))
        for crumb in (ev.get("breadcrumbs") or {}).get("values", []):
            out.append(crumb.get("message"))
            out.append((crumb.get("data") or {}).get("url"))
        for span in ev.get("spans", []):
            out.append(span.get("description"))
            out.append((span.get("data") or {}).get("db.statement"))
        out.extend((ev.get("tags") or {}).values())
        out.extend(v for v in (ev.get("user") or {}).values())
    return out


def _sentry(words: list[str], rng: random.Random, noise: Denoise) -> list[dict[str, Any]]:
    import logging

    import sentry_sdk
    from django.test import Client
    from sentry_sdk.integrations.django import DjangoIntegration
    from sentry_sdk.integrations.modules import ModulesIntegration
    from sentry_sdk.transport import Transport

    class Capture(Transport):
        def __init__(self) -> None:
            super().__init__(None)
            self.got: list[Any] = []

        def capture_envelope(self, envelope: Any) -> None:
            self.got.append(envelope)

    _django_setup()
    _install_app()
    log = logging.getLogger("shop.views")
    log.setLevel(logging.INFO)
    log.propagate = False
    log.addHandler(logging.NullHandler())
    quiet = logging.getLogger("django.request")      # its "Internal Server Error" lines, not the events
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    argv, sys.argv = sys.argv, ["manage.py", "runserver", "0.0.0.0:8000"]
    shapes: list[dict[str, Any]] = []
    try:
        for _project in range(24):
            cap = Capture()
            key = f"{rng.getrandbits(128):032x}"
            release = f"{rng.choice(words)}@{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
            sentry_sdk.init(
                dsn=f"http://{key}@127.0.0.1/{rng.randint(2, 4_500_000)}", transport=cap, release=release,
                environment=rng.choice(["production", "production", "staging", "development"]),
                server_name=f"{rng.choice(words)}-{rng.randint(1, 12)}", traces_sample_rate=1.0,
                include_local_variables=rng.random() < 0.5, include_source_context=rng.random() < 0.7,
                auto_enabling_integrations=False, disabled_integrations=[ModulesIntegration()],
                integrations=[DjangoIntegration()], max_breadcrumbs=rng.choice([6, 10, 20]),
                send_default_pii=rng.random() < 0.3,
            )
            client = Client(raise_request_exception=False)
            for _ in range(70):
                with sentry_sdk.isolation_scope() as scope:
                    scope.set_tag("page", rng.choice(words))
                    if rng.random() < 0.5:
                        scope.set_tag("locale", rng.choice(["en-US", "de-DE", "fr-FR", "pt-BR", "ja-JP"]))
                    if rng.random() < 0.4:
                        scope.set_user({"id": str(rng.randint(1, 99999)), "username": rng.choice(words)})
                    session = rng.random() < 0.25
                    if session:
                        scope.start_session()
                    for _ in range(rng.randint(0, 3)):
                        r = rng.random()
                        if r < 0.4:
                            _outgoing(rng, words)
                        elif r < 0.7:
                            log.info("%s %s for %s", rng.choice(words), rng.choice(words), rng.choice(words))
                        else:
                            sentry_sdk.add_breadcrumb(category="ui.click", message=f"button.{rng.choice(words)}")
                    kind = rng.random()
                    if kind < 0.55:
                        view = rng.choice(_VIEWS[:-1])
                        client.get(f"/{view.replace('_', '-')}/", _bad_input(view, rng, words))
                    elif kind < 0.7:
                        sentry_sdk.capture_message(" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))),
                                                   level=rng.choice(["info", "warning", "error"]))
                    elif kind < 0.85:
                        log.error("%s failed for %s", rng.choice(words), rng.choice(words))
                    else:
                        with sentry_sdk.start_transaction(op="task", name=f"shop.tasks.{rng.choice(words)}"):
                            for _ in range(rng.randint(1, 3)):
                                _outgoing(rng, words)
                            client.get("/listing/", _bad_input("listing", rng, words))
                    if session:
                        scope.end_session()
            sentry_sdk.flush()
            shapes.extend(_sentry_shapes(cap.got, key, rng, noise))
    finally:
        sys.argv = argv
        sentry_sdk.init(dsn=None)
    return shapes


def _sentry_shapes(envelopes: list[Any], key: str, rng: random.Random, noise: Denoise) -> list[dict[str, Any]]:
    shapes = []
    for env in envelopes:
        items = []
        # one clock per envelope: fix the headers and all item payloads together
        whole = noise.fix({"h": env.headers, "i": [it.payload.json for it in env.items]})
        headers = whole["h"]
        parts = [json.dumps(headers, ensure_ascii=False, separators=(",", ":")).encode()]
        jsons = []
        for it, payload in zip(env.items, whole["i"], strict=True):
            if payload is None:
                continue
            it.payload.json = payload
            it.payload.bytes = None
            data = it.serialize()
            if sum(map(len, parts)) + 1 + len(data) > MAX_BODY:
                break
            parts.append(data)
            items.append(it)
            jsons.append(payload)
        if not items:
            continue
        from sentry_sdk.utils import json_dumps
        text = (json_dumps(headers) + b"\n" + b"".join(parts[1:])).decode()
        browser = rng.random() < 0.4
        shape: dict[str, Any] = {
            "app": "sentry", "group": "telemetry", "method": "POST", "path": "/api/{id}/envelope/",
            "query": [["sentry_key", key], ["sentry_version", "7"]] if browser else [],
            "body_kind": "raw", "body": text,
            "content_type": "text/plain;charset=UTF-8" if browser else "application/x-sentry-envelope",
            "context": "beacon" if browser else "xhr-write",
            "slots": _slots(text, _sentry_values(jsons)),
        }
        if shape["slots"]:      # a session update alone carries nothing an application fills in
            shapes.append(shape)
    return shapes


# ---------------------------------------------------------------------------------------------- posthog

class _Sink(BaseHTTPRequestHandler):
    got: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", 0))
        _Sink.got.append((self.path, self.headers.get("Content-Type", ""), self.rfile.read(n)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"status": 1}')

    def log_message(self, *args: Any) -> None:
        pass


def _local_sink() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        _Sink.got = []
        yield f"http://127.0.0.1:{srv.server_port}", _Sink.got
    finally:
        srv.shutdown()
        srv.server_close()


def _posthog(words: list[str], rng: random.Random, noise: Denoise, mod: Any) -> list[dict[str, Any]]:
    from posthog import Posthog

    shapes: list[dict[str, Any]] = []
    for host, got in _local_sink():
        for _project in range(12):
            key = "phc_" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789")
                                   for _ in range(43))
            ph = Posthog(key, host=host, sync_mode=True, disable_geoip=rng.random() < 0.7,
                         enable_exception_autocapture=False)
            for _ in range(60):
                user = rng.choice([str(rng.randint(1, 99999)), f"{rng.choice(words)}@example.com",
                                   f"{rng.getrandbits(128):032x}"])
                r = rng.random()
                props: dict[str, Any] = {}
                for _ in range(rng.randint(0, 4)):
                    props[rng.choice(words)] = rng.choice([rng.choice(words), rng.randint(0, 500),
                                                           rng.random() < 0.5])
                if r < 0.55:
                    if rng.random() < 0.5:
                        props["$current_url"] = f"https://{rng.choice(words)}.example.com/{rng.choice(words)}"
                    ph.capture(rng.choice([f"{rng.choice(words)} {rng.choice(words)}",
                                           f"{rng.choice(words)}_{rng.choice(words)}", "$pageview"]),
                               distinct_id=user, properties=props,
                               groups={"company": rng.choice(words)} if rng.random() < 0.2 else None)
                elif r < 0.7:
                    ph.set(distinct_id=user, properties={"name": rng.choice(words).title(),
                                                         "plan": rng.choice(["free", "pro", "team"])})
                elif r < 0.78:
                    ph.group_identify("company", rng.choice(words), {"name": rng.choice(words).title(),
                                                                     "seats": rng.randint(1, 300)})
                elif r < 0.84:
                    ph.alias(rng.choice(words) + str(rng.randint(1, 999)), user)
                else:
                    view = rng.choice(_VIEWS[:-1])
                    mod.report(ph, view, _Req(_bad_input(view, rng, words)), user, props)
            ph.shutdown()
            for path, ctype, raw in got:
                body = json.loads(raw)
                body = noise.fix(body)
                text = json.dumps(body)
                if len(text.encode()) > MAX_BODY:
                    continue
                values: list[Any] = []
                for ev in body.get("batch", []):
                    values.append(ev.get("event"))
                    values.append(ev.get("distinct_id"))
                    p = ev.get("properties") or {}
                    for exc in p.get("$exception_list", []):
                        values.append(exc.get("value"))
                    values.extend(v for k, v in p.items() if not k.startswith("$") or k == "$current_url")
                    values.extend((ev.get("$set") or {}).values())
                shapes.append({
                    "app": "posthog", "group": "telemetry", "method": "POST", "path": path.split("?")[0],
                    "query": [], "body_kind": "raw", "body": text, "content_type": ctype,
                    "context": "xhr-write", "slots": _slots(text, values)})
            got.clear()
    return shapes


class _Req:
    """The part of a Django request the shop views read, for calling them outside a request."""

    def __init__(self, args: dict[str, Any]) -> None:
        from django.http import QueryDict

        self.GET = QueryDict(mutable=True)
        for k, v in args.items():
            if isinstance(v, list):
                self.GET.setlist(k, v)
            else:
                self.GET[k] = v


# ---------------------------------------------------------------------------------------------- OTLP

def _otlp(words: list[str], rng: random.Random, noise: Denoise) -> list[dict[str, Any]]:
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind, Status, StatusCode

    class Keep(SpanExporter):
        def __init__(self) -> None:
            self.spans: list[Any] = []

        def export(self, spans: Any) -> SpanExportResult:
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS

    shapes: list[dict[str, Any]] = []
    for _service in range(30):
        keep = Keep()
        name = rng.choice(words)
        provider = TracerProvider(resource=Resource.create({
            "service.name": name, "service.version": f"{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
            "deployment.environment": rng.choice(["production", "staging"])}))
        provider.add_span_processor(SimpleSpanProcessor(keep))
        tracer = provider.get_tracer(f"{name}.web", "1.0.0")
        for _ in range(10):
            keep.spans.clear()
            host = f"{rng.choice(words)}.example.com"
            out = None
            route = f"/{rng.choice(words)}/{{{rng.choice(['id', 'slug', 'name'])}}}"
            url = f"https://{host}{route.split('{')[0]}{rng.randint(1, 9999)}"
            if rng.random() < 0.4:
                url += "?" + urlencode({rng.choice(words): rng.choice(words)})
            with tracer.start_as_current_span(f"GET {route}", kind=SpanKind.SERVER, attributes={
                    "http.request.method": "GET", "url.full": url, "http.route": route,
                    "http.url": url, "server.address": host,
                    "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64)"}) as root:
                for _ in range(rng.randint(1, 3)):
                    table = rng.choice(words)
                    stmt = rng.choice([
                        f"SELECT id, {rng.choice(words)} FROM {table} WHERE {rng.choice(words)} = ?",
                        f"UPDATE {table} SET {rng.choice(words)} = ? WHERE id = ?",
                        f"INSERT INTO {table} ({rng.choice(words)}, {rng.choice(words)}) VALUES (?, ?)"])
                    with tracer.start_as_current_span(f"{stmt.split()[0]} {table}", kind=SpanKind.CLIENT,
                                                      attributes={"db.system": rng.choice(["postgresql", "mysql", "sqlite"]),
                                                                  "db.statement": stmt, "db.name": name}):
                        pass
                if rng.random() < 0.5:
                    out = f"http://{rng.choice(words)}.internal/{rng.choice(words)}"
                    with tracer.start_as_current_span("GET", kind=SpanKind.CLIENT,
                                                      attributes={"http.method": "GET", "http.url": out,
                                                                  "http.status_code": rng.choice([200, 404, 500])}):
                        pass
                code = rng.choice([200, 200, 201, 404, 500])
                root.set_attribute("http.response.status_code", code)
                if code >= 500:
                    root.set_status(Status(StatusCode.ERROR, f"{rng.choice(words)} unavailable"))
            msg = encode_spans(keep.spans)
            body = json_format.MessageToDict(msg)
            body = _hex_ids(body)
            body = _otlp_clock(noise.fix(body), rng)
            text = json.dumps(body, separators=(",", ":"))
            if len(text.encode()) > MAX_BODY:
                continue
            values = [url, route, out, f"GET {route}"]
            for rs in body["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        for a in sp.get("attributes", []):
                            if a["key"] in ("db.statement", "http.url", "url.full"):
                                values.append(a["value"].get("stringValue"))
            shapes.append({"app": "opentelemetry", "group": "telemetry", "method": "POST", "path": "/v1/traces",
                           "query": [], "body_kind": "raw", "body": text, "content_type": "application/json",
                           "context": "xhr-write", "slots": _slots(text, values)})
        provider.shutdown()
    return shapes


def _hex_ids(o: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex where protobuf's JSON mapping writes base64."""
    import base64

    if isinstance(o, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_ids(v))
                for k, v in o.items()}
    if isinstance(o, list):
        return [_hex_ids(v) for v in o]
    return o


def _otlp_clock(o: Any, rng: random.Random, base: list[int] | None = None) -> Any:
    """Seeded nanosecond clocks, keeping each span's start before its end."""
    if base is None:
        base = [1_741_000_000_000_000_000 + rng.randrange(10**15)]
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k == "startTimeUnixNano":
                base[0] += rng.randint(10_000, 5_000_000)
                out[k] = str(base[0])
            elif k == "endTimeUnixNano":
                out[k] = str(base[0] + rng.randint(50_000, 90_000_000))
            else:
                out[k] = _otlp_clock(v, rng, base)
        return out
    if isinstance(o, list):
        return [_otlp_clock(v, rng, base) for v in o]
    return o


def _budget(shapes: list[dict[str, Any]], rng: random.Random, limit: int) -> list[dict[str, Any]]:
    """A seeded sample of ``shapes`` whose JSON takes at most ``limit`` bytes, in the original order."""
    order = list(range(len(shapes)))
    rng.shuffle(order)
    keep: list[int] = []
    used = 0
    for i in order:
        n = len(json.dumps(shapes[i], separators=(",", ":")).encode())
        if used + n <= limit:
            keep.append(i)
            used += n
    return [shapes[i] for i in sorted(keep)]


def sdk_telemetry() -> dict[str, Any]:
    """Sentry envelopes, PostHog batches and OTLP/JSON trace exports, as the SDKs send them."""
    from importlib.metadata import version

    words = load_words()
    noise = Denoise(1)
    pick = random.Random(14)
    shapes = _budget(_sentry(words, random.Random(11), noise), pick, 800_000)
    mod = sys.modules["shop.views"]
    shapes += _budget(_posthog(words, random.Random(12), noise, mod), pick, 430_000)
    shapes += _budget(_otlp(words, random.Random(13), noise), pick, 200_000)
    pins = ", ".join(f"{p}=={version(p)}" for p in ("sentry-sdk", "posthog", "opentelemetry-sdk",
                                                   "opentelemetry-exporter-otlp-proto-common", "django"))
    return {"source": "sdk-telemetry", "half": "a", "from": pins, "licence": "MIT AND Apache-2.0",
            "shapes": shapes}


# ---------------------------------------------------------------------------------------------- posts

PERMISSIVE = ("MIT", "BSD", "Apache", "PSF", "Python Software Foundation", "ISC")
COPYLEFT = ("GPL", "LGPL", "MPL", "Mozilla", "AGPL", "EPL", "Eclipse", "Commons Clause", "Proprietary")


def _licence(meta: Any) -> str | None:
    """A permissive licence named by a distribution's METADATA, or None (unknown or not permissive).

    The SPDX ``License-Expression`` wins, then the trove classifiers, then the first line of ``License``."""
    expr = (meta.get("License-Expression") or "").strip()
    classifiers = [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    free = (meta.get("License") or "").strip().splitlines()[:1]
    for text in [expr] if expr else [" ".join(classifiers), " ".join(free)]:
        if not text or any(c in text for c in COPYLEFT):
            continue
        if expr:
            return expr if any(p in expr for p in PERMISSIVE) else None
        for p in PERMISSIVE:
            if p in text:
                return {"Python Software Foundation": "PSF-2.0", "PSF": "PSF-2.0", "Apache": "Apache-2.0",
                        "BSD": "BSD"}.get(p, p)
        return None
    return None


def readmes() -> list[tuple[str, str, str, str, str]]:
    """(name, version, licence, content type, text) of installed distributions with a permissive licence
    and a Markdown or reStructuredText long description, sorted by name."""
    from importlib.metadata import distributions

    seen: dict[str, tuple[str, str, str, str, str]] = {}
    for dist in distributions():
        meta: Any = dist.metadata
        name = (meta.get("Name") or "").lower().replace("_", "-")
        body = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
        ctype = (meta.get("Description-Content-Type") or "text/x-rst").split(";")[0].strip().lower()
        lic = _licence(meta)
        if not name or name == "clefgate" or lic is None or len(body) < 400 or name in seen:
            continue
        if ctype not in ("text/markdown", "text/x-rst"):
            continue
        seen[name] = (name, meta.get("Version") or "", lic, ctype, body)
    return [seen[k] for k in sorted(seen)]


def render(ctype: str, text: str) -> str:
    """HTML of a long description, rendered by the renderer its content type names."""
    if ctype == "text/markdown":
        from markdown_it import MarkdownIt

        return str(MarkdownIt("commonmark").enable("table").enable("strikethrough").render(text))
    from docutils.core import publish_parts

    parts = publish_parts(text, writer="html5", settings_overrides={
        "report_level": 5, "halt_level": 5, "raw_enabled": False, "file_insertion_enabled": False,
        "syntax_highlight": "none", "_disable_config": True})
    return str(parts["body"])


class _TopLevel(HTMLParser):
    """Offsets where top-level elements of an HTML fragment end."""

    VOID = {"br", "hr", "img", "input", "meta", "link", "col", "area", "base", "source", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.depth = 0
        self.ends: list[int] = []
        self.lines: list[int] = []

    def feed_text(self, html: str) -> list[int]:
        self.lines = [0]
        for line in html.splitlines(True):
            self.lines.append(self.lines[-1] + len(line))
        self.feed(html)
        self.close()
        return self.ends

    def _pos(self) -> int:
        line, col = self.getpos()
        return self.lines[line - 1] + col

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in self.VOID:
            self.depth += 1
        elif self.depth == 0:
            self.ends.append(self._pos() + len(self.get_starttag_text() or ""))

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        if self.depth == 0:
            self.ends.append(self._pos() + len(self.get_starttag_text() or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        self.depth -= 1
        if self.depth == 0:
            rawpos = self._pos()
            close = self.rawdata.find(">", rawpos)
            self.ends.append(close + 1)


def chunks(html: str, paragraphs: tuple[int, int], rng: random.Random, limit: int = MAX_BODY) -> list[str]:
    """Cut rendered HTML into posts of ``paragraphs`` top-level elements (drawn per post), each ending at
    an element boundary and at most ``limit`` UTF-8 bytes; an element longer than ``limit`` is dropped."""
    ends = _TopLevel().feed_text(html)
    out: list[str] = []
    start = 0
    i = 0
    while i < len(ends):
        want = rng.randint(*paragraphs)
        j = min(i + want, len(ends)) - 1
        while j >= i and len(html[start:ends[j]].strip().encode()) > limit:
            j -= 1
        if j < i:
            start = ends[i]
            i += 1
            continue
        piece = html[start:ends[j]].strip()
        if piece:
            out.append(piece)
        start = ends[j]
        i = j + 1
    return out


def _source_chunks(text: str, rng: random.Random) -> list[str]:
    """Markdown source cut at blank lines outside code fences into post-sized pieces."""
    blocks: list[str] = []
    cur: list[str] = []
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not line.strip() and not fence and cur:
            blocks.append("\n".join(cur))
            cur = []
        elif line.strip() or cur:
            cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    out = []
    i = 0
    while i < len(blocks):
        n = rng.randint(2, 5)
        piece = "\n\n".join(blocks[i:i + n])
        i += n
        if 40 <= len(piece.encode()) <= MAX_BODY:
            out.append(piece)
    return out


def _token(rng: random.Random, n: int = 64) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "".join(rng.choice(alphabet) for _ in range(n))


def _title(html: str, rng: random.Random, words: list[str]) -> str:
    m = re.search(r"<h[1-6][^>]*>(.*?)</h[1-6]>", html, re.S)
    if m:
        t = re.sub(r"<[^>]+>", "", m.group(1)).strip()
        if 3 <= len(t) <= 120:
            return t
    return " ".join(rng.choice(words) for _ in range(rng.randint(2, 5))).capitalize()


def _post_shapes(html: str, md: str | None, rng: random.Random, words: list[str]) -> list[dict[str, Any]]:
    """The ways editors send one rendered chunk (and its Markdown source when there is one)."""
    out: list[dict[str, Any]] = []
    kind = rng.randrange(4)
    w = rng.choice(words)
    if kind == 0:   # forum reply: the editor's HTML (or Markdown) in a form field
        body = {"message": html if md is None or rng.random() < 0.6 else md,
                "csrf_token": _token(rng, 40), "topic_id": str(rng.randint(1, 90000)),
                "subject": "Re: " + _title(html, rng, words)}
        if rng.random() < 0.5:
            body["attach_sig"] = "on"
        out.append({"app": "forum", "group": "post", "method": "POST", "path": "/posting.php",
                    "query": [["mode", "reply"], ["t", str(rng.randint(1, 90000))]], "body_kind": "form",
                    "body": body, "context": "nav-post", "slots": [["form", "message"], ["form", "subject"]]})
    elif kind == 1:  # WordPress-like REST write from a block editor
        body2: dict[str, Any] = {"title": _title(html, rng, words), "content": html,
                                 "status": rng.choice(["draft", "draft", "publish", "pending"])}
        if rng.random() < 0.5:
            body2["excerpt"] = re.sub(r"<[^>]+>", "", html)[:140].strip()
        if rng.random() < 0.4:
            body2["categories"] = [rng.randint(1, 40)]
        method = rng.choice(["POST", "POST", "PUT"])
        path = "/wp-json/wp/v2/posts" if method == "POST" else "/wp-json/wp/v2/posts/{id}"
        out.append({"app": "wordpress", "group": "write", "method": method, "path": path,
                    "query": [["_locale", "user"]], "body_kind": "json", "body": body2, "context": "xhr-write",
                    "slots": [["json", "content"], ["json", "title"]]})
    elif kind == 2:  # comment form
        body3 = {"comment": html if rng.random() < 0.5 else re.sub(r"<[^>]+>", "", html).strip(),
                 "author": w.title(), "email": f"{w}@example.org", "url": "",
                 "comment_post_ID": str(rng.randint(1, 20000)), "comment_parent": "0"}
        if not body3["comment"]:
            body3["comment"] = html
        out.append({"app": "wordpress", "group": "form", "method": "POST", "path": "/wp-comments-post.php",
                    "query": [], "body_kind": "form", "body": body3, "context": "nav-post",
                    "slots": [["form", "comment"], ["form", "author"]]})
    else:  # JSON API write with the Markdown source (issue/comment APIs)
        text = md if md is not None else html
        out.append({"app": rng.choice(["issues", "discussions", "notes"]), "group": "api",
                    "method": rng.choice(["POST", "PATCH"]),
                    "path": rng.choice(["/api/v1/{word}/issues/{id}/comments", "/api/v4/projects/{id}/notes",
                                        "/api/v1/posts/{id}"]),
                    "query": [], "body_kind": "json", "body": {"body": text}, "context": "xhr-write",
                    "slots": [["json", "body"]]})
    return out


def _admin_forms(words: list[str], rng: random.Random) -> list[dict[str, Any]]:
    """Django admin add/change form posts, with the field names of Django's own admin forms."""
    _django_setup()
    from django.contrib import admin
    from django.contrib.auth.forms import AdminPasswordChangeForm, UserChangeForm, UserCreationForm
    from django.contrib.auth.models import Group, User
    from django.forms.models import modelform_factory

    group_form = admin.site._registry[Group].get_form(None) if Group in admin.site._registry \
        else modelform_factory(Group, fields=["name", "permissions"])
    forms = [("auth", "user", UserChangeForm), ("auth", "user", UserCreationForm),
             ("auth", "group", group_form), ("auth", "user", AdminPasswordChangeForm)]
    shapes = []
    for _ in range(260):
        app, model, form = rng.choice(forms)
        if form is AdminPasswordChangeForm:
            fields = list(form(User()).fields)
        else:
            fields = list(form.base_fields)
        w = rng.choice(words)
        body: dict[str, str] = {"csrfmiddlewaretoken": _token(rng)}
        for f in fields:
            if f == "password":
                continue        # a read-only hash widget: the browser posts nothing for it
            if f in ("password1", "password2"):
                body[f] = f"{w}-{rng.choice(words)}-{rng.randint(10, 99)}"
            elif f == "username":
                body[f] = f"{w}{rng.randint(1, 999)}" if rng.random() < 0.5 else w
            elif f in ("first_name", "last_name", "name"):
                body[f] = rng.choice(words).title()
            elif f == "email":
                body[f] = f"{w}@example.com"
            elif f in ("is_active", "is_staff", "is_superuser", "usable_password"):
                if rng.random() < 0.5:
                    body[f] = "on" if f != "usable_password" else "true"
            elif f in ("groups", "user_permissions", "permissions"):
                if rng.random() < 0.5:
                    body[f] = str(rng.randint(1, 60))
            elif f in ("last_login", "date_joined"):
                d = datetime(2024, 1, 1) + timedelta(days=rng.randint(0, 600), seconds=rng.randint(0, 86399))
                body[f + "_0"] = d.strftime("%Y-%m-%d")
                body[f + "_1"] = d.strftime("%H:%M:%S")
        if form is UserChangeForm and rng.random() < 0.5:
            body["initial-date_joined_0"] = body.get("date_joined_0", "2024-01-01")
        button = rng.choice(["_save", "_save", "_continue", "_addanother"])
        body[button] = {"_save": "Save", "_continue": "Save and continue editing",
                        "_addanother": "Save and add another"}[button]
        if form is AdminPasswordChangeForm:
            path = f"/admin/{app}/{model}/{{id}}/password/"
        elif form is UserCreationForm or (form is group_form and rng.random() < 0.4):
            path = f"/admin/{app}/{model}/add/"
        else:
            path = f"/admin/{app}/{model}/{{id}}/change/"
        slots = [["form", k] for k in ("username", "first_name", "last_name", "email", "name", "password1")
                 if k in body]
        shapes.append({"app": "django-admin", "group": "form", "method": "POST", "path": path, "query": [],
                       "body_kind": "form", "body": body, "context": "nav-post", "slots": slots})
    return shapes


def rendered_posts() -> dict[str, Any]:
    """Rendered long descriptions of installed distributions, posted as editors post them."""
    from importlib.metadata import version

    words = load_words()
    rng = random.Random(21)
    shapes: list[dict[str, Any]] = []
    for _name, _ver, _lic, ctype, text in readmes():
        try:
            html = render(ctype, text)
        except Exception:
            continue
        sources = _source_chunks(text, rng) if ctype == "text/markdown" else []
        for k, piece in enumerate(chunks(html, (2, 6), rng)[:24]):
            md = sources[k] if k < len(sources) else None
            shapes.extend(_post_shapes(piece, md, rng, words))
    shapes = _budget(shapes, random.Random(22), 1_250_000) + _budget(_admin_forms(words, rng), rng, 250_000)
    pins = ", ".join(f"{p}=={version(p)}" for p in ("markdown-it-py", "docutils", "django"))
    return {"source": "rendered-posts", "half": "b", "from": pins,
            "licence": "MIT AND BSD-3-Clause AND Apache-2.0 AND PSF-2.0", "shapes": shapes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["sdk-telemetry", "rendered-posts"])
    args = parser.parse_args(argv)
    for name, build in (("sdk-telemetry", sdk_telemetry), ("rendered-posts", rendered_posts)):
        if args.only and args.only != name:
            continue
        obj = build()
        write_source(DATA, obj["source"], obj["half"], obj["from"], obj["licence"], obj["shapes"])
        print(f"apps-{name}.json: {len(obj['shapes'])} shapes")


if __name__ == "__main__":
    main()
