"""The real-application shapes recorded by models/corpus/build_sdk.py: the committed files follow the
apps-*.json format, and the renderer chunking cuts posts at element boundaries."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from models.corpus.build_sdk import chunks

DATA = Path(__file__).resolve().parents[2] / "models" / "corpus" / "data"
FILES = {"sdk-telemetry": "a", "rendered-posts": "b"}


def _load(source: str) -> dict[str, Any]:
    path = DATA / f"apps-{source}.json"
    text = path.read_text()
    obj: dict[str, Any] = json.loads(text)
    # written with sort_keys and compact separators plus one newline, so every run gives the same bytes
    assert text == json.dumps(obj, indent=None, separators=(",", ":"), sort_keys=True) + "\n"
    assert len(text.encode()) <= 1_500_000
    return obj


@pytest.mark.parametrize("source", sorted(FILES))
def test_file_names_its_half_and_every_shape_a_slot(source: str) -> None:
    """The format of every apps-*.json is checked in test_apps_data.py; here: these two sources' halves, their
    pinned packages, and a place for an attacker's value in every recorded request."""
    obj = _load(source)
    assert obj["source"] == source and obj["half"] == FILES[source] and "==" in obj["from"]
    for shape in obj["shapes"]:
        assert shape["slots"], shape["app"]
        for where, name in shape["slots"]:
            assert where != "raw" or name in shape["body"]


def test_telemetry_bodies_are_what_the_sdks_send() -> None:
    shapes = _load("sdk-telemetry")["shapes"]
    apps = {s["app"] for s in shapes}
    assert {"sentry", "posthog", "opentelemetry"} <= apps
    for s in shapes:
        if s["app"] == "sentry":
            lines = s["body"].split("\n")
            json.loads(lines[0])                 # envelope header
            header = json.loads(lines[1])        # item header with its payload's byte length
            assert len(lines[2].encode()) == header["length"]
            assert s["path"] == "/api/{id}/envelope/"
        elif s["app"] in ("posthog", "opentelemetry"):
            json.loads(s["body"])
        assert s["group"] == "telemetry"


def test_the_halves_share_no_shape() -> None:
    a = {json.dumps(s, sort_keys=True) for s in _load("sdk-telemetry")["shapes"]}
    b = {json.dumps(s, sort_keys=True) for s in _load("rendered-posts")["shapes"]}
    assert not a & b
    assert not {s["app"] for s in _load("sdk-telemetry")["shapes"]} & {s["app"] for s in _load("rendered-posts")["shapes"]}


HTML = ('<h1>Title</h1>\n<p>One <b>bold</b> line.</p>\n<hr />\n<pre><code>SELECT 1;\n</code></pre>\n'
        '<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n')


def test_chunks_end_at_top_level_elements() -> None:
    got = chunks(HTML, (2, 2), random.Random(0))
    assert got == ['<h1>Title</h1>\n<p>One <b>bold</b> line.</p>',
                   '<hr />\n<pre><code>SELECT 1;\n</code></pre>',
                   '<ul>\n<li>a</li>\n<li>b</li>\n</ul>']


def test_chunks_shrink_to_the_limit_and_drop_longer_elements() -> None:
    # 40 bytes: the first pair is 47 bytes, so it shrinks to the heading; the list alone is 33 bytes
    got = chunks(HTML, (2, 2), random.Random(0), limit=40)
    assert got == ['<h1>Title</h1>', '<p>One <b>bold</b> line.</p>\n<hr />', '<pre><code>SELECT 1;\n</code></pre>',
                   '<ul>\n<li>a</li>\n<li>b</li>\n</ul>']
    assert chunks('<p>' + 'x' * 50 + '</p>\n<p>ok</p>', (1, 1), random.Random(0), limit=20) == ['<p>ok</p>']
