"""The real-text measurement set: people's searches and posts made of documentation text."""

from __future__ import annotations

import json
import random
from pathlib import Path

from gateway.tools.evaluate import Skipped, read_rows
from models.data import realtext


def test_documents_become_searches_and_posts_a_server_can_read(tmp_path: Path) -> None:
    docs = tmp_path / "pkg"
    docs.mkdir()
    (docs / "README.md").write_text("# Title\n\nRun `pip install x` first.\nThen call x.run(); it's fast.\n\nshort\n")
    (docs / "binary.bin").write_bytes(b"\x00\x01")
    found = realtext.documents([docs, tmp_path / "missing"])
    assert found == [docs / "README.md"]
    got = list(realtext.snippets(found))
    assert ("line", "Run `pip install x` first.") in got
    assert ("post", "Run `pip install x` first.\nThen call x.run(); it's fast.") in got
    assert all(len(t) >= 8 for _, t in got)  # "short" and "# Title" are too short to be a search
    rng = random.Random(1)
    rows = [realtext.record(kind, text, rng) for kind, text in got]
    out = tmp_path / "rows.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    skipped = Skipped()
    parsed = read_rows(out, skipped)
    assert len(parsed) == len(rows) and not skipped.counts
    post = next(r for r in parsed if r.features.method == "POST")
    assert b"Then+call" not in post.features.body_prefix and b"%0D%0AThen%20call" in post.features.body_prefix  # a textarea's CRLF
    assert post.features.content_length == len(post.features.body_prefix)
    search = next(r for r in parsed if r.features.method == "GET")
    assert search.features.path == "/search" and search.label == 0 and search.features.header("sec-ch-ua")


def write_mo(path: Path, messages: dict[str, str]) -> None:
    """A GNU message catalog (.mo), as msgfmt writes it: header, two offset tables, then the strings."""
    import struct

    items = sorted({"": "Content-Type: text/plain; charset=UTF-8\n", **messages}.items())
    keys = [k.encode() for k, _ in items]
    values = [v.encode() for _, v in items]
    start = 7 * 4 + 16 * len(items)
    offsets, blob = [], b""
    for s in keys + values:
        offsets.append((len(s), start + len(blob)))
        blob += s + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, len(items), 28, 28 + 8 * len(items), 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + b"".join(struct.pack("<2I", *o) for o in offsets) + blob)


def test_translated_messages_become_searches_and_posts_in_their_language(tmp_path: Path) -> None:
    messages = {"Open file": "_Datei öffnen", "Save as": "Speichern unter …", "Copied %d files": "%d Dateien kopiert",
                "Close the window": "Das Fenster schließen", "<b>Bold</b>": "<b>Fett</b>", "Quit now": "Jetzt &beenden"}
    write_mo(tmp_path / "de" / "LC_MESSAGES" / "app.mo", messages)
    write_mo(tmp_path / "en_GB" / "LC_MESSAGES" / "app.mo", {"Color": "Colour settings"})
    (tmp_path / "pt_BR" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "pt_BR" / "LC_MESSAGES" / "broken.mo").write_bytes(b"not a catalog")
    found = realtext.catalogs(tmp_path)
    assert [p.parts[-3] for p in found] == ["de", "pt_BR"]  # English is what the docs source measures
    got = list(realtext.translations(found))  # the unreadable catalog is skipped
    lines = [t for _, kind, t in got if kind == "line"]
    # placeholders and markup are left out (nobody types them), accelerator marks removed
    assert sorted(lines) == ["Das Fenster schließen", "Datei öffnen", "Jetzt beenden", "Speichern unter …"]
    posts = [t for _, kind, t in got if kind == "post"]
    assert len(posts) == 1 and posts[0].count("\n") == 2 and all(lang == "de" for lang, _, _ in got)
    row = realtext.record("line", lines[0], random.Random(1), "de")
    assert dict(map(tuple, row["headers"]))["Accept-Language"] == "de,en;q=0.8"  # type: ignore[arg-type]
    assert row["source"] == "human/locale/search" and row["lang"] == "de"
    assert dict(map(tuple, realtext.record("post", posts[0], random.Random(1), "pt_BR")["headers"]))["Accept-Language"] \
        == "pt-BR,pt;q=0.9,en;q=0.8"  # type: ignore[arg-type]
