"""The gateway as a process: flags, admin endpoints, reloads (good and bad), drain, workers, `clefgate check`."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.harness import ROOT, Gateway, config_for, free_port, http_get, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    """A worker started in this process settles the heap (gc.freeze, thresholds): the tests after it get the collector back."""
    import gc

    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(float(self.path.partition("=")[2] or 1.0))
        body = f"served {self.path} by slow-origin\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def slow_origin() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_upstream_flag_needs_no_config_file(demo_origin, tmp_path: Path) -> None:
    port, admin = free_port(), free_port()
    out = open(tmp_path / "out", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--upstream", demo_origin.url, "--listen", f"127.0.0.1:{port}",
                             "--admin", f"127.0.0.1:{admin}", "--trusted-proxies", "127.0.0.1/32"],
                            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: http_get(f"http://127.0.0.1:{admin}/readyz")[0] == 200, 30, what="readyz")
        status, body = http_get(f"http://127.0.0.1:{port}/shop")
        assert status == 200 and b"Walnut desk" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        out.close()


def test_admin_endpoints(demo_origin, start_gateway) -> None:
    cfg = config_for(demo_origin.url, admin={"token": "t0ken-for-admin"})
    gw = start_gateway(cfg)
    assert http_get(gw.admin_url + "/healthz")[0] == 200
    status, body = http_get(gw.admin_url + "/readyz")
    assert status == 200 and b'"ready": true' in body
    http_get(gw.url + "/")
    text = gw.metrics()
    assert "# TYPE clefgate_requests_total counter" in text
    assert 'clefgate_requests_total{' in text
    assert "clefgate_worker_rss_bytes" in text
    assert http_get(gw.admin_url + "/admin/config")[0] == 401
    status, body = http_get(gw.admin_url + "/admin/config", headers={"Authorization": "Bearer t0ken-for-admin"})
    assert status == 200 and b'"token": "***"' in body and b"t0ken-for-admin" not in body


def test_an_admin_token_file_that_cannot_be_read_refuses_everyone(demo_origin, start_gateway, tmp_path: Path) -> None:
    """A ``file:`` token is read per request (rotation); emptied or removed, it must not turn admin auth off."""
    secret = tmp_path / "admin-token"
    secret.write_text("s3cret-admin-token\n")
    gw = start_gateway(config_for(demo_origin.url, admin={"token": f"file:{secret}"}))
    good = {"Authorization": "Bearer s3cret-admin-token"}
    assert http_get(gw.admin_url + "/admin/config")[0] == 401
    assert http_get(gw.admin_url + "/admin/config", headers={"Authorization": "Bearer s3cret-admin-tokeX"})[0] == 401
    assert http_get(gw.admin_url + "/admin/config", headers=good)[0] == 200
    for damage in (lambda: secret.write_text(""), secret.unlink):  # truncated mid-rotation, then deleted
        damage()
        for headers in ({}, {"Authorization": "Bearer "}, good):
            assert http_get(gw.admin_url + "/admin/config", headers=headers)[0] == 503
        req = urllib.request.Request(gw.admin_url + "/admin/reload", method="POST", data=b"{}", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 503
    secret.write_text("rotated-token\n")  # a rotated token takes effect without a restart
    assert http_get(gw.admin_url + "/admin/config", headers={"Authorization": "Bearer rotated-token"})[0] == 200
    assert http_get(gw.admin_url + "/admin/config", headers=good)[0] == 401


def test_bad_reload_keeps_the_running_config(demo_origin, start_gateway) -> None:
    gw = start_gateway(config_for(demo_origin.url))
    bad = config_for("htp://nowhere", limits={"max_headers": "many"})
    status, answer = gw.reload(bad)
    assert status == 422 and answer["reloaded"] is False
    problems = "\n".join(answer["problems"])
    assert "backends.app.servers[0].url: 'htp://nowhere' is not an http(s) URL" in problems
    assert "limits.max_headers: expected an integer, got 'many'" in problems
    assert http_get(gw.url + "/shop")[0] == 200  # still serving on the old config
    logged = [r for r in gw.process_log() if r.get("msg", "").startswith("reload rejected")]
    assert logged and any("htp://nowhere" in p for p in logged[0]["problems"])
    assert 'clefgate_config_reloads_total{result="error"} 1.0' in gw.metrics()


def test_good_reload_swaps_backends(demo_origin, slow_origin, start_gateway) -> None:
    gw = start_gateway(config_for(demo_origin.url))
    assert b"Walnut desk" in http_get(gw.url + "/shop")[1]
    status, answer = gw.reload(config_for(slow_origin))
    assert status == 200 and answer["reloaded"] is True and answer["generation"] == 2
    assert b"by slow-origin" in http_get(gw.url + "/shop")[1]
    # and back again through SIGHUP
    gw.reload(config_for(demo_origin.url), via="sighup")
    wait_until(lambda: b"Walnut desk" in http_get(gw.url + "/shop")[1], 10, what="SIGHUP reload")


def test_a_reload_stops_the_old_health_checks_at_once_not_after_the_drain(demo_origin, start_gateway) -> None:
    def config(path: str) -> dict:
        hc = {"path": path, "interval_s": 0.2, "timeout_s": 1.0, "unhealthy_threshold": 1, "healthy_threshold": 2}
        return config_for(demo_origin.url, timeouts={"drain_s": 30}, backends={"app": {"servers": [demo_origin.url], "health_check": hc}})

    gw = start_gateway(config("/no-such-health-page"))
    wait_until(lambda: http_get(gw.url + "/shop")[0] == 503, 10, what="down on a wrong health path")
    # the fix must not wait out the old config's 30 s drain, whose probes would keep failing into the same server
    assert gw.reload(config("/healthz"))[0] == 200
    wait_until(lambda: http_get(gw.url + "/shop")[0] == 200, 5, what="healthy under the fixed check")


def test_sigterm_drains_in_flight_requests(slow_origin, start_gateway) -> None:
    gw = start_gateway(config_for(slow_origin, timeouts={"drain_s": 10}))
    results: dict[str, object] = {}

    def slow_call() -> None:
        with httpx.Client(timeout=20) as client:
            results["response"] = client.get(gw.url + "/slow?s=1.5")

    t = threading.Thread(target=slow_call)
    t.start()
    time.sleep(0.5)  # the request is in flight at the origin
    gw.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: http_get(gw.admin_url + "/readyz")[0] == 503, 5, what="readyz to report draining")
    t.join(20)
    response = results["response"]
    assert isinstance(response, httpx.Response) and response.status_code == 200 and b"/slow" in response.content
    assert gw.proc.wait(20) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(gw.url + "/", timeout=2)


def test_workers_share_the_port_and_metrics_add_up(demo_origin, start_gateway) -> None:
    gw = start_gateway(config_for(demo_origin.url, workers=2))
    for _ in range(40):
        # a fresh connection each time so both workers get accepted connections
        assert httpx.get(gw.url + "/api/items", timeout=10).status_code == 200
    statuses = httpx.get(gw.admin_url + "/readyz", timeout=10).json()["workers"]
    assert len(statuses) == 2 and len({s["pid"] for s in statuses}) == 2
    text = gw.metrics()
    total = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                if line.startswith("clefgate_requests_total{") and 'status="200"' in line)
    assert total >= 40
    assert text.count("clefgate_worker_rss_bytes{") >= 2


def test_dead_worker_is_restarted(demo_origin, start_gateway) -> None:
    gw = start_gateway(config_for(demo_origin.url, workers=2))
    pids = {s["pid"] for s in httpx.get(gw.admin_url + "/readyz", timeout=10).json()["workers"]}
    victim = sorted(pids)[0]
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        answer = httpx.get(gw.admin_url + "/readyz", timeout=10).json()
        now = {s["pid"] for s in answer["workers"]}
        return victim not in now and len(now) == 2 and answer["ready"]

    wait_until(replaced, 60, interval=0.5, what="a replacement worker")
    assert httpx.get(gw.url + "/shop", timeout=10).status_code == 200
    assert "clefgate_worker_restarts_total 1.0" in gw.metrics()


def test_supervised_metrics_say_ready_and_count_a_reload_once(demo_origin, start_gateway) -> None:
    """With workers the supervisor merges its own values with the workers': ready is 1 when all workers are, and one
    reload is one reload (not one per worker plus the supervisor's)."""
    gw = start_gateway(config_for(demo_origin.url, workers=2))
    wait_until(lambda: "\nclefgate_ready 1.0\n" in gw.metrics(), 10, what="clefgate_ready 1 with both workers ready")
    assert gw.reload(gw.config)[0] == 200
    text = gw.metrics()
    assert 'clefgate_config_reloads_total{result="ok"} 1.0' in text and "\nclefgate_ready 1.0\n" in text


def test_a_restarted_worker_runs_the_config_in_force_not_the_file(demo_origin, slow_origin, start_gateway) -> None:
    """An edit of the file that was not reloaded must not reach a replacement worker."""
    gw = start_gateway(config_for(demo_origin.url, workers=2))
    edited = dict(gw.config, backends={"app": {"servers": [slow_origin]}})
    gw.write_config(edited)  # not reloaded
    victim = httpx.get(gw.admin_url + "/readyz", timeout=10).json()["workers"][0]["pid"]
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        answer = httpx.get(gw.admin_url + "/readyz", timeout=10).json()
        return answer["ready"] and victim not in {s["pid"] for s in answer["workers"]}

    wait_until(replaced, 30, interval=0.2, what="a replacement worker")
    for _ in range(30):  # fresh connections, so both workers answer some
        assert b"Walnut desk" in httpx.get(gw.url + "/shop", timeout=10, headers={"Connection": "close"}).content


def test_a_failed_worker_restart_backs_off_and_supervision_goes_on(demo_origin, start_gateway, tmp_path: Path) -> None:
    """A replacement that cannot start (its rules file went bad on disk) is retried later, with a growing delay,
    and once the file is fixed the slot is filled again."""
    rules = tmp_path / "rules.yaml"
    good = "rules:\n  - name: block-x\n    path: /x\n    action: block\n"
    rules.write_text(good)
    gw = start_gateway(config_for(demo_origin.url, workers=2, rules={"files": [str(rules)], "default": "allow"}))
    victim = httpx.get(gw.admin_url + "/readyz", timeout=10).json()["workers"][0]["pid"]
    rules.write_text("rules: [\n")
    os.kill(victim, signal.SIGKILL)

    def deaths() -> list[dict]:
        return [r for r in gw.process_log() if r.get("msg") == "worker died; restarting"]

    wait_until(lambda: len(deaths()) >= 3, 30, interval=0.2, what="three restarts of the slot")
    assert [r["in_s"] for r in deaths()[:3]] == [0.0, 0.5, 1.0]
    failed = [r for r in gw.process_log() if r.get("msg") == "worker restart failed"]
    assert failed and "rules.yaml" in failed[0]["error"]
    rules.write_text(good)

    def refilled() -> bool:
        answer = httpx.get(gw.admin_url + "/readyz", timeout=10).json()
        return answer["ready"] and len({s["pid"] for s in answer["workers"]} - {victim}) == 2

    wait_until(refilled, 30, interval=0.2, what="the slot filled again")
    assert httpx.get(gw.url + "/x", timeout=10).status_code == 403


def test_workers_that_cannot_start_make_serve_exit_2_with_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"listen: 127.0.0.1:{free_port()}\nadmin: {{listen: 127.0.0.1:{free_port()}}}\nworkers: 2\n"
                    "backends: {app: {servers: ['http://127.0.0.1:9']}}\nrules: {files: [no-such-rules.yaml]}\n")
    proc = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "no-such-rules.yaml: cannot read: No such file or directory" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("failure", ["admin port taken", "clef cannot load"])
