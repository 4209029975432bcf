"""The systems compared side by side: the origin directly, nginx ``proxy_pass``, and clefgate variants.

Every setup runs in front of the same origin (the demo site served by nginx,
``loadtest.site``). The system under test is pinned to one CPU and the load
generator and origin to the other, the same for every setup, with ``taskset``.
clefgate runs exactly as an operator starts it (``clefgate serve --config FILE``,
one worker) on a config written for the run: the shipped rules, trusted
``127.0.0.1`` (the simulator's ``X-Forwarded-For``), access log off (nginx's is off
too), and the decision log on (it is the retraining feed, and it labels the model's
reliability diagram).

The nginx baseline is the proxy benchmark's (``loadtest.proxybench``, issue 2):
``proxy_pass`` with upstream keep-alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from loadtest import site
from loadtest.proxybench import Service, cpu_seconds, free_port, process_tree, start_nginx

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RULES = ROOT / "rules" / "default.yaml"


@dataclass(frozen=True)
class Setup:
    """One system under test."""

    name: str
    title: str
    kind: str  # origin, nginx, clefgate
    model: bool = False
    cache: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def via_gateway(self) -> bool:
        return self.kind == "clefgate"


SETUPS: dict[str, Setup] = {s.name: s for s in (
    Setup("origin", "origin (direct)", "origin"),
    Setup("nginx", "nginx proxy_pass", "nginx"),
    Setup("rules", "clefgate rules only", "clefgate"),
    # degraded mode as shipped: no model, the injection signatures as fallback rules
    Setup("fallback", "clefgate rules + fallback signatures (model down)", "clefgate",
          overrides={"rules": {"fallback_files": [str(ROOT / "rules" / "injections.yaml")]}}),
    Setup("model", "clefgate rules + model (cache on)", "clefgate", model=True),
    Setup("model-nocache", "clefgate rules + model (cache off)", "clefgate", model=True, cache=False),
    # what the decision log costs (it is on in every other clefgate setup)
    Setup("model-nolog", "clefgate rules + model (cache on, no decision log)", "clefgate", model=True,
          overrides={"decision_log": {"path": ""}}),
)}
DEFAULT_SETUPS = ("origin", "nginx", "rules", "fallback", "model", "model-nocache", "model-nolog")


def pinned(cpu: int | None, cmd: list[str]) -> list[str]:
    """``cmd`` under ``taskset -c cpu`` (unchanged when not pinning)."""
    if cpu is None or not shutil.which("taskset"):
        return cmd
    return ["taskset", "-c", str(cpu), *cmd]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1",
                PYTHONUNBUFFERED="1")


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float, log: Path | None = None) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            detail = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}\n{detail}")
        with contextlib.suppress(urllib.error.URLError, OSError), urllib.request.urlopen(url, timeout=1.0) as r:
            if r.status == 200:
                return bytes(r.read())
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} not ready at {url} within {timeout:.0f}s")


def start_origin(workdir: Path, *, cpu: int | None) -> Service:
    """The demo site on nginx."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "site.stderr"
    with open(log, "wb") as err:
        proc = subprocess.Popen(pinned(cpu, site.command(workdir, port)), stdout=err, stderr=err)
    _wait_http(f"http://127.0.0.1:{port}/healthz", proc, "origin (nginx site)", 20.0, log)
    return Service("origin", proc, port, workdir)


@dataclass
class Running:
    """A started setup: where to send traffic, which processes to measure, how to read its metrics."""

    setup: Setup
    service: Service
    admin_url: str = ""
    decision_log: Path | None = None
    pipeline: str = ""
    # False for the origin setup: the origin outlives it (every other setup is in front of it)
    owned: bool = True

    @property
    def port(self) -> int:
        return self.service.port

    def pids(self) -> list[int]:
        return process_tree(self.service.proc.pid)

    def metrics(self) -> str:
        """The gateway's Prometheus text ('' for setups without an admin listener)."""
        if not self.admin_url:
            return ""
        try:
            with urllib.request.urlopen(self.admin_url + "/metrics", timeout=5.0) as r:
                return str(r.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError):
            return ""

    def stop(self) -> None:
        if self.owned:
            self.service.stop()


