"""The training side's other-language text: Django's translated messages, read in a fixed order."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote

import pytest

from models.data import langtext, realtext, site
from models.data.generate import generate
from tests.conftest import checked_snippets
from tests.models.test_flash_data import _text_values
from tests.models.test_realtext import write_mo

ROOT = Path(__file__).resolve().parents[2]


def test_catalogs_are_every_language_but_english_in_package_order(tmp_path: Path) -> None:
    write_mo(tmp_path / "conf" / "locale" / "fr" / "LC_MESSAGES" / "django.mo", {"Save": "Enregistrer la page"})
    write_mo(tmp_path / "conf" / "locale" / "en_GB" / "LC_MESSAGES" / "django.mo", {"Color": "Colour settings"})
    write_mo(tmp_path / "contrib" / "admin" / "locale" / "el" / "LC_MESSAGES" / "djangojs.mo", {"Now": "Τώρα αμέσως"})
    write_mo(tmp_path / "conf" / "locale" / "de" / "LC_MESSAGES" / "django.mo", {"Close": "Das Fenster schließen"})
    found = langtext.catalogs(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "conf/locale/de/LC_MESSAGES/django.mo", "conf/locale/fr/LC_MESSAGES/django.mo",
        "contrib/admin/locale/el/LC_MESSAGES/djangojs.mo"]
    assert [text for _, _, text in langtext.translations(found)] == ["Das Fenster schließen", "Enregistrer la page", "Τώρα αμέσως"]
    assert langtext.catalogs(tmp_path / "missing") == []


def test_django_is_the_pinned_version() -> None:
    """The snippets (and so the training data's hash) depend on Django's catalogs: the installed Django is the pin."""
    pin = re.search(r'"django==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pin and metadata.version("django") == pin.group(1)


def _script(text: str) -> str:
    letters = [unicodedata.name(c, "?").split()[0] for c in text if c.isalpha()]
    return Counter(letters).most_common(1)[0][0] if letters else "?"


def test_snippets_are_deterministic_and_span_many_scripts() -> None:
    lines, posts = checked_snippets("langtext")
    assert len(lines) > 10000 and len(posts) > 3000
    assert all(x.count("\n") == 2 for x in posts)
    assert not any(c in x for x in lines for c in "%{}<>")
    scripts = Counter(_script(x) for x in lines)
    for script in ("LATIN", "CYRILLIC", "GREEK", "ARABIC", "CJK", "DEVANAGARI", "BENGALI", "TAMIL", "GEORGIAN", "HEBREW"):
        assert scripts[script] >= 50, (script, scripts.most_common())
    assert scripts["LATIN"] < len(lines) * 0.7  # not mostly Latin


def test_other_languages_on_the_training_side_on_top_of_english(monkeypatch: pytest.MonkeyPatch) -> None:
    """Some people's text is another language in training, never in attacks; the English draws and the other sides are
    what they were without it."""
    lines, posts = langtext.snippets()
    other = set(lines) | set(posts) | {p.replace("\n", "\r\n") for p in posts}
    monkeypatch.setattr(site, "LANG_TEXT_SHARE", 0.2)  # more than shipped, for numbers a test can count
    with_langs = list(generate("train", 2000, seed=4))
    hits = Counter(r["label"] for r in with_langs if any(v in other for v in _text_values(r)))
    assert hits["human"] >= 15 and hits["attack"] == 0, hits
    monkeypatch.setattr(site, "LANG_TEXT_SHARE", 0.0)
    english_only = list(generate("train", 2000, seed=4))
    same = [a == b for a, b in zip(with_langs, english_only, strict=True)]
    changed = [r for r, s in zip(with_langs, same, strict=True) if not s]
    # only rows that drew another language differ (a forum reply may join it to a second text, a review title cut it)
    assert sum(same) > 1700 and changed
    assert all(any(o in v or (len(v) >= 8 and o.startswith(v)) for o in other for v in _text_values(r)) for r in changed)
    for split in ("calib", "eval"):
        monkeypatch.setattr(site, "LANG_TEXT_SHARE", 1.0)
        rows = list(generate(split, 600, seed=3))
        assert not any(set(_text_values(r)) & other for r in rows), split
        monkeypatch.setattr(site, "LANG_TEXT_SHARE", 0.0)
        assert list(generate(split, 600, seed=3)) == rows, split


def test_the_measurements_leave_out_what_training_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = {"Open": "Datei öffnen bitte", "Close": "Das Fenster schließen", "Save": "Speichern unter diesem Namen"}
    write_mo(tmp_path / "de" / "LC_MESSAGES" / "app.mo", messages)
    system = realtext.catalogs(tmp_path)
    monkeypatch.setattr(realtext, "catalogs", lambda: system)
    monkeypatch.setattr(langtext, "snippets", lambda: (("Das Fenster schließen",), ()))  # as if Django shipped this line
    out = tmp_path / "locales.jsonl"
    assert realtext.main(["--source", "locales", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    searches = sorted(unquote(r["path"].split("q=", 1)[1]) for r in rows if r["method"] == "GET")
    assert searches == ["Datei öffnen bitte", "Speichern unter diesem Namen"] and len(rows) == 3  # and the post of three
    for path in ("/x/site-packages/django/contrib/admin/README.rst", "/x/site-packages/Django-5.2.19.dist-info/METADATA"):
        assert realtext._ours(Path(path))
    assert not realtext._ours(Path("/x/site-packages/aiohttp-3.9.dist-info/METADATA"))