def test_supervised_serve_exits_when_it_fails_after_the_workers_started(demo_origin, start_gateway, failure: str) -> None:
    """Workers must not be left serving unsupervised, nor the supervisor hang: all stop, serve exits non-zero."""
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    try:
        if failure == "admin port taken":
            cfg = config_for(demo_origin.url, workers=2, admin={"listen": f"127.0.0.1:{blocker.getsockname()[1]}"})
        else:
            cfg = config_for(demo_origin.url, workers=2, jev={"enabled": True}, clef={"enabled": True, "version": "99"})
        gw = start_gateway(cfg, wait_ready=False)
        code = gw.proc.wait(30)
    finally:
        blocker.close()
    assert code == (1 if failure == "admin port taken" else 2), gw.stderr()
    assert ("cannot start" if failure == "admin port taken" else "99") in gw.stderr()
    with pytest.raises(httpx.ConnectError):  # no worker left on the data port
        httpx.get(gw.url + "/shop", timeout=2)


async def test_a_late_worker_answer_is_not_taken_for_the_next_one() -> None:
    """A request to a worker that timed out must not leave its answer to be read as the answer to the next one."""
    import multiprocessing

    from gateway.supervisor import _WorkerHandle

    parent, child = multiprocessing.Pipe()
    delays = {"status": 0.5}

    def peer() -> None:  # answers each request with its kind, the first status late
        while True:
            try:
                msg = child.recv()
            except EOFError:
                return
            kind = next(x for x in msg if isinstance(x, str))
            time.sleep(delays.pop(kind, 0.0))
            child.send((*msg[:msg.index(kind) + 1], f"answer to {kind}"))

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    handle = _WorkerHandle(0, None, parent)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        await handle.ask("status", wait_s=0.1)
    assert await handle.ask("snapshot", wait_s=5.0) == "answer to snapshot"
    assert await handle.ask("status", wait_s=5.0) == "answer to status"
    handle.close()
    child.close()
    thread.join(5)


