"""Real browsers recorded on this machine (tests/data/browsers/: Chromium, Firefox ESR and Epiphany/WebKitGTK, direct
and behind an HTTP/2 nginx front) are never blocked by the shipped default config, model on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.tools import evaluate

RECORDINGS = sorted((Path(__file__).resolve().parents[1] / "data" / "browsers").glob("*.jsonl"))


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_no_recorded_person_is_blocked(recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate.main(["--data", str(recording), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    summary = result.get("summary", result)
    assert summary["n"] > 0 and summary["humans_blocked"] == 0.0, recording.name


def test_the_webkit_recording_is_there() -> None:
    assert {"epiphany", "epiphany-via-nginx-h2"} <= {p.stem for p in RECORDINGS}
