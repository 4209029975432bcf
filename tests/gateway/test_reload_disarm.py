"""A reload that takes protection away applies, but says so: a WARNING with the summary, a metric, the answer;
``clefgate check`` prints what a config arms and, ``--against`` the running one, what it would take away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.arming import Arming, disarms
from tests.harness import ROOT, config_for, http_get

pytestmark = pytest.mark.timeout(180)

RULES = {"files": [str(ROOT / "rules" / "default.yaml")], "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}
ARMED = {"rules": RULES, "model": {"enabled": True, "providers": ["cpu"]}, "challenge": {"dev_generate_secret": True}}


def test_disarms_table() -> None:
    full = Arming(40, 20, 5, 10, 10, "clef-flash@1.7.0", "score")
    cases = [
        (Arming(), ["rules_removed", "model_removed", "signatures_dropped", "fallback_removed"]),
        (Arming(20, 10, 5, 10, 10, "clef-flash@1.7.0", "score"), ["rules_halved"]),
        (Arming(21, 10, 5, 10, 10, "clef-flash@1.7.0", "score"), []),
        (Arming(40, 20, 5, 10, 10, "", "score"), ["model_removed"]),
        (Arming(40, 20, 5, 0, 0, "clef-flash@1.7.0", "score"), ["signatures_dropped", "fallback_removed"]),
        (Arming(40, 20, 5, 10, 10, "clef-flash@1.5.0", "allow"), []),
        (Arming(80, 40, 9, 10, 10, "clef-flash@1.7.0", "score"), []),
    ]
    for after, expected in cases:
        assert [what for what, _ in disarms(full, after)] == expected, after
    assert disarms(Arming(), Arming()) == []


def test_a_truncated_reload_applies_and_warns(demo_origin, start_gateway) -> None:
    gw = start_gateway(config_for(demo_origin.url, **ARMED), ready_timeout=120)
    assert http_get(gw.url + "/.env")[0] == 403
    status, answer = gw.reload(config_for(demo_origin.url))  # listen/admin/logging only: no rules, no model
    assert status == 200 and answer["reloaded"] is True, answer
    reasons = " | ".join(answer["disarmed"])
    for what in ("every rule removed", "model removed (clef-flash@", "payload signatures dropped", "every fallback rule removed"):
        assert what in reasons, reasons
    assert answer["armed"]["rules"] == 0 and answer["armed"]["model"] == ""
    warnings = [ln for ln in gw.process_log() if ln.get("level") == "warning" and "protects less" in ln.get("msg", "")]
    assert warnings and "rules 0" in warnings[-1]["after"] and "model clef-flash@" in warnings[-1]["before"], warnings
    text = gw.metrics()
    for what in ("rules_removed", "model_removed", "signatures_dropped", "fallback_removed"):
        assert f'clefgate_reload_disarm_total{{what="{what}"}} 1' in text, what
    status, answer = gw.reload(config_for(demo_origin.url, **ARMED))  # re-arming says nothing
    assert status == 200 and answer["disarmed"] == [] and answer["armed"]["rules"] > 10


def test_check_prints_what_a_config_arms_and_what_it_would_take_away(demo_origin, tmp_path: Path) -> None:
    running, new = tmp_path / "running.yaml", tmp_path / "new.yaml"
    running.write_text(yaml.safe_dump(config_for(demo_origin.url, **ARMED)))
    new.write_text(yaml.safe_dump(config_for(demo_origin.url)))
    proc = subprocess.run([sys.executable, "-m", "gateway", "check", "--config", str(new), "--against", str(running)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{new}: arms rules 0 (block 0, signatures 0), fallback rules 0 (signatures 0), model off, default score" in proc.stdout
    assert f"{running}: arms rules " in proc.stdout and "model clef-flash@" in proc.stdout
    assert f"{new}: warning: against {running}: every rule removed" in proc.stderr
    assert "model removed (clef-flash@" in proc.stderr
    same = subprocess.run([sys.executable, "-m", "gateway", "check", "--config", str(running), "--against", str(running)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert same.returncode == 0 and "warning: against" not in same.stderr, same.stderr
