"""Start real processes for end-to-end tests: origins and `clefgate serve`, on free ports.

Everything here runs the real thing as a subprocess (the gateway exactly as an operator
starts it), captures its stdout (access log) and stderr (process log) to files, and
cleans up. Fixtures in ``conftest.py`` wrap these.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
ADMIN_TOKEN = "harness-admin-token"  # the admin token every harness gateway gets unless its config names one


def free_port(*taken: int) -> int:
    """A TCP port that was free a moment ago on 127.0.0.1, and is none of ``taken`` (the kernel may hand a port it just
    gave back out again)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port


def http_get(url: str, timeout: float = 2.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A plain GET with the standard library (status, body); HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Abort(Exception):
    """Raised by a wait_until predicate to stop waiting at once (e.g. the process died)."""


def wait_until(predicate: Any, timeout: float, interval: float = 0.05, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true; errors count as "not yet", except ``Abort``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Abort as exc:
            raise RuntimeError(str(exc)) from None
        except Exception:  # not up yet (connection refused, half-written file, ...)
            pass
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class Origin:
    """A real HTTP origin in a subprocess: the demo site, or the test origin (tests/origin.py)."""

    def __init__(self, workdir: Path, kind: str = "demo", port: int | None = None, args: list[str] | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.kind = kind
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"origin-{self.port}.log"
        if kind == "demo":
            cmd = [sys.executable, "-m", "gateway.tools.demo", "--port", str(self.port)]
        else:
            cmd = [sys.executable, str(ROOT / "tests" / "origin.py"), "--port", str(self.port), *(args or [])]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
        health = "/healthz"
        try:
            wait_until(lambda: http_get(self.url + health)[0] < 500, 20.0, what=f"origin on {self.url}")
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"origin did not start:\n{self.log_path.read_text(errors='replace')}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class Gateway:
    """`clefgate serve --config FILE` as a subprocess, on free ports, waited until /readyz is 200."""

    def __init__(self, workdir: Path, config: dict[str, Any], *, args: list[str] | None = None,
                 env: dict[str, str] | None = None, ready_timeout: float = 60.0, wait_ready: bool = True) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.config = dict(config)
        self.config.setdefault("listen", f"127.0.0.1:{free_port()}")
        admin = dict(self.config.get("admin") or {})
        admin.setdefault("listen", f"127.0.0.1:{free_port(int(self.config['listen'].rpartition(':')[2]))}")
        admin.setdefault("token", ADMIN_TOKEN)  # state changes always need one
        self.config["admin"] = admin
        self.port = int(self.config["listen"].rpartition(":")[2])
        self.admin_port = int(admin["listen"].rpartition(":")[2]) if admin["listen"] else 0
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_url = f"http://127.0.0.1:{self.admin_port}"
        self.config_path = workdir / "clefgate.yaml"
        self.write_config(self.config)
        self.stdout_path = workdir / "gateway.stdout"
        self.stderr_path = workdir / "gateway.stderr"
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        cmd = [sys.executable, "-m", "gateway", "serve", "--config", str(self.config_path), *(args or [])]
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, env=_env(env), cwd=ROOT)
        if wait_ready:
            self.wait_ready(ready_timeout)

    def write_config(self, config: dict[str, Any]) -> None:
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise Abort(f"gateway exited with {self.proc.returncode}:\n{self.stderr()}")
            return http_get(self.admin_url + "/readyz")[0] == 200
        try:
            wait_until(ready, timeout, what="gateway /readyz")
        except TimeoutError:
            raise RuntimeError(f"gateway not ready after {timeout}s:\n{self.stderr()}") from None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def reload(self, config: dict[str, Any] | None = None, *, via: str = "http") -> tuple[int, dict[str, Any]]:
        """Rewrite the config file (when given) and reload via POST /admin/reload or SIGHUP."""
        if config is not None:
            merged = dict(config)
            merged["listen"] = self.config["listen"]
            merged["admin"] = {"token": self.config["admin"]["token"], **(config.get("admin") or {}), "listen": self.config["admin"]["listen"]}
            self.write_config(merged)
        if via == "sighup":
            self.proc.send_signal(signal.SIGHUP)
            return 0, {}
        req = urllib.request.Request(self.admin_url + "/admin/reload", method="POST", data=b"{}", headers=self.admin_headers())
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def admin_headers(self) -> dict[str, str]:
        """What a state-changing admin request sends: the bearer token (a literal one) and a JSON body."""
        return {"Authorization": f"Bearer {self.config['admin']['token']}", "Content-Type": "application/json"}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()
        self._err.close()
        return int(self.proc.returncode)

    def stderr(self) -> str:
        self._err.flush()
        return self.stderr_path.read_text(errors="replace")

    def stdout(self) -> str:
        self._out.flush()
        return self.stdout_path.read_text(errors="replace")

    def access_log(self) -> list[dict[str, Any]]:
        """Parsed JSON lines the gateway wrote to stdout (the access log by default)."""
        out = []
        for line in self.stdout().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out

    def process_log(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stderr().splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out

    def metrics(self) -> str:
        return http_get(self.admin_url + "/metrics", timeout=5.0)[1].decode()


def config_for(upstream: str, **extra: Any) -> dict[str, Any]:
    """A minimal config forwarding everything to ``upstream`` (merge ``extra`` on top)."""
    cfg: dict[str, Any] = {
        "backends": {"app": {"servers": [upstream], "health_check": {"path": "/healthz", "interval_s": 0.5}}},
        "trusted_proxies": ["127.0.0.1/32"],
        "logging": {"level": "info", "access_log": "-"},
    }
    cfg.update(extra)
    return cfg


@contextlib.contextmanager
def running_gateway(workdir: Path, config: dict[str, Any], **kw: Any) -> Iterator[Gateway]:
    gw = Gateway(workdir, config, **kw)
    try:
        yield gw
    finally:
        gw.stop()


@contextlib.contextmanager
def running_origin(workdir: Path, kind: str = "demo", **kw: Any) -> Iterator[Origin]:
    origin = Origin(workdir, kind, **kw)
    try:
        yield origin
    finally:
        origin.stop()
