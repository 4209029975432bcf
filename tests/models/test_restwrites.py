"""models.data.restwrites and models.data.evasions: measurement sets (people's REST writes in unseen shapes; injections in evasion encodings)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from gateway.features import from_record, model_input
from models.data import restwrites, site


def _shape(target: str) -> str:
    """A path with its numbers and hex ids replaced, for comparing shapes."""
    return "/".join("#" if part.isdigit() or (len(part) >= 8 and all(c in "0123456789abcdef" for c in part)) else part
                    for part in target.split("?")[0].split("/"))


def test_restwrites_are_people_writing_from_held_out_browsers(tmp_path: Path) -> None:
    out = tmp_path / "restwrites.jsonl"
    assert restwrites.main(["--rows", "90", "--seed", "3", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 90 and {r["label"] for r in rows} == {"human"}
    assert {r["method"] for r in rows} == {"PUT", "PATCH", "DELETE"}
    for r in rows:
        names = {n.lower(): v for n, v in r["headers"]}
        assert (r["body"] is None) == (r["method"] == "DELETE")
        assert r["body"] is None or names["content-type"] == "application/json"
        assert names.get("sec-fetch-mode", "cors") != "navigate"  # a script's request, not a page load
        # browsers send Origin on every request whose method is neither GET nor HEAD (Fetch standard), body or not
        assert names["origin"] == "https://" + names["host"]
        model_input(from_record(r))
    assert rows == list(restwrites.rows(90, 3))


def test_restwrite_shapes_are_on_no_side_and_in_no_measurement_split() -> None:
    rng = random.Random(2)
    measured = {_shape(make(site.Draw(i, "eval")).target) for i, (_, _, make) in enumerate(restwrites.WRITES)}
    templates = site.REST_WRITES + tuple(t for split in ("train", "calib", "eval", "unseen-releases") for t in site.templates(split))
    known = {_shape(t.make(rng).target) for t in templates for _ in range(30)}
    assert len(measured) == len(restwrites.WRITES) and not measured & known


def test_evasion_set_rewrites_the_calibration_sides_injections(tmp_path: Path) -> None:
    from collections import Counter

    from models.data import attacks, evasions

    out = tmp_path / "evasions.jsonl"
    assert evasions.main(["--rows", "300", "--seed", "2", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["label"] for r in rows} == {"attack"} and rows == list(evasions.rows(300, 2))
    kinds = Counter(r["source"].rsplit("/", 1)[1] for r in rows if r["source"].count("/") == 3)
    assert set(kinds) == {name for name, _ in attacks.EVASIONS}
    calib = {p.id for p in attacks.productions("calib")}
    assert all(r["source"].split("/")[1] in calib for r in rows if r["source"] != "attack/probe")
    for r in rows[:50]:
        model_input(from_record(r))
