"""People typing real text: searches and forum posts made of the documentation installed packages ship.

    python -m models.data.realtext --rows 20000 --out realtext.jsonl
    python -m models.data.realtext --source locales --rows 20000 --out locales.jsonl
    python -m models.data.realtext --source markdown --rows 20000 --out markdown.jsonl
    clefgate eval --data realtext.jsonl

Every row is a person (label ``human``) with a current Chrome head: a search (``GET
/search?q=<one line>``) or a reply (``POST /t/<id>/reply`` with a form body holding a
paragraph, line breaks as CRLF, the way a browser submits a textarea). The text is the
prose, tables and code of the READMEs and docs in this environment's site-packages and
``/usr/share/doc``: the kind of text a developer forum or a docs search receives, and
text neither the generator nor the rule authors wrote.

``--source locales`` makes the same requests out of other languages: the translated
messages of the system's message catalogs (``/usr/share/locale/*/LC_MESSAGES/*.mo``,
every language but English), with an ``Accept-Language`` of that language. Messages with
format placeholders or markup are left out, keyboard-accelerator marks removed; a post is
three consecutive messages of one catalog. Text the training side reads is left out:
Django's translations (``langtext``) from the locales, Django's own documents from the
docs. ``--source markdown`` (``mdtext``) is developer text that does not depend on the
machine: the docstrings of the pinned ``transformers``, whose documents the docs set
leaves out.

This is a measurement of false positives on unfamiliar text, never training data. What
the docs and locales sets read depends on what the machine has installed, so they are
not reproducible across environments; the markdown set is, given the pin (the row count
and the files' digest are printed to tell runs apart).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import site
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

from models.data import langtext, mdtext
from models.data.generate import write_jsonl
from models.data.langtext import is_english, translations
from models.data.stdtext import pieces

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
_HINTS = [["sec-ch-ua", '"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"'], ["sec-ch-ua-mobile", "?0"],
          ["sec-ch-ua-platform", '"Windows"']]


def documents(roots: Sequence[Path]) -> list[Path]:
    """Text documents under ``roots``: package metadata (README), .md, .rst and .txt files, in a stable order."""
    found: set[Path] = set()
    for root in roots:
        if not root.is_dir():
            continue
        for pattern in ("METADATA", "*.md", "*.rst", "*.txt"):
            found.update(p for p in root.rglob(pattern) if p.is_file() and p.stat().st_size < 2_000_000)
    return sorted(found)


def snippets(paths: Sequence[Path]) -> Iterator[tuple[str, str]]:
    """("line", one line of 8-300 characters) and ("post", a multi-line paragraph of 40-1,500)."""
    for path in paths:
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if path.name == "METADATA":
            text = text.split("\n\n", 1)[-1]  # the long description, not the header fields
        yield from pieces(text, phrases_only=False)


def catalogs(root: Path = Path("/usr/share/locale")) -> list[Path]:
    """Compiled message catalogs of every language but English under ``root``, in a stable order."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*/LC_MESSAGES/*.mo") if not is_english(p.parts[-3]))


def _accept_language(lang: str) -> str:
    """An Accept-Language for a catalog's language (``pt_BR`` -> ``pt-BR,pt;q=0.9,en;q=0.8``)."""
    base, _, region = lang.partition("@")[0].partition("_")
    return f"{base}-{region},{base};q=0.9,en;q=0.8" if region else f"{base},en;q=0.8"


def _navigation(referer: str) -> list[list[str]]:
    """The rest of a Chrome same-origin navigation's head, after the request-specific headers."""
    return [["Upgrade-Insecure-Requests", "1"], ["User-Agent", CHROME],
            ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"],
            ["Sec-Fetch-Site", "same-origin"], ["Sec-Fetch-Mode", "navigate"], ["Sec-Fetch-User", "?1"], ["Sec-Fetch-Dest", "document"],
            ["Referer", referer], ["Accept-Encoding", "gzip, deflate, br, zstd"], ["Accept-Language", "en-US,en;q=0.9"]]


