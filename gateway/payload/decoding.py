"""How a value is decoded before the detectors read it, and how a fragment of it is shown (``gateway.payload``).

Percent-decoding once, and twice when once left ``%XX`` escapes (``+`` as a space where the
value is form-encoded); HTML character references; base64 only where a value is base64.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from urllib.parse import unquote, unquote_plus

FRAGMENT_CHARS = 80
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_HTML_REF = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
_B64 = re.compile(r"[A-Za-z0-9+/]{10,}={0,2}")


def fragment(text: str, start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` widened by a little context, at most FRAGMENT_CHARS, control characters escaped."""
    end = len(text) if end is None else end
    lo = max(0, start - 16)
    piece = text[lo:max(end + 16, lo + 1)][:FRAGMENT_CHARS]
    if piece.isprintable():  # nearly always (a header or parameter name): nothing to escape
        return piece
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in piece)


def decode_percent(text: str, plus: bool) -> str:
    """Percent-decoded once (``+`` as a space when ``plus``), undecodable bytes replaced."""
    return unquote_plus(text, errors="replace") if plus else unquote(text, errors="replace")


def _base64(text: str) -> str | None:
    """The decoded text of a value that is base64 (strict alphabet, padded length, mostly printable), else None."""
    if len(text) % 4 or not _B64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    printable = sum(1 for b in raw if 0x20 <= b < 0x7F or b in (9, 10, 13))
    if not raw or printable < 0.9 * len(raw):
        return None
    return raw.decode("utf-8", "replace")


def variants(raw: str, *, plus: bool, base: str = "raw") -> list[tuple[str, str]]:
    """``(text, decoding)`` for each distinct decoding of a value, the value as sent first."""
    out = [(raw, base)]
    text, label = raw, base
    if _PCT.search(raw) or (plus and "+" in raw):
        once = decode_percent(raw, plus)
        label = "percent" if _PCT.search(raw) else "plus"
        text = once
        if _PCT.search(once):
            text, label = decode_percent(once, False), "percent2"
        out.append((text, label))
    if "&" in text and _HTML_REF.search(text):
        unescaped = html.unescape(text)
        if unescaped != text:
            out.append((unescaped, "html" if label == "raw" else f"{label}, html"))
    for candidate in dict.fromkeys((raw, text)):
        decoded = _base64(candidate)
        if decoded is not None:
            out.append((decoded, "base64"))
    return out
