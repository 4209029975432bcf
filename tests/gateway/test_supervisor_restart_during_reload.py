"""A worker replaced while a supervised reload or model swap is in flight must end up on the config that reload commits.

The supervisor is driven in-process, its worker processes replaced by fakes that act as a worker does on the pipe (a
reload reads the worker's own source again; a model swap puts the swap on it), so the race is set up step by step.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway import config as configmod
from gateway import metrics
from gateway.config import Config
from gateway.runtime import ConfigSource
from gateway.supervisor import Supervisor

pytestmark = pytest.mark.timeout(60)


class _Process:
    def __init__(self) -> None:
        self.alive = True
        self.exitcode: int | None = None

    def is_alive(self) -> bool:
        return self.alive

    def join(self, timeout: float | None = None) -> None:
        pass


class _FakeWorker:
    """The supervisor's handle to a worker that serves ``serving``: the config it started with, until it reloads."""

    def __init__(self, index: int, source: ConfigSource, cfg: Config) -> None:
        self.index = index
        self.source = source
        self.serving = cfg
        self.process = _Process()
        self.started_at: float | None = None
        self.last_status: dict[str, Any] = {}
        self.started: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.started.set_result({"worker": index, "ready": True})
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()  # the answer to a reload or model swap waits for this
        self.answer.set()
        self.refuse: dict[str, list[str]] = {}  # kind -> the problems this worker answers instead of taking the change
        self.kinds: list[str] = []

    async def ask(self, kind: str, *args: Any, wait_s: float = 5.0) -> Any:
        if not self.process.is_alive():
            raise EOFError(f"worker {self.index} is gone")
        self.kinds.append(kind)
        if kind == "drain":
            self.process.alive = False
            return None
        if kind in self.refuse:
            return self.refuse[kind]
        if kind == "restore":
            self.source, self.serving = args
            return []
        self.asked.set()
        await self.answer.wait()
        source = self.source.with_model(args[0]) if kind == "model" else self.source
        self.serving, self.source = source.resolve()
        return []

    def close(self) -> None:
        pass


def _supervisor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Supervisor]:
    """A supervisor of two fake workers, and its config file (backend :9), for the test to edit."""
    path = tmp_path / "gw.yaml"
    _write(path, "http://127.0.0.1:9")
    monkeypatch.setattr(metrics.REGISTRY, "remote", metrics.REGISTRY.remote)  # Supervisor() points it at its workers
    sup = Supervisor(ConfigSource(str(path)), configmod.load(str(path)))
    monkeypatch.setattr(sup, "_start_worker", lambda index: _FakeWorker(index, sup.source, sup.cfg))
    sup.workers = [sup._start_worker(0), sup._start_worker(1)]
    return path, sup


def _write(path: Path, server: str) -> None:
    path.write_text(yaml.safe_dump({"backends": {"app": {"servers": [server]}}, "model": {"enabled": False}, "workers": 2}))


def _serving(sup: Supervisor) -> list[tuple[str, str]]:
    """Each worker's backend and model version."""
    return [(w.serving.backends["app"].servers[0].url, w.serving.model.version) for w in sup.workers]  # type: ignore[attr-defined]


@pytest.mark.parametrize("change", ["reload", "model swap"])
async def test_a_worker_replaced_during_a_reload_serves_the_config_it_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                              change: str) -> None:
    path, sup = _supervisor(tmp_path, monkeypatch)
    first, second = sup.workers
    second.answer.clear()  # type: ignore[attr-defined]  # the change reaches worker 0, then waits on worker 1
    if change == "reload":
        _write(path, "http://127.0.0.1:10")
        expected = ("http://127.0.0.1:10", "latest")
        reload = asyncio.create_task(sup.reload())
    else:
        expected = ("http://127.0.0.1:9", "1.7.0")
        reload = asyncio.create_task(sup.swap_model({"version": "1.7.0"}))
    await asyncio.wait_for(second.asked.wait(), 10)  # type: ignore[attr-defined]
    assert _serving(sup)[0] == expected  # worker 0 has taken the change; the supervisor has not committed it yet
    first.process.alive = False  # type: ignore[attr-defined]  # worker 0 dies ...
    replace = asyncio.create_task(sup._replace(0, first))  # ... and the watcher replaces it
    await asyncio.sleep(0)
    second.answer.set()  # type: ignore[attr-defined]

    assert await asyncio.wait_for(reload, 10) == []
    await asyncio.wait_for(replace, 10)
    assert sup.workers[0] is not first
    assert _serving(sup) == [expected, expected]