def record(kind: str, text: str, rng: random.Random, lang: str | None = None) -> dict[str, object]:
    host = "forum.example.org"
    head = [["Host", host], ["Connection", "keep-alive"], *_HINTS]
    if kind == "line":
        target = "/search?q=" + quote(text, safe="")
        head += _navigation(f"https://{host}/latest")
        method, body = "GET", None
    else:
        topic = rng.randint(1000, 99999)
        target = f"/t/{topic}/reply"
        body = "comment=" + quote(text.replace("\r\n", "\n").replace("\n", "\r\n"), safe="")
        head += [["Content-Length", str(len(body))], ["Cache-Control", "max-age=0"], ["Origin", f"https://{host}"],
                 ["Content-Type", "application/x-www-form-urlencoded"], *_navigation(f"https://{host}/t/{topic}")]
        method = "POST"
    if lang is not None:
        head = [[k, _accept_language(lang) if k == "Accept-Language" else v] for k, v in head]
    ip = f"{rng.choice((24, 73, 81, 92, 109, 151, 188))}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    return {"method": method, "path": target, "http_version": "1.1", "headers": head, "body": body, "client_ip": ip,
            "label": "human", "source": f"human/{'realtext' if lang is None else 'locale'}/{'search' if kind == 'line' else 'post'}",
            **({"lang": lang} if lang is not None else {})}


# Packages whose text another set reads: Django's translations (training, ``langtext``), transformers' docstrings
# (``--source markdown``, ``mdtext``).
_READ_ELSEWHERE = ("django", mdtext.PACKAGE)


def _ours(path: Path) -> bool:
    """Documents of this project, or of a package whose text the training side or another measurement reads: the docs
    measurement leaves them out, so it measures the same text with or without the ``[train]`` extra installed."""
    if "clefgate" in str(path):
        return True
    parts = [part.lower() for part in path.parts]
    # the package's own folder or its metadata, right under an install folder (not any folder of that name elsewhere)
    return any(top in ("site-packages", "dist-packages") and any(
        nxt == name or (nxt.startswith(f"{name}-") and nxt.endswith(".dist-info")) for name in _READ_ELSEWHERE)
        for top, nxt in itertools.pairwise(parts))


def _trained_translations() -> frozenset[str]:
    """The other-language text the training side reads (``langtext``), empty when Django is not installed."""
    try:
        lines, posts = langtext.snippets()
    except RuntimeError:  # no Django: nothing of it to leave out
        return frozenset()
    return frozenset(lines) | frozenset(posts)


def markdown_snippets() -> list[tuple[str | None, str, str]]:
    """Every (None, kind, text) of ``mdtext`` in a fixed order: the markdown set's population."""
    lines, posts = mdtext.snippets()
    return sorted({(None, "line", t) for t in lines} | {(None, "post", t) for t in posts})


def sample(unique: Sequence[tuple[str | None, str, str]], rows: int, seed: int) -> list[dict[str, object]]:
    """``rows`` people (or all there are) drawn from ``unique`` with ``seed``, as the measurement files hold them."""
    rng = random.Random(seed)
    chosen = rng.sample(list(unique), min(rows, len(unique)))
    return [record(kind, text, rng, lang) for lang, kind, text in chosen]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.data.realtext", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20000, help="number of requests (a random sample of all snippets)")
    ap.add_argument("--seed", type=int, default=1, help="sampling seed")
    ap.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    ap.add_argument("--source", choices=("docs", "locales", "markdown"), default="docs",
                    help="docs: package documentation (English, developer text); locales: the system's translated messages; "
                         "markdown: the pinned transformers package's docstrings (developer text, the same on every machine)")
    args = ap.parse_args(argv)
    if args.source == "docs":
        paths = [p for p in documents([Path(d) for d in site.getsitepackages()] + [Path("/usr/share/doc")]) if not _ours(p)]
        unique: list[tuple[str | None, str, str]] = sorted((None, k, t) for k, t in set(snippets(paths)))
    elif args.source == "markdown":
        try:
            unique = markdown_snippets()
        except RuntimeError as exc:  # transformers is not installed
            print(f"realtext: {exc}", file=sys.stderr)
            return 2
        root = mdtext.package_root()
        paths = [p.relative_to(root) for p in mdtext.sources()] if root else []  # the digest names files inside the package
    else:
        paths = catalogs()
        trained = _trained_translations()
        unique = sorted(row for row in set(translations(paths)) if row[2] not in trained)
    digest = hashlib.sha256("\n".join(str(p) for p in paths).encode()).hexdigest()[:12]
    chosen = sample(unique, args.rows, args.seed)
    write_jsonl(iter(chosen), args.out)
    what = {"docs": "documents", "locales": "catalogs", "markdown": "source files"}[args.source]
    print(f"wrote {len(chosen)} rows to {args.out} from {len(unique)} snippets of {len(paths)} {what} (files digest {digest})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
