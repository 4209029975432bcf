"""The house rules a newcomer relies on: the tree speaks in the present tense, the README and the model card stay
short, each benchmark has one current report, and two Clef-flash versions ship.

History (which run measured what, in what order models were tried) lives in git and in CHANGELOG.md; a file that
cites a numbered work session, a round, a "look" at a split or an exam by its number is out of date the day it is
written.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Words that tell history instead of the present: numbered work sessions, run labels ("sNN", a dated folder ending in
# one), rounds ("round" and a letter), numbered looks at a split and exams named by their order. The examples below
# are written in pieces (N) so that this file does not carry the very words it looks for.
_ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth"
HISTORY = re.compile(
    r"\bsessions? [0-9]+\b"
    r"|(?<![A-Za-z0-9_./-])s[0-9]{1,2}\b(?!://|/|\.)"
    r"|-s[0-9]{1,2}/"
    r"|\bround [A-Z][0-9]*\b"
    r"|\bround [a-z][0-9]+\b"
    r"|\blook ?[0-9]+\b"
    rf"|\b(?:{_ORDINALS}) (?:look|exam)\b"
    r"|\bexam ?[0-9]\b",
    re.IGNORECASE,
)
# The exceptions are not history: Amazon S3's name in the attacks that go after its credentials.
# payload lists and captures taken from other projects as data: their text is theirs, not the project's words
THIRD_PARTY_DATA = ("models/corpus/data/",)
ALLOWED = re.compile(r"\baws s3\b|\bs3 (?:bucket|cp)\b", re.IGNORECASE)
N = 1  # a digit, kept apart from the words it completes
BINARY = (".onnx", ".png", ".npz", ".pt", ".gz", ".whl")


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def history_words(text: str) -> list[str]:
    """Every history phrase in ``text``, each with its line number."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        cleaned = ALLOWED.sub("", line)
        found += [f"{number}: {m.group(0)!r} in {line.strip()[:120]}" for m in HISTORY.finditer(cleaned)]
    return found


@pytest.mark.parametrize(("text", "expected"), [
    (f"measured in session {N}7", 1), (f"Session {N}2's closure run", 1), (f"see loadtest/reports/2026-12-02-s{N}8/x", 1),
    (f"the s{N}2 report", 1), ("round " + "Z6 failed", 1), ("round " + "R passed", 1), (f"eval look {N}4", 1), (f"look{N}4/eval.txt", 1),
    ("the eleventh look", 1), (f"make exam{N}", 1), ("the third exam", 1), (f"exam {N}", 1),
    ("an onnxruntime session runs", 0), ("people sessions stuck", 0), ("aws s3 cp x s3://bkp", 0), ("/.s3/", 0),
    ("round(x, 2)", 0), ("look at the log", 0), ("the unseen-protocols split", 0), ("rounds 1 to 3", 0),
])
def test_the_history_pattern_finds_history_and_nothing_else(text: str, expected: int) -> None:
    assert len(history_words(text)) == expected, history_words(text)


def test_no_history_words_in_the_tree() -> None:
    """No file of the tree, its name included, cites a numbered session, a round, a look or an exam number (this file
    alone names them, to say what is looked for)."""
    problems: list[str] = []
    for path in tracked_files():
        if path == Path(__file__).resolve():
            continue
        rel = path.relative_to(ROOT).as_posix()
        problems += [f"{rel} (file name): {w}" for w in history_words(rel)]
        if path.suffix in BINARY or not path.is_file() or rel.startswith(THIRD_PARTY_DATA):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        problems += [f"{rel}:{w}" for w in history_words(text)]
    assert not problems, "history words in the tree (say it in the present tense; history lives in git):\n" + "\n".join(problems[:40])


def test_the_readme_is_short_and_shows_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text
    assert "docs/config.md" in text


def test_the_model_card_is_short() -> None:
    assert len((ROOT / "models" / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_one_current_report_per_benchmark() -> None:
    """``loadtest/reports/`` holds one folder per benchmark of ``clefgate bench`` (no dated or run-named folders),
    each with what ``make bench`` writes into it, and no scripts."""
    from loadtest.bench import COMMANDS

    reports = ROOT / "loadtest" / "reports"
    benchmarks = {name for name in COMMANDS if name != "report"} | {"soak"}  # make soak writes its one report too
    tracked = {p.relative_to(reports) for p in tracked_files() if p.is_relative_to(reports)}
    folders = {p.parts[0] for p in tracked if len(p.parts) > 1}
    assert folders == benchmarks
    assert not [p for p in tracked if len(p.parts) > 2], "a report folder has sub-folders"
    assert not [p for p in tracked if p.suffix in (".py", ".sh")], "scripts belong in loadtest/, not among the reports"
    for name, report in (("proxy", "proxybench.txt"), ("rules", "rulesbench.txt"), ("model", "summary.txt"), ("mixed", "summary.md")):
        assert Path(name, report) in tracked, f"loadtest/reports/{name}/{report}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for name in benchmarks - {"soak"}:
        assert re.search(rf"^bench-{name}:", makefile, re.M), f"make bench-{name}"
        assert f"$(REPORTS)/{name}" in makefile, f"make bench-{name} writes loadtest/reports/{name}/"
    assert re.search(r"^soak:", makefile, re.M), "make soak"


def test_two_clef_flash_versions_ship() -> None:
    """The current Clef-flash and one rollback version; the others are rebuilt from their configs."""
    from gateway.decider import manifest as mf
    from gateway.decider.onnx import DEFAULT_REPOSITORY

    assert mf.versions(DEFAULT_REPOSITORY, "clef-flash") == ["1.7.0", "2.1.0"]
    assert mf.load(mf.resolve(DEFAULT_REPOSITORY, "clef-flash")).version == "2.1.0"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for config in (ROOT / "models" / "configs").glob("clef-flash*.yaml"):
        assert config.name in makefile, f"no make target builds {config.name}"


def test_the_changelog_has_an_entry_per_shipped_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for heading in ("## clefgate 0.1.0", "## Clef-flash 2.1.0", "## Clef-flash 1.7.0", "## clef 1"):
        assert heading in text


def test_tests_mirror_the_packages() -> None:
    """A test module sits under the folder of what it tests (tests/gateway/proxy/ for gateway/proxy/, tests/models/, ...);
    only the tree-wide checks (this file) and the fuzz harness stay at the top."""
    tests = ROOT / "tests"
    misplaced = []
    for path in tests.rglob("test_*.py"):
        rel = path.relative_to(tests)
        if rel.parts[0] == "fuzz" or rel == Path("test_house.py"):
            continue
        package = ROOT.joinpath(*rel.parts[:-1])
        if len(rel.parts) < 2 or not package.is_dir():
            misplaced.append(str(rel))
    assert not misplaced, f"test modules outside a folder that mirrors a package: {misplaced}"