async def test_a_reload_does_not_wait_for_a_worker_that_is_being_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replacement waits for the reload; the reload must not wait for it: the dead worker's answer is a problem."""
    path, sup = _supervisor(tmp_path, monkeypatch)
    first, second = sup.workers
    first.answer.clear()  # type: ignore[attr-defined]
    _write(path, "http://127.0.0.1:10")
    reload = asyncio.create_task(sup.reload())
    await asyncio.wait_for(first.asked.wait(), 10)  # type: ignore[attr-defined]
    second.process.alive = False  # type: ignore[attr-defined]  # worker 1 dies before the reload reaches it
    replace = asyncio.create_task(sup._replace(1, second))
    await asyncio.sleep(0)
    first.answer.set()  # type: ignore[attr-defined]

    problems = await asyncio.wait_for(reload, 10)  # it answers (worker 1's part may be a problem) ...
    assert all(p.startswith("worker 1: no answer to reload") for p in problems)
    await asyncio.wait_for(replace, 10)  # ... and then the slot is filled, with the config in force
    assert sup.workers[1] is not second
    assert sup.workers[1].serving == sup.cfg  # type: ignore[attr-defined]
    # worker 0 took the change before the reload failed: it went back, so the two serve the same config
    assert _serving(sup) == [("http://127.0.0.1:9", "latest")] * 2


@pytest.mark.parametrize("change", ["reload", "model swap"])
async def test_a_change_one_worker_refuses_is_taken_back_by_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       change: str) -> None:
    """The running config stays in force on every worker, not on the ones after the refusal only."""
    path, sup = _supervisor(tmp_path, monkeypatch)
    first, second = sup.workers
    second.refuse = {"reload": ["gw.yaml: rules: cannot read"], "model": ["model: cannot load"]}  # type: ignore[attr-defined]
    if change == "reload":
        _write(path, "http://127.0.0.1:10")
        problems = await sup.reload()
    else:
        problems = await sup.swap_model({"version": "1.7.0"})
    assert len(problems) == 1 and problems[0].startswith("worker 1: ")
    assert first.kinds == ["reload" if change == "reload" else "model", "restore"]  # type: ignore[attr-defined]
    assert _serving(sup) == [("http://127.0.0.1:9", "latest")] * 2
    assert sup.workers[0].source is sup.source and sup.source.model_swap is None  # type: ignore[attr-defined]


async def test_a_worker_that_cannot_go_back_is_drained_for_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, sup = _supervisor(tmp_path, monkeypatch)
    first, second = sup.workers
    second.refuse = {"reload": ["no"]}  # type: ignore[attr-defined]
    first.refuse = {"restore": ["the old model file is gone"]}  # type: ignore[attr-defined]
    _write(path, "http://127.0.0.1:10")
    problems = await sup.reload()
    assert problems[0] == "worker 1: no"
    assert problems[1].startswith("worker 0: could not go back to the config in force") and "old model file" in problems[1]
    for _ in range(100):  # the drain runs in the background; the watcher then replaces the worker that exited
        if not first.process.is_alive():
            break
        await asyncio.sleep(0.01)
    assert first.kinds[-1] == "drain" and not first.process.is_alive()  # type: ignore[attr-defined]
    await sup._replace(0, first)
    assert _serving(sup) == [("http://127.0.0.1:9", "latest")] * 2