def test_a_model_swap_gives_way_when_the_file_changes_its_model(tmp_path: Path) -> None:
    """POST /admin/model is a stop-gap over the file: kept across reloads of an unchanged model section, dropped
    once the operator edits it (the edit must take effect)."""
    import yaml

    from gateway.runtime import ConfigSource

    path = tmp_path / "gw.yaml"

    def write(version: str, **extra: object) -> None:
        path.write_text(yaml.safe_dump({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}},
                                        "model": {"enabled": False, "version": version}, **extra}))

    write("1.5.0")
    swapped = ConfigSource(str(path)).with_model({"version": "1.7.0"})
    assert swapped.load().model.version == "1.7.0"
    write("1.5.0", timeouts={"drain_s": 3})  # another part of the file changed: the swap stays
    assert swapped.load().model.version == "1.7.0"
    write("1.5.1")
    assert swapped.load().model.version == "1.5.1"
    cfg, kept = swapped.resolve()
    assert cfg.model.version == "1.5.1" and kept.model_swap is None


def test_check_warns_when_the_policy_is_not_the_one_the_model_was_read_with(tmp_path: Path) -> None:
    """Clef-flash 1.7.0 records challenge_risk 0.5 in its manifest (the default): another value is allowed, and said."""
    base = "backends:\n  app:\n    servers: [http://127.0.0.1:8000]\nchallenge: {dev_generate_secret: true}\n" \
           "model: {enabled: true, version: '1.7.0'}\n"
    for policy, warned in (("policy: {challenge_risk: 0.6}\n", True), ("", False)):
        path = tmp_path / "c.yaml"
        path.write_text(base + policy, encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "gateway", "check", "--config", str(path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and ": ok (" in proc.stdout, proc.stderr
        expected = f"{path}: warning: policy.challenge_risk is 0.6, but clef-flash@1.7.0 was evaluated with 0.5"
        assert (expected in proc.stderr) is warned, proc.stderr


@pytest.mark.parametrize("name,code", [("good/minimal.yaml", 0), ("good/full.yaml", 0), ("bad/types_and_values.yaml", 1),
                                       ("bad/references.yaml", 1)])
def test_check_command(name: str, code: int) -> None:
    path = Path(__file__).resolve().parents[1] / "config" / name
    proc = subprocess.run([sys.executable, "-m", "gateway", "check", "--config", str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == code, proc.stderr
    if code:
        for line in path.read_text().splitlines():
            if line.startswith("# expect: "):
                assert line[len("# expect: "):] in proc.stderr
    else:
        assert ": ok (" in proc.stdout


def test_invalid_config_refuses_to_start(tmp_path: Path) -> None:
    bad = Path(__file__).resolve().parents[1] / "config" / "bad" / "unknown_keys.yaml"
    proc = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(bad)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "listne: unknown key (did you mean 'listen'?)" in proc.stderr


def test_gateway_constructor_reports_a_crash(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="gateway exited"):
        Gateway(tmp_path, {"backends": {"a": {"servers": ["http://127.0.0.1:1"]}}, "listen": "256.0.0.1:1"}, ready_timeout=20)


async def test_concurrent_model_swaps_take_turns_and_a_failed_one_does_not_undo_the_other(tmp_path: Path) -> None:
    """Two POST /admin/model at once, the first to a version that does not exist: the second must really swap
    (it answers "swapped"), and the worker's source must name the version that serves."""
    import asyncio

    import yaml

    from gateway import config as configmod
    from gateway.admin import LocalControl
    from gateway.runtime import ConfigSource, RuntimeRef, build_runtime, close_runtime
    from gateway.worker import Worker

    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}},
                                    "model": {"enabled": True, "version": "2.1.0", "providers": ["cpu"]},
                                    "challenge": {"dev_generate_secret": True}, "timeouts": {"drain_s": 0.1}}))
    cfg = configmod.load(str(path))
    worker = Worker(ConfigSource(str(path)), cfg, reuse_port=False)
    worker.ref = RuntimeRef(await build_runtime(cfg))
    control = LocalControl(worker)
    missing, present = await asyncio.gather(control.swap_model({"version": "9.9.9"}), control.swap_model({"version": "1.7.0"}))
    assert missing and "9.9.9" in missing[0] and present == []
    assert (await control.statuses())[0]["model"]["model"] == "clef-flash@1.7.0"
    assert worker.source.model_swap == {"version": "1.7.0"} and worker.source.overrides == {}
    await asyncio.sleep(1.2)  # the replaced runtime is retired after the drain deadline
    await close_runtime(worker.runtime)


