"""`clefgate demo` — the newcomer's first command — starts, loads every shipped rule file and the model, and decides."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from gateway import config as config_mod
from gateway.tools.demo import default_config
from tests.harness import free_port

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"


def test_embedded_config_names_only_files_that_exist(tmp_path: Path) -> None:
    """Written anywhere, the demo's config loads: rule and fallback rule paths are absolute and present."""
    raw = default_config("http://127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
    assert raw["rules"]["files"] and raw["rules"]["fallback_files"]
    for path in raw["rules"]["files"] + raw["rules"]["fallback_files"]:
        assert Path(path).is_absolute() and Path(path).is_file(), path
    cfg_path = tmp_path / "elsewhere" / "demo.yaml"
    cfg_path.parent.mkdir()
    cfg_path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    cfg = config_mod.load(str(cfg_path))
    assert cfg.rules.fallback_files == raw["rules"]["fallback_files"]


def test_demo_serves_the_site_blocks_a_probe_and_opens_its_console(tmp_path: Path) -> None:
    """The demo prints the console with a generated secret, a decision log and a replay line; no onnxruntime error lines
    on a host without a usable GPU; the secret signs in to the console, which shows the blocked probe by its reference;
    and the printed replay line runs on what was served."""
    listen, admin, origin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}", free_port()
    out_path = tmp_path / "demo.out"
    out = open(out_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "demo", "--listen", listen, "--admin", admin, "--origin-port", str(origin)],
                            stdout=out, stderr=subprocess.STDOUT, text=True, env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + 90
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = httpx.get(f"http://{admin}/readyz", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                ready = False
            if ready:
                break
            time.sleep(0.3)
        if not ready:
            proc.kill()
            raise AssertionError(f"demo did not become ready (exit {proc.poll()}):\n{out_path.read_text()[-3000:]}")
        printed = out_path.read_text()
        assert f"console:                    http://{admin}/console/" in printed
        secret = re.search(r"console admin secret: +(\S+)", printed)
        log_path = re.search(r"decision log: +(\S+)", printed)
        replay = re.search(r"then: clefgate replay --config (\S+) (\S+)", printed)
        assert secret and log_path and replay and replay.group(2) == log_path.group(1), printed
        assert Path(log_path.group(1)).parent.parent == tmp_path  # a fresh folder in the temporary directory
        browser = {"User-Agent": CHROME, "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
                   "Accept-Language": "en-US,en;q=0.9", "Accept-Encoding": "gzip, deflate, br",
                   "Sec-Ch-Ua": '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"', "Sec-Ch-Ua-Mobile": "?0",
                   "Sec-Ch-Ua-Platform": '"Windows"', "Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-User": "?1",
                   "Sec-Fetch-Dest": "document", "Upgrade-Insecure-Requests": "1"}
        with httpx.Client(base_url=f"http://{listen}", timeout=10.0) as client:
            page = client.get("/", headers=browser)
            assert page.status_code == 200 and page.headers["x-clefgate-verdict"] == "forward", dict(page.headers)
            probe = client.get("/.env", headers={"User-Agent": "curl/8.5.0", "Accept": "*/*"})
            assert probe.status_code == 403 and probe.headers["x-clefgate-verdict"] == "block", dict(probe.headers)
            reference = re.search(r"<code>([^<]+)</code>", probe.text) or re.search(r'"request_id": "([^"]+)"', probe.text)
            assert reference, probe.text
        metrics = httpx.get(f"http://{admin}/metrics", timeout=5.0).text
        assert "clefgate_" in metrics
        with httpx.Client(base_url=f"http://{admin}", timeout=10.0) as console:
            login = console.post("/console/login", data={"token": secret.group(1)}, headers={"Origin": f"http://{admin}"})
            assert login.status_code == 303 and "clefgate_console=" in login.headers["set-cookie"]
            console.cookies.set("clefgate_console", login.cookies["clefgate_console"])
            found = console.get(f"/console/decision/{reference.group(1)}")
            assert found.status_code == 200 and "block-secret-files" in found.text, found.text[:500]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(log_path.group(1)).stat().st_size == 0:
            time.sleep(0.2)
        replayed = subprocess.run([sys.executable, "-m", "gateway", "replay", "--config", replay.group(1), "--json", replay.group(2)],
                                  capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
        assert replayed.returncode == 0, replayed.stderr[-2000:]
        assert json.loads(replayed.stdout)["requests"] >= 2
        startup = out_path.read_text()
        assert "onnxruntime:" not in startup and "ONNXRuntimeError" not in startup, startup[-3000:]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        out.close()
