"""Helpers for the proxy tests: an in-process gateway, origins, raw HTTP/1.1 clients.

``GatewayThread`` runs ``gateway.proxy.serve`` on its own uvloop event loop in a
background thread, with a config dict and, optionally, a custom ``Pipeline``
(rules, async scorers, pages, local endpoints), so that tests can steer the
decision. Whole-process behaviour (RSS, signals, reload) is tested against
``clefgate serve`` through ``tests/harness.py``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gateway import config as configmod
from gateway.accesslog import AccessLog
from gateway.backends import BackendSet
from gateway.pipeline import Pipeline
from gateway.proxy.pools import UpstreamPools
from gateway.runtime import Runtime, RuntimeRef
from tests.origin import OriginProcess, start_origin

T = TypeVar("T")


# ---------------------------------------------------------------------------- origins

_ORIGINS: dict[str, OriginProcess] = {}


def shared_origin(name: str, *, raw: bool = False) -> OriginProcess:
    """An origin subprocess shared by every test of the session (stopped at exit).

    ``"a"`` and ``"b"`` are aiohttp origins that tell themselves apart by name;
    ``raw=True`` is the scripted raw origin.
    """
    key = f"{name}:{raw}"
    origin = _ORIGINS.get(key)
    if origin is None or origin.proc.poll() is not None:
        origin = _ORIGINS[key] = start_origin(name, raw=raw)
    return origin


@atexit.register
def _stop_origins() -> None:
    for origin in _ORIGINS.values():
        origin.stop()


def closed_port() -> int:
    """A port nothing listens on (bound and released at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------- the gateway


def make_config(upstreams: list[str] | dict[str, list[str]], tmp: Path | None = None, **extra: Any) -> configmod.Config:
    """A validated config: one backend "app" (a list) or named backends (a dict), checks off by default."""
    backends = {"app": upstreams} if isinstance(upstreams, list) else upstreams
    raw: dict[str, Any] = {
        "backends": {name: {"servers": servers, "health_check": {"enabled": False}} for name, servers in backends.items()},
        "logging": {"access_log": str(tmp / "access.log") if tmp else "off", "access_log_flush_s": 0.05},
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = _merge(raw[key], value)
        else:
            raw[key] = value
    return configmod.validate(raw)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@dataclass
class GatewayThread:
    """``gateway.proxy.serve`` on a private event loop in a thread."""

    cfg: configmod.Config
    pipeline: Pipeline = field(default_factory=Pipeline)
    loop: asyncio.AbstractEventLoop | None = None
    ref: RuntimeRef | None = None
    plane: Any = None
    _thread: threading.Thread | None = None

    def start(self) -> GatewayThread:
        import uvloop

        self.loop = uvloop.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            assert self.loop is not None
            asyncio.set_event_loop(self.loop)
            ready.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="gateway-under-test", daemon=True)
        self._thread.start()
        ready.wait()
        self.run(self._start())
        return self

    async def _start(self) -> None:
        from gateway import proxy

        backends = BackendSet.build(self.cfg)
        runtime = Runtime(self.cfg, self.pipeline, backends, UpstreamPools(backends), AccessLog.from_config(self.cfg.logging), 1)
        await runtime.backends.start()
        self.ref = RuntimeRef(runtime)
        self.plane = await proxy.serve(self.ref, "127.0.0.1", 0)

    @property
    def runtime(self) -> Runtime:
        assert self.ref is not None
        return self.ref.current

    @property
    def port(self) -> int:
        return int(self.plane.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine on the gateway's loop and wait for its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Call ``fn`` on the gateway's loop (for reading state it owns)."""
        assert self.loop is not None
        fut: Future[T] = Future()

        def wrapped() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:  # handed to the test thread
                fut.set_exception(exc)

        self.loop.call_soon_threadsafe(wrapped)
        return fut.result(timeout)

    def reload(self, cfg: configmod.Config, pipeline: Pipeline | None = None) -> None:
        """Swap in a new Runtime built from ``cfg`` (backends and their pools adopted from the current one); the old
        one is closed at once (pools no server of the new one took over close)."""
        async def swap() -> None:
            assert self.ref is not None
            old = self.ref.current
            backends = BackendSet.build(cfg, old.backends)
            new = Runtime(cfg, pipeline or old.pipeline, backends, UpstreamPools(backends, old.pools),
                          AccessLog.from_config(cfg.logging), old.generation + 1)
            await new.backends.start()
            self.ref.current = new
            await old.backends.close()
            old.pools.close()
            old.access_log.close()
        self.run(swap())

    def access_log(self) -> list[dict[str, Any]]:
        """Access-log lines written so far (flushed first)."""
        self.call(self.runtime.access_log.flush)
        path = Path(self.runtime.access_log.target)
        deadline = time.monotonic() + 5
        lines: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            if path.exists():
                # only whole lines: the writer thread may be half-way through the last one
                whole = path.read_text().rpartition("\n")[0]
                lines = [json.loads(line) for line in whole.splitlines() if line.strip()]
            time.sleep(0.02)
            if path.exists() and len(lines) == len(path.read_text().rpartition("\n")[0].splitlines()):
                break
        return lines

    def wait_log(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0) -> dict[str, Any]:
        """The first access-log line matching ``predicate`` (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.access_log():
                if predicate(line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no access-log line matched; got {self.access_log()}")

    def stop(self) -> None:
        async def shutdown() -> None:
            await self.plane.drain(0.5)
            runtime = self.runtime
            await runtime.backends.close()
            runtime.pools.close()
            runtime.access_log.close()
        try:
            self.run(shutdown())
        finally:
            assert self.loop is not None and self._thread is not None
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            self.loop.close()


@contextlib.contextmanager
def gateway(cfg: configmod.Config, pipeline: Pipeline | None = None) -> Iterator[GatewayThread]:
    """A started GatewayThread, stopped afterwards."""
    gw = GatewayThread(cfg, pipeline or Pipeline()).start()
    try:
        yield gw
    finally:
        gw.stop()


# ---------------------------------------------------------------------------- raw HTTP/1.1


@dataclass
class RawResponse:
    """One response read off a raw socket."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    version: str = "HTTP/1.1"
    interim: list[int] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        name = name.lower()
        values = [v for k, v in self.headers if k.lower() == name]
        return ", ".join(values) if values else None

    def json(self) -> Any:
        return json.loads(self.body)


class RawClient:
    """A blocking socket speaking hand-written HTTP/1.1 (for the cases real clients refuse to send)."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def read_until_close(self) -> bytes:
        """Everything until the server closes (or a reset)."""
        with contextlib.suppress(ConnectionResetError):
            while self._fill():
                pass
        out, self.buf = self.buf, b""
        return out

    def closed(self, timeout: float = 5.0) -> bool:
        """True when the server closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.buf += data
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def response(self, head_request: bool = False) -> RawResponse:
        """Read one response (after any 1xx)."""
        interim: list[int] = []
        while True:
            while b"\r\n\r\n" not in self.buf:
                if not self._fill():
                    raise ConnectionError(f"connection closed before a response head; got {self.buf!r}")
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            version, _, rest = lines[0].partition(" ")
            code, _, reason = rest.partition(" ")
            headers = [(k, v.strip()) for k, _, v in (line.partition(":") for line in lines[1:])]
            status = int(code)
            if 100 <= status < 200 and status != 101:
                interim.append(status)
                continue
            break
        resp = RawResponse(status, reason, headers, b"", version, interim)
        if head_request or status in (204, 304, 101):
            return resp
        te = resp.header("transfer-encoding")
        cl = resp.header("content-length")
        if te is not None and "chunked" in te.lower():
            resp.body = self._chunked()
        elif cl is not None:
            n = int(cl)
            while len(self.buf) < n:
                if not self._fill():
                    raise ConnectionError("connection closed inside the body")
            resp.body, self.buf = self.buf[:n], self.buf[n:]
        else:
            resp.body = self.read_until_close()
        return resp

    def _chunked(self) -> bytes:
        out = b""
        while True:
            while b"\r\n" not in self.buf:
                if not self._fill():
                    raise ConnectionError("closed inside chunked body")
            line, self.buf = self.buf.split(b"\r\n", 1)
            size = int(line.split(b";")[0], 16)
            if size == 0:
                while b"\r\n\r\n" not in b"\r\n" + self.buf:
                    if not self._fill():
                        raise ConnectionError("closed inside trailers")
                _, self.buf = (b"\r\n" + self.buf).split(b"\r\n\r\n", 1)
                return out
            while len(self.buf) < size + 2:
                if not self._fill():
                    raise ConnectionError("closed inside a chunk")
            out += self.buf[:size]
            self.buf = self.buf[size + 2 :]

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request(port: int, data: bytes, *, head_request: bool = False, timeout: float = 10.0) -> RawResponse:
    """Send raw bytes on a new connection and read one response."""
    with RawClient(port, timeout) as client:
        client.send(data)
        return client.response(head_request)


def get(path: str = "/", host: str = "test.example", extra: str = "") -> bytes:
    """A minimal GET request head."""
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode("latin-1")


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