async def test_a_reload_whose_clef_cannot_load_changes_nothing(tmp_path: Path) -> None:
    """The decision API's clef is loaded before the worker swaps: a reload it rejects leaves the old rules serving."""
    import yaml

    from gateway import config as configmod
    from gateway.admin import LocalControl
    from gateway.jev import DecisionApi
    from gateway.runtime import ConfigSource, RuntimeRef, build_runtime, close_runtime
    from gateway.worker import Worker

    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"rules:\n  - name: block-{name}\n    path: /{name}\n    action: block\n")
    path = tmp_path / "gw.yaml"

    def write(rules: str, **extra: object) -> None:
        path.write_text(yaml.safe_dump({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "model": {"enabled": False},
                                        "rules": {"files": [rules], "default": "allow"}, **extra}))

    write("a.yaml")
    cfg = configmod.load(str(path))
    worker = Worker(ConfigSource(str(path)), cfg, reuse_port=False)
    worker.ref = RuntimeRef(await build_runtime(cfg))
    control = LocalControl(worker, DecisionApi(lambda: worker.runtime.config, lambda: worker.runtime.decider))
    write("b.yaml", clef={"enabled": True, "version": "9.9.9"})
    problems = await control.reload()
    assert problems and problems[0].startswith("clef:") and "9.9.9" in problems[0]
    rules = worker.runtime.pipeline.rules
    assert worker.runtime.generation == 1 and rules is not None and [r.label for r in rules.rules] == ["block-a"]
    write("b.yaml")  # the same change without the clef that cannot load goes through
    assert await control.reload() == []
    rules = worker.runtime.pipeline.rules
    assert rules is not None and [r.label for r in rules.rules] == ["block-b"]
    await close_runtime(worker.runtime)


