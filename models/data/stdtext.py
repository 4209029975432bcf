"""Real text for people's searches and posts, from a source every machine with this Python has: the standard library.

The generator's text pools (``site.QUERIES``, ``site.FORUM_TEXT``, …) are a few dozen
sentences, so a network trained on them alone learns "text unlike the pools is an
attack" and blocks people who search for or post text it never saw. This module adds
the prose and code of the Python language reference (``pydoc_data.topics``) and the
docstrings of a fixed list of pure-Python standard-library modules, cut into one-line
snippets (searches) and multi-line paragraphs (posts, comments, reviews).

It is used on the **training side only** (``site.Draw.text``): the calibration and
evaluation sides keep drawing from the pools, row for row as before. Everything here is
in a fixed order (sorted names, first occurrence kept), so the same Python gives the
same snippets on every machine.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

# Sorted; only modules importable without side effects on every platform.
MODULES = (
    "argparse", "asyncio", "base64", "calendar", "collections", "concurrent.futures", "configparser", "contextlib", "copy",
    "csv", "dataclasses", "datetime", "difflib", "email", "email.message", "email.utils", "enum", "fnmatch", "fractions",
    "ftplib", "functools", "getopt", "gettext", "glob", "gzip", "heapq", "hmac", "html", "html.parser", "http", "http.client",
    "http.cookiejar", "http.cookies", "http.server", "imaplib", "inspect", "ipaddress", "json", "logging", "logging.handlers",
    "mailbox", "mimetypes", "netrc", "numbers", "optparse", "os", "pathlib", "pickle", "pkgutil", "plistlib", "poplib",
    "pprint", "queue", "random", "re", "sched", "secrets", "selectors", "shlex", "shutil", "smtplib", "socket",
    "socketserver", "sqlite3", "ssl", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "timeit", "tomllib", "traceback", "typing", "unittest", "unittest.mock", "urllib.parse", "urllib.request", "uuid",
    "warnings", "weakref", "wsgiref.handlers", "xml.dom.minidom", "xml.etree.ElementTree", "zipfile", "zoneinfo",
)
# Functions other libraries replace on import (``import torch`` swaps in its own ``inspect.getfile``): left out, so the
# text does not depend on what the process imported before (the training run imports torch, the generator CLI does not).
PATCHED = frozenset({("inspect", "getfile")})
LINE = (8, 300)        # a search: one line, with at least one space (a phrase, not a token)
PARAGRAPH = (40, 1500)  # a post: several lines


def package_dir(name: str) -> Path | None:
    """Where an installed package is (found without importing it), or None."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def documents() -> list[str]:
    """The language reference's topics (sorted by name), then each module's docstring and its public classes' and functions'."""
    from pydoc_data.topics import topics

    docs = [topics[name] for name in sorted(topics)]
    with warnings.catch_warnings():  # typing.io and typing.re warn when their docstring is read
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in MODULES:
            module = importlib.import_module(name)
            docs.append(inspect.getdoc(module) or "")
            for attr in sorted(n for n in vars(module) if not n.startswith("_") and (name, n) not in PATCHED):
                obj = vars(module)[attr]
                if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == name:
                    docs.append(inspect.getdoc(obj) or "")
    return docs


def pieces(text: str, phrases_only: bool = True) -> Iterator[tuple[str, str]]:
    """("line", a stripped line of LINE length: a search; with a space when ``phrases_only``), then ("post", a
    multi-line paragraph of PARAGRAPH length)."""
    for line in text.splitlines():
        line = line.strip()
        if LINE[0] <= len(line) <= LINE[1] and (" " in line or not phrases_only):
            yield "line", line
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if PARAGRAPH[0] <= len(para) <= PARAGRAPH[1] and "\n" in para:
            yield "post", para


@functools.cache
def snippets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(lines, paragraphs): distinct, in the order ``documents`` gives them."""
    found: dict[str, dict[str, None]] = {"line": {}, "post": {}}
    for doc in documents():
        for kind, piece in pieces(doc):
            found[kind][piece] = None
    return tuple(found["line"]), tuple(found["post"])
