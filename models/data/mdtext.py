"""Developer text in Markdown, the same on every machine: the docstrings of the pinned ``transformers`` package.

    python -m models.data.realtext --source markdown --rows 20000 --out markdown.jsonl

What developers paste into a docs search or a forum reply is often Markdown: inline code
in backticks, ``[name](https://…)`` links, ``[`Class`]`` references, bullets and ``>>>``
examples with quotes and parentheses. ``realtext --source docs`` measures such text from
whatever this machine has installed, so its figures move from machine to machine (on one
host a quarter of it was a Node.js changelog). This module reads a fixed source instead:
every ``.py`` file of ``transformers`` (pinned in the ``[train]`` extra) in sorted order,
parsed with ``ast`` without importing the package; module, class and function docstrings
in the order ``ast.walk`` gives, cut by ``stdtext.pieces`` into lines (searches) and
paragraphs (posts), first occurrence kept.

A measurement, never training data (as training text it did not lower the developer
text blocked). ``realtext --source docs`` leaves the
package's own documents out, so the two sets stay apart.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Sequence
from pathlib import Path

from models.data.stdtext import package_dir, pieces

PACKAGE = "transformers"


def package_root() -> Path | None:
    """Where the installed package is (found without importing it), or None."""
    return package_dir(PACKAGE)


def sources(root: Path | None = None) -> list[Path]:
    """The package's Python files, sorted by their path inside it."""
    root = root if root is not None else package_root()
    if root is None or not root.is_dir():
        return []
    return sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix())


def docstrings(paths: Sequence[Path]) -> Iterator[str]:
    """Module, class and function docstrings of each file; a file Python cannot read or parse is skipped."""
    for path in paths:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield doc


@functools.cache
def snippets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(lines, posts): distinct, in source order. Raises when the package is missing: the measurement needs it."""
    paths = sources()
    if not paths:
        raise RuntimeError(f"the Markdown measurement reads the {PACKAGE} package's docstrings: "
                           "install the [train] extra (pip install -e '.[train]')")
    found: dict[str, dict[str, None]] = {"line": {}, "post": {}}
    for doc in docstrings(paths):
        for kind, piece in pieces(doc):
            found[kind][piece] = None
    return tuple(found["line"]), tuple(found["post"])
