"""Requests as real applications send them: API operations, SDK telemetry, editor posts.

The shapes come from ``data/apps-<source>.json`` (made by ``models.corpus.build_apps`` and
``models.corpus.build_sdk`` from API descriptions, SDKs actually run and documents actually rendered), not
from the generator's own sites: their paths, parameter names, JSON layouts, envelopes and rich text are what
the payload model must see as ordinary. Each shape is a benign request; ``slots`` name where an attacker would
put a value in it, so the same shapes carry attacks as often as the generator's own requests do, and a shape
is never evidence by itself.

A shape (one element of a file's ``shapes``): ``app``, ``group``, ``method``, ``path`` (``{id}`` and
``{word}`` filled per request), ``query`` ([[name, value], ...]), ``body_kind`` (None, ``json``, ``form`` or
``raw``), ``body``, ``content_type`` (raw bodies), ``context`` and ``slots`` ([[where, name], ...]; a raw
slot names an exact substring of the body).
"""

from __future__ import annotations

import copy
import functools
import json
import random
from pathlib import Path
from typing import Any

from models.corpus import sites
from models.corpus.sites import Request, Site

DATA = Path(__file__).resolve().parent / "data"


@functools.cache
def sources(directory: Path = DATA) -> dict[str, dict[str, Any]]:
    """Every ``apps-*.json`` under ``directory``, by source name."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("apps-*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        out[doc["source"]] = doc
    return out


def half_sources(half: str | None, directory: Path = DATA) -> tuple[str, ...]:
    """The sources one half draws from (all of them for ``None``)."""
    return tuple(name for name, doc in sources(directory).items() if half is None or doc["half"] == half)


def _fill(rng: random.Random, site: Site, path: str) -> str:
    while "{id}" in path:
        path = path.replace("{id}", sites._id(rng), 1)
    while "{word}" in path:
        path = path.replace("{word}", rng.choice(site.words), 1)
    return path


def request(rng: random.Random, site: Site, half: str | None, directory: Path = DATA) -> tuple[Request, str] | None:
    """One shape of the half's sources as a request to ``site``, and the source's name; None without sources."""
    names = half_sources(half, directory)
    if not names:
        return None
    name = rng.choice(names)
    shape = rng.choice(sources(directory)[name]["shapes"])
    body_kind = shape.get("body_kind")
    body: dict[str, object]
    if body_kind == "raw":
        body = {"text": shape["body"], "content_type": shape.get("content_type") or "text/plain;charset=UTF-8"}
    else:
        body = copy.deepcopy(shape.get("body") or {})
    slots = [(str(w), str(n)) for w, n in shape.get("slots") or ()]
    if not slots:   # every request has somewhere an attacker could write
        slots = [("query", site.params["search"])]
    method = shape["method"]
    context = shape.get("context") or ("xhr" if method in ("GET", "HEAD") else "xhr-write")
    req = Request(method, _fill(rng, site, shape["path"]), [(str(k), str(v)) for k, v in shape.get("query") or ()],
                  shape.get("group") or "api", context, body_kind=body_kind, body=body, slots=slots)
    return req, name


def place_raw(body: dict[str, object], name: str, value: str) -> None:
    """Put ``value`` where the raw body has the substring ``name``: as a JSON string where it is one, else as is."""
    text = str(body.get("text", ""))
    quoted = json.dumps(name, ensure_ascii=False)
    if quoted in text:
        body["text"] = text.replace(quoted, json.dumps(value, ensure_ascii=False), 1)
    elif name in text:
        kind = str(body.get("content_type", ""))
        inside = json.dumps(value, ensure_ascii=False)[1:-1] if "json" in kind or "envelope" in kind else value
        body["text"] = text.replace(name, inside, 1)
    else:
        body["text"] = text + value