async def test_a_worker_goes_back_to_the_config_in_force(tmp_path: Path) -> None:
    """The supervisor's "restore": a worker that took a reload another worker refused serves the old config again."""
    import asyncio

    import yaml

    from gateway.runtime import ConfigSource, RuntimeRef, build_runtime, close_runtime
    from gateway.worker import Worker

    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"rules:\n  - name: block-{name}\n    path: /{name}\n    action: block\n")
    path = tmp_path / "gw.yaml"

    def write(rules: str) -> None:
        path.write_text(yaml.safe_dump({"backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "model": {"enabled": False},
                                        "rules": {"files": [rules], "default": "allow"}, "timeouts": {"drain_s": 0.1}}))

    write("a.yaml")
    cfg, source = ConfigSource(str(path)).resolve()
    worker = Worker(source, cfg, reuse_port=False)
    worker.ref = RuntimeRef(await build_runtime(cfg))
    write("b.yaml")
    assert await worker.reload() == []
    assert [r.label for r in worker.runtime.pipeline.rules.rules] == ["block-b"]  # type: ignore[union-attr]
    reloaded = worker.runtime.generation
    assert await worker.restore(source, cfg) == []  # the file still says b.yaml: the config given wins
    assert [r.label for r in worker.runtime.pipeline.rules.rules] == ["block-a"]  # type: ignore[union-attr]
    assert worker.runtime.generation > reloaded and worker.source is source
    await asyncio.sleep(1.2)  # the replaced runtimes are retired after the drain deadline
    await close_runtime(worker.runtime)


