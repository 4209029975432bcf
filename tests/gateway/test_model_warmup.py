"""A model that loads but fails its warm-up run: a config problem (exit 2, the problem list), never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.decider.onnx import ModelLoadError, OnnxOptions, OnnxScorer
from tests.harness import ROOT, free_port
from tests.model_support import write_quote_model

pytestmark = pytest.mark.timeout(120)


def broken_config(tmp_path: Path, workers: int = 1) -> Path:
    write_quote_model(tmp_path / "repo", "broken", "1.0.0", single_row=True)
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump({
        "listen": f"127.0.0.1:{free_port()}", "admin": {"listen": f"127.0.0.1:{free_port()}"}, "workers": workers,
        "backends": {"app": {"servers": ["http://127.0.0.1:9"]}}, "challenge": {"dev_generate_secret": True},
        "model": {"enabled": True, "repository": "repo", "name": "broken", "version": "1.0.0", "providers": ["cpu"]}}))
    return path


def test_the_scorer_reports_a_failed_warm_up_as_a_load_problem(tmp_path: Path) -> None:
    write_quote_model(tmp_path, "broken", "1.0.0", single_row=True)
    with pytest.raises(ModelLoadError, match="warm-up run failed on cpu"):
        OnnxScorer(OnnxOptions(repository=tmp_path, name="broken", version="1.0.0", providers=("cpu",)))


@pytest.mark.parametrize("command,workers", [("serve", 1), ("serve", 2), ("check", 1)])
def test_a_model_failing_its_warm_up_ends_start_up_with_the_problem_list(tmp_path: Path, command: str, workers: int) -> None:
    path = broken_config(tmp_path, workers)
    proc = subprocess.run([sys.executable, "-m", "gateway", command, "--config", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=90)
    assert proc.returncode == (2 if command == "serve" else 1), proc.stderr[-3000:]
    assert "warm-up run failed on cpu" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_fallback_starts_with_the_breaker_open(tmp_path: Path, demo_origin, start_gateway) -> None:
    """Opt-in: ``model.on_warmup_failure: fallback`` serves, the breaker open, decider.fallback in force."""
    import json

    from tests.harness import config_for, http_get

    write_quote_model(tmp_path / "repo", "broken", "1.0.0", single_row=True)
    gw = start_gateway(config_for(demo_origin.url, challenge={"dev_generate_secret": True}, decider={"fallback": "forward"},
                                  model={"enabled": True, "repository": str(tmp_path / "repo"), "name": "broken", "version": "1.0.0",
                                         "providers": ["cpu"], "on_warmup_failure": "fallback"}))
    model = json.loads(http_get(gw.admin_url + "/readyz")[1])["workers"][0]["model"]
    assert model["breaker"] == "open", model
    assert http_get(gw.url + "/shop")[0] == 200
    text = gw.metrics()
    assert 'clefgate_model_failures_total{kind="breaker_open",model="broken@1.0.0"} 1.0' in text
    assert 'source="fallback",status="200",verdict="forward"} 1.0' in text
    assert "warm-up run failed on cpu" in gw.stderr()
