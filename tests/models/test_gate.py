"""models.gate: the R gate's thresholds, its line, and a small end-to-end run with the shipped 1.7.0 on small sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models import gate

REPOSITORY = Path(__file__).resolve().parents[2] / "models" / "repository"
SMALL = ["--repository", str(REPOSITORY), "--version", "1.7.0", "--rows-scale", "0.02", "--only", "C3,N6,DQ,oneclick2,restwrites"]


def _sample(hb: float, hc: float, ab: float, bb: float) -> dict[str, float]:
    return {"humans_blocked": hb, "humans_challenged": hc, "attacks_blocked": ab, "bad_bots_stopped": bb}


def _people(hb: float, hc: float) -> dict[str, float]:
    return {"humans_blocked": hb, "humans_challenged": hc}


def test_thresholds_cover_every_set_and_nothing_else() -> None:
    assert set(gate.THRESHOLDS) == set(gate.BY_NAME)
    for s in gate.SETS:
        assert set(gate.THRESHOLDS[s.name]) <= set(gate.SAMPLE_FIGURES if s.sample else gate.PEOPLE_FIGURES)


def test_failures_mark_each_figure_outside_its_limit() -> None:
    assert gate.failures("C3", _sample(0.05, 0.5, 98.3, 95.5)) == set()  # limits are inclusive
    assert gate.failures("C4", _sample(0.074, 0.51, 98.29, 95.49)) == set(gate.SAMPLE_FIGURES)
    assert gate.failures("N6", _sample(0.0, 0.15, 98.298, 96.0)) == {"attacks_blocked"}  # one request short of the limit
    assert gate.failures("DQ", _people(0.30, 9.0)) == {"humans_blocked"}  # DQ's challenged figure is reported only
    assert gate.failures("docs2", _people(3.57, 40.0)) == set() and gate.failures("docs2", _people(3.58, 0.0)) == {"humans_blocked"}
    assert gate.failures("restwrites", _people(0.1, 1.0)) == set()
    assert gate.failures("restwrites", _people(14.47, 27.6)) == {"humans_blocked", "humans_challenged"}
    assert gate.failures("N9", {"humans_blocked": 0.0, "humans_challenged": 0.0, "attacks_blocked": None, "bad_bots_stopped": 99.0}) == {
        "attacks_blocked"}  # a figure that could not be measured does not pass


def test_gate_line_has_the_established_form() -> None:
    results = {"C3": _sample(0.0, 0.12, 99.207, 96.749), "N6": _sample(0.015, 0.13, 99.01, 95.49),
               "DQ": _people(0.35, 0.95), "oneclick2": _people(0.0, 0.0), "restwrites": _people(0.0, 0.0333)}
    line, ok = gate.gate_line("R6a", 0.5, results)
    assert not ok
    assert line == ("R6a        ch 0.5: fail  C3 0.000/0.12/99.21/96.75  N6 0.015/0.13/99.01/95.49✗  DQ 0.35✗/0.95  "
                    "oneclick2 0.00/0.00  restwrites 0.00/0.03")
    results["N6"]["bad_bots_stopped"] = 96.44
    results["DQ"]["humans_blocked"] = 0.025
    line, ok = gate.gate_line("J1x", 0.5, results)
    assert ok and line.startswith("J1x        ch 0.5: PASS  C3 ") and "✗" not in line and " DQ 0.03/0.95 " in line


def test_unpinned_sets_are_held_to_limits_re_derived_from_the_reference() -> None:
    """DQ and docs2 cannot be rebuilt as recorded: their limits keep the recorded margins over the reference's figures
    on the same files (DQ: at least 0.125 and the reference + 0.10; docs2: the reference + 1.58)."""
    assert {s.name for s in gate.SETS if s.pinned is None} == set(gate.RELATIVE)
    limits = gate.relative_limits({"DQ": _people(0.0, 0.3), "docs2": _people(1.885, 9.815)})
    assert limits["DQ"]["humans_blocked"] == ("<=", 0.125) and limits["docs2"]["humans_blocked"] == ("<=", 3.465)
    assert gate.relative_limits({"DQ": _people(0.05, 0.3)})["DQ"]["humans_blocked"] == ("<=", 0.15)
    assert limits["C3"] == gate.THRESHOLDS["C3"] and gate.relative_limits({}) == gate.THRESHOLDS
    assert gate.failures("docs2", _people(3.5, 0.0)) == set() and gate.failures("docs2", _people(3.5, 0.0), limits) == {"humans_blocked"}


def test_small_end_to_end_run_with_the_shipped_model(tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    code = gate.main([*SMALL, "--sets-dir", str(tmp_path / "a"), "--tag", "t", "--json", str(out)])
    report = json.loads(out.read_text())
    assert code == (0 if report["pass"] else 1)
    assert report["model"] == "clef-flash@1.7.0" and report["int8"] == "exact" and report["line"].startswith("t          ch 0.5: ")
    assert list(report["results"]) == ["C3", "N6", "DQ", "oneclick2", "restwrites"]
    for name, figs in report["results"].items():
        keys = gate.SAMPLE_FIGURES if gate.BY_NAME[name].sample else gate.PEOPLE_FIGURES
        assert all(0.0 <= figs[k] <= 100.0 for k in keys), (name, figs)
        assert figs["n"] == round(gate.BY_NAME[name].rows * 0.02)
    assert report["results"]["C3"]["attacks"] > 0 and report["results"]["DQ"]["people"] == report["results"]["DQ"]["n"]
    # DQ's limit came from 1.7.0 on the same file: the reference is the candidate here, so its DQ figure is its own
    assert report["reference"]["DQ"]["humans_blocked"] == report["results"]["DQ"]["humans_blocked"]
    assert report["thresholds"]["DQ"]["humans_blocked"][1] == max(0.125, round(report["results"]["DQ"]["humans_blocked"] + 0.10, 4))
    # the sets manifest is the same, byte for byte, when the sets are drawn again elsewhere
    manifest = (tmp_path / "a" / gate.MANIFEST).read_text()
    assert gate.main([*SMALL, "--sets-dir", str(tmp_path / "b")]) == code
    assert (tmp_path / "b" / gate.MANIFEST).read_text() == manifest
    entries = json.loads(manifest)["sets"]
    assert set(entries) == {f"{n}-{round(gate.BY_NAME[n].rows * 0.02)}" for n in report["results"]}
    assert all(e["sha256"] == report["results"][k.split("-")[0]]["sha256"] for k, e in entries.items())


def test_a_set_that_is_not_what_was_written_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sets = tmp_path / "sets"
    args = ["--repository", str(REPOSITORY), "--version", "1.7.0", "--rows-scale", "0.01", "--only", "oneclick2", "--sets-dir", str(sets)]
    assert gate.main(args) == 0
    path = sets / "oneclick2-40.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # a row lost
    assert gate.main(args) == 2
    assert "recorded when it was written" in capsys.readouterr().err
    path.unlink()  # written again by the recipe, it is the file recorded
    assert gate.main(args) == 0
    manifest = json.loads((sets / gate.MANIFEST).read_text())
    manifest["sets"]["oneclick2-40"]["sha256"] = "0" * 64  # as if the recipe had written another file first
    (sets / gate.MANIFEST).write_text(json.dumps(manifest))
    path.unlink()
    assert gate.main(args) == 2
    assert "now writes" in capsys.readouterr().err and not path.exists()


def test_only_rejects_an_unknown_set() -> None:
    with pytest.raises(SystemExit):
        gate.main(["--repository", str(REPOSITORY), "--version", "1.7.0", "--only", "C3,E7"])
