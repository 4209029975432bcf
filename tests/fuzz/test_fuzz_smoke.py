"""The fuzz targets in ``make test``: a short Hypothesis run of each, every seed and every saved finding replayed,
and one named test per finding of the long atheris runs (``make fuzz``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import TARGETS

HERE = Path(__file__).resolve().parent
SAVED = sorted((HERE / "corpus").glob("*/*")) + sorted((HERE / "regressions").glob("*"))

pytestmark = [pytest.mark.timeout(120), pytest.mark.fuzz]


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.binary(max_size=1500))
def test_fuzz_smoke(name: str, data: bytes) -> None:
    TARGETS[name](data)


@pytest.mark.parametrize("path", SAVED, ids=[f"{p.parent.name}/{p.name}" for p in SAVED])
def test_saved_inputs_replay(path: Path) -> None:
    """Seeds live in corpus/TARGET/, findings in regressions/TARGET-*.bin."""
    target = path.parent.name if path.parent.name != "regressions" else path.name.split("-", 1)[0]
    TARGETS[target](path.read_bytes())


# ---- findings, one test each

def test_a_record_with_lone_surrogates_is_refused_with_a_value_error() -> None:
    """The features target's first report: from_record raises UnicodeEncodeError on a lone surrogate that is not an
    escaped byte. That is the contract (a ValueError: replay counts the line unreadable, the decision API answers 400
    before any model), so the target now checks that only such records raise, and that escaped bytes still pass."""
    from gateway.features import from_record

    for record in ({"method": "GET", "path": "/a\udbdc"}, {"method": "GET", "path": "/", "headers": [["X-A", "b\ud800"]]},
                   {"method": "GET", "path": "/", "body": "d\ud83d"}):
        with pytest.raises(ValueError):
            from_record(record)
    assert from_record({"method": "GET", "path": "/", "headers": [["X-A", "\udcff"]]}).header_map["x-a"] == "\xff"


def test_a_rule_pattern_with_a_lone_surrogate_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    """Found by the rules target: an ``inputs`` pattern holding a lone surrogate (a YAML "\\udbdc" escape) crashed
    rule loading with UnicodeEncodeError inside RE2; it is now one more listed problem."""
    from gateway.clients import ClientState
    from gateway.config import ConfigError
    from gateway.rules import RuleOptions, load

    path = tmp_path / "r.yaml"
    path.write_text('rules:\n  - name: odd\n    inputs: "a\\udbdc"\n    action: block\n', encoding="utf-8")
    assert yaml.safe_load(path.read_text())["rules"][0]["inputs"] == "a\udbdc"
    with pytest.raises(ConfigError) as err:
        load([str(path)], RuleOptions(), ClientState())
    assert any("lone UTF-16 surrogate" in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("condition", ["host: 'a[\u00ed-\u00e5]b.example'", "path: '/x/*/[z-a]'"])
def test_a_glob_whose_class_is_not_a_range_is_a_problem_not_a_crash(tmp_path: Path, condition: str) -> None:
    """Found by the rules target: a host (or path) glob with a reversed character class ([í-å]) raised re.error out of
    rule loading (a traceback at start or reload); it is now one more listed problem."""
    from gateway.clients import ClientState
    from gateway.config import ConfigError
    from gateway.rules import RuleOptions, load

    path = tmp_path / "r.yaml"
    path.write_text(f"rules:\n  - name: odd\n    {condition}\n    action: block\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load([str(path)], RuleOptions(), ClientState())
    assert any("bad glob" in p and "bad character range" in p for p in err.value.problems), err.value.problems