def test_check_names_a_clef_version_that_does_not_exist(tmp_path: Path) -> None:
    from gateway import config as configmod
    from gateway.config import ConfigError
    from gateway.runtime import check_config

    path = tmp_path / "c.yaml"
    path.write_text("backends:\n  app:\n    servers: [http://127.0.0.1:8000]\nmodel: {enabled: false}\n"
                    "clef: {enabled: true, version: '9.9.9'}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        check_config(configmod.load(str(path)))
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith("clef: ") and "9.9.9" in err.value.problems[0]


async def test_a_reload_whose_runtime_cannot_start_releases_what_it_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime that fails to start is closed again: the pool of a server only it configured does not stay open,
    and the running runtime keeps the pools it shares with it."""
    import yaml

    from gateway import worker as workermod
    from gateway.runtime import ConfigSource, RuntimeRef, build_runtime, close_runtime

    path = tmp_path / "gw.yaml"

    def write(*servers: str) -> None:
        path.write_text(yaml.safe_dump({"backends": {"app": {"servers": list(servers)}}, "model": {"enabled": False}}))

    write("http://127.0.0.1:9")
    cfg, source = ConfigSource(str(path)).resolve()
    worker = workermod.Worker(source, cfg, reuse_port=False)
    worker.ref = RuntimeRef(await build_runtime(cfg))
    running = worker.runtime
    write("http://127.0.0.1:9", "http://127.0.0.1:10")
    built: list[object] = []

    async def fails(new: object) -> None:
        built.append(new)
        raise RuntimeError("the shared state could not start")

    monkeypatch.setattr(workermod, "start_runtime", fails)
    problems = await worker.reload()
    assert problems and "could not start" in problems[0] and worker.runtime is running
    [new] = built
    added = [pool for server, pool in new.pools.by_server.items() if server.url.endswith(":10")]  # type: ignore[attr-defined]
    kept = [pool for server, pool in running.pools.by_server.items() if server.url.endswith(":9")]
    assert len(added) == 1 and added[0].closed and len(kept) == 1 and not kept[0].closed
    await close_runtime(running)


def test_settling_the_heap_freezes_what_is_kept_and_collects_what_a_retired_runtime_left() -> None:
    """settle_heap thaws before collecting: a cycle frozen by an earlier settle (a retired runtime's) is collected."""
    import gc
    import weakref

    from gateway.worker import GC_THRESHOLDS, settle_heap

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    gone = weakref.ref(a)
    settle_heap()  # the cycle is alive: frozen with the rest
    assert gc.get_freeze_count() > 0 and gc.get_threshold() == GC_THRESHOLDS
    del a, b
    gc.collect()
    assert gone() is not None  # frozen: no collection sees it
    settle_heap()
    assert gone() is None
    assert gc.get_freeze_count() > 0
