"""The real-text measurement set: people's searches and posts made of documentation text."""

from __future__ import annotations

import json
import random
from pathlib import Path

from gateway.evaluate import Skipped, read_rows
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