def clefgate_config(setup: Setup, origin_port: int, workdir: Path, *, model_overrides: Mapping[str, Mapping[str, Any]] | None = None,
                    rules: Path = DEFAULT_RULES) -> dict[str, Any]:
    """The config a clefgate setup runs with; ``model_overrides`` (config sections, e.g. ``{"model": {"version": "1.5.0"},
    "policy": {"challenge_risk": 0.5}}``) apply to the setups that run the model."""
    cfg: dict[str, Any] = {
        "listen": f"127.0.0.1:{free_port()}",
        "admin": {"listen": f"127.0.0.1:{free_port()}"},
        "workers": 1,
        "trusted_proxies": ["127.0.0.1/32"],
        "backends": {"origin": {"servers": [f"http://127.0.0.1:{origin_port}"],
                                "health_check": {"path": "/healthz", "interval_s": 5.0}}},
        "logging": {"level": "warning", "access_log": "off"},
        "rules": {"files": [str(rules)]},
        "challenge": {"keys": [{"id": "bench", "secret": secrets.token_urlsafe(48)}]},
        "decision_log": {"path": str(workdir / "decisions.jsonl"), "rules": "decisive", "max_bytes": "2GiB"},
        "model": {"enabled": setup.model},
    }
    if not setup.cache:
        cfg["decider"] = {"cache_size": 0}
    from_command_line = list((model_overrides or {}).items()) if setup.model else []
    for key, value in [*from_command_line, *setup.overrides.items()]:
        cfg[key] = {**cfg.get(key, {}), **value} if isinstance(value, Mapping) else value
    return cfg


def start_setup(setup: Setup, workdir: Path, origin: Service, *, cpu: int | None,
                model_overrides: Mapping[str, Mapping[str, Any]] | None = None) -> Running:
    """Start one setup in front of ``origin``; the origin setup is the origin itself."""
    workdir.mkdir(parents=True, exist_ok=True)
    if setup.kind == "origin":
        return Running(setup, origin, owned=False)
    if setup.kind == "nginx":
        return Running(setup, start_nginx("proxy", workdir, cpu=cpu, origin_port=origin.port))
    cfg = clefgate_config(setup, origin.port, workdir, model_overrides=model_overrides)
    path = workdir / "clefgate.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    log = workdir / "clefgate.stderr"
    with open(log, "wb") as err:
        proc = subprocess.Popen(pinned(cpu, [sys.executable, "-m", "gateway", "serve", "--config", str(path)]),
                                stdout=subprocess.DEVNULL, stderr=err, env=_env(), cwd=ROOT)
    admin = f"http://{cfg['admin']['listen']}"
    ready = _wait_http(admin + "/readyz", proc, f"clefgate ({setup.name})", 180.0, log)
    port = int(cfg["listen"].rpartition(":")[2])
    pipeline = ""
    with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
        pipeline = str(json.loads(ready)["workers"][0]["pipeline"])
    return Running(setup, Service(f"clefgate-{setup.name}", proc, port, workdir), admin, workdir / "decisions.jsonl", pipeline)


def model_missing(running: Running) -> str | None:
    """Why a model setup is not scoring with the model (None when it is)."""
    if not running.setup.model:
        return None
    description = running.pipeline.lower()
    if "no model" in description or "model" not in description:
        return f"the gateway started without a model scorer (pipeline: {running.pipeline or 'unknown'})"
    return None


def run_queue_seconds(pids: list[int]) -> float:
    """Seconds the threads of ``pids`` spent runnable but waiting for a CPU (``/proc/<pid>/task/*/schedstat``).

    On a shared machine this is the share of time other processes kept the system under
    test from running when it had work: the figure that says a run's throughput is
    understated.
    """
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
    return total / 1e9


class CpuSampler:
    """Samples, every ``interval_s`` in a thread, the CPU seconds used by a set of processes and the
    seconds they waited in a run queue for a CPU (held up by other processes on a shared machine)."""

    def __init__(self, pids: list[int], interval_s: float = 0.5) -> None:
        self.pids = pids
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []  # (perf_counter, cpu seconds of the processes)
        self.waits: list[tuple[float, float]] = []  # (perf_counter, run-queue seconds of their threads)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def _sample(self) -> None:
        now = time.perf_counter()
        self.samples.append((now, cpu_seconds(self.pids)))
        self.waits.append((now, run_queue_seconds(self.pids)))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval_s)
        self._sample()

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)

    @staticmethod
    def _delta(samples: list[tuple[float, float]], start: float, end: float) -> float:
        if not samples:
            return 0.0

        def at(t: float) -> float:
            return min(samples, key=lambda s: abs(s[0] - t))[1]
        return max(0.0, at(end) - at(start))

    def between(self, start: float, end: float) -> float:
        """CPU seconds the processes used between two perf_counter times (nearest samples)."""
        return self._delta(self.samples, start, end)

    def waited_between(self, start: float, end: float) -> float:
        """Seconds their threads waited for a CPU between two times."""
        return self._delta(self.waits, start, end)
