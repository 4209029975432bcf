"""The Markdown measurement set: the docstrings of the pinned transformers package, read without importing it."""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote

import pytest

from models.data import mdtext, realtext
from tests.conftest import checked_snippets

ROOT = Path(__file__).resolve().parents[2]


def _package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.py").write_text('"""Module `sub.a`: see [`Thing`](https://example.org/thing) for more."""\n'
                                       'class Thing:\n    """A thing to run.\n\n    >>> Thing().run("x")\n    """\n'
                                       '    async def run(self, s):\n        """Run `s` and return it."""\n')
    (root / "b.py").write_text('def f():\n    """F does [`g`] twice."""\n')
    (root / "broken.py").write_text("def (:\n")
    (root / "notes.md").write_text("not Python")
    return root


def test_sources_in_package_order_and_docstrings_of_every_kind(tmp_path: Path) -> None:
    root = _package(tmp_path)
    found = mdtext.sources(root)
    assert [p.relative_to(root).as_posix() for p in found] == ["b.py", "broken.py", "sub/a.py"]
    assert list(mdtext.docstrings(found)) == ["F does [`g`] twice.", "Module `sub.a`: see [`Thing`](https://example.org/thing) for more.",
                                              'A thing to run.\n\n>>> Thing().run("x")', "Run `s` and return it."]
    assert mdtext.sources(tmp_path / "missing") == []


def test_transformers_is_the_pinned_version() -> None:
    """The set is the same on every machine only with the pinned package: the installed one is the pin."""
    pin = re.search(r'"transformers==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin and metadata.version("transformers") == pin.group(1)


def test_snippets_are_deterministic_and_markdown() -> None:
    lines, posts = checked_snippets("mdtext")
    assert len(lines) > 20000 and len(posts) > 5000
    assert all("\n" in x for x in posts)
    marks = Counter(m for x in lines for m in ("`", "[`", "](http", ">>> ") if m in x)
    assert marks["`"] > 10000 and marks["[`"] > 1000 and marks["](http"] > 50 and marks[">>> "] > 1000, marks


def test_the_markdown_source_writes_people_and_the_docs_set_leaves_the_package_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = _package(tmp_path)
    monkeypatch.setattr(mdtext, "package_root", lambda: root)
    mdtext.snippets.cache_clear()
    try:
        out = tmp_path / "md.jsonl"
        assert realtext.main(["--source", "markdown", "--out", str(out)]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    finally:
        mdtext.snippets.cache_clear()
    assert "from 5 snippets of 3 source files" in capsys.readouterr().out
    assert all(r["label"] == "human" for r in rows) and len(rows) == 5
    searches = sorted(unquote(r["path"].split("q=", 1)[1]).replace("+", " ") for r in rows if r["method"] == "GET")
    assert searches == sorted(["F does [`g`] twice.", "Module `sub.a`: see [`Thing`](https://example.org/thing) for more.",
                               "A thing to run.", '>>> Thing().run("x")', "Run `s` and return it."])
    site_packages = Path("/venv/lib/python3.11/site-packages")
    assert realtext._ours(site_packages / "transformers" / "models" / "README.md")
    assert realtext._ours(site_packages / "transformers-5.24.0.dist-info" / "METADATA")
    assert realtext._ours(site_packages / "django" / "contrib" / "admin" / "README.rst")
    assert realtext._ours(Path("/usr/lib/python3/dist-packages/django/README.rst"))
    assert not realtext._ours(site_packages / "requests-2.32.0.dist-info" / "METADATA")
    assert not realtext._ours(site_packages / "sentence_transformers" / "README.md")
    assert not realtext._ours(site_packages / "onnxruntime" / "transformers" / "README.md")  # a folder of that name elsewhere


def test_the_markdown_source_without_transformers_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(mdtext, "package_root", lambda: None)
    mdtext.snippets.cache_clear()
    try:
        assert realtext.main(["--source", "markdown", "--out", str(tmp_path / "md.jsonl")]) == 2
    finally:
        mdtext.snippets.cache_clear()
    assert "install the [train] extra" in capsys.readouterr().err and not (tmp_path / "md.jsonl").exists()
