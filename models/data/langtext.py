"""Real text in other languages for people's searches and posts: the translated messages Django ships.

The training side's real text (``stdtext``) is English, so a model trained on it alone
takes a search in Bengali, Greek or Chinese, which in a URL or a form body is nothing but
``%XX`` escapes, for the fully percent-encoded payloads of the attack grammar. This
module adds the translations of Django's message catalogs (``django/conf/locale`` and
each ``django/contrib`` app's ``locale``: about a hundred languages, many scripts), cut
the way ``realtext --source locales`` cuts the system's catalogs: a message a person
could type is a search, three consecutive messages of one catalog are a post.

Used on the **training side only** (``site.Draw.text``), on top of the English share.
Django is pinned in the ``[train]`` extra, and everything is read in a fixed order
(sorted paths, sorted message ids, first occurrence kept), so the same Django gives the
same snippets on every machine. ``realtext --source locales`` (the measurement) drops
any text this module gives, so the two stay apart.
"""

from __future__ import annotations

import functools
import gettext
from collections.abc import Iterator, Sequence
from pathlib import Path

from models.data.stdtext import LINE, PARAGRAPH, package_dir

# Characters of format placeholders and markup: a message holding one is a template, not text a person types.
_PLACEHOLDER = ("%", "{", "}", "<", ">", "\\", "$")


def is_english(lang: str) -> bool:
    """Whether a catalog's language directory names English (or the untranslated C locale)."""
    return lang.lower().startswith(("en", "c.", "c@")) or lang == "C"


def translations(paths: Sequence[Path]) -> Iterator[tuple[str, str, str]]:
    """(language, "line" or "post", text) of compiled catalogs ``<lang>/LC_MESSAGES/*.mo``: each translated message a
    person could type (no placeholders or markup, accelerator marks removed, one line of LINE length with a space), then
    posts of three consecutive ones. A catalog Python cannot read is skipped."""
    for path in paths:
        lang = path.parts[-3]
        try:
            with path.open("rb") as fh:
                catalog = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError):
            continue
        texts = []
        for key in sorted(catalog, key=str):
            text = catalog[key]
            if not key or not isinstance(text, str) or any(c in text for c in _PLACEHOLDER):
                continue
            text = " ".join(text.replace("_", "").replace("&", "").split())
            if LINE[0] <= len(text) <= LINE[1] and " " in text:
                texts.append(text)
        for text in texts:
            yield lang, "line", text
        for i in range(0, len(texts) - 2, 3):
            post = "\n".join(texts[i:i + 3])
            if PARAGRAPH[0] <= len(post) <= PARAGRAPH[1]:
                yield lang, "post", post


def catalogs(root: Path | None = None) -> list[Path]:
    """Django's compiled catalogs of every language but English, sorted by their path inside the package."""
    root = root if root is not None else package_dir("django")
    if root is None or not root.is_dir():
        return []
    found = [p for p in root.glob("**/locale/*/LC_MESSAGES/*.mo") if not is_english(p.parts[-3])]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


@functools.cache
def snippets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(lines, posts): distinct, in catalog order. Raises when Django is missing: the training side needs it."""
    paths = catalogs()
    if not paths:
        raise RuntimeError("the training side's other-language text comes from Django's catalogs: "
                           "install the [train] extra (pip install -e '.[train]')")
    found: dict[str, dict[str, None]] = {"line": {}, "post": {}}
    for _lang, kind, text in translations(paths):
        found[kind][text] = None
    return tuple(found["line"]), tuple(found["post"])
