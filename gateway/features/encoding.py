"""Model-input encoding: text -> token ids (bytes plus a fixed HTTP phrase vocabulary), padding.

Part of the feature contract (see ``gateway.features``): changing anything here needs
a FEATURE_VERSION bump and a retrained model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

# Longest model input, in token ids. The encoder groups PATCH ids into one position, so
# this caps the encoder at MAX_TOKENS / PATCH = 64 positions.
MAX_TOKENS = 512
PATCH = 8
# Batches are padded to a multiple of BUCKET ids (a multiple of PATCH), so that
# batches of similar requests share a handful of shapes.
BUCKET = 64

PAD_ID = 0
# ids 1..256 are bytes 0..255; 257 stands for a character that is not a latin-1 byte
# (only reachable from hand-made records); phrases follow.
BYTE_OFFSET = 1
UNKNOWN_ID = 257
PHRASE_OFFSET = 258
VOCAB_SIZE = 512

# A fixed phrase vocabulary: HTTP boilerplate that browsers and clients send verbatim.
# Each phrase becomes one id, which shortens a browser request ~2x (the encoder's cost
# is linear in length) while every other character stays a byte, so payloads are seen
# exactly. Order is the id order: append only, and bump FEATURE_VERSION.
PHRASES: tuple[str, ...] = (
    # header names (as they appear, lower-cased, on the names line)
    "user-agent", "accept-language", "accept-encoding", "accept", "connection",
    "upgrade-insecure-requests", "sec-ch-ua-platform", "sec-ch-ua-mobile", "sec-ch-ua",
    "sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "sec-fetch-user", "cache-control",
    "content-type", "content-length", "cookie", "referer", "origin", "priority", "pragma",
    "x-requested-with", "authorization", "if-none-match", "if-modified-since", "keep-alive",
    "sec-gpc", "transfer-encoding", "host",
    # user-agent boilerplate
    "Mozilla/5.0 ", "AppleWebKit/537.36 (KHTML, like Gecko)", "AppleWebKit/605.1.15 (KHTML, like Gecko)",
    "Safari/537.36", "Safari/605.1.15", "Safari/604.1", "(Windows NT 10.0; Win64; x64)",
    "(Macintosh; Intel Mac OS X 10_15_7)", "(X11; Linux x86_64)", "Gecko/20100101 Firefox/",
    "Chrome/", "Mobile Safari/537.36", "Version/", "(iPhone; CPU iPhone OS ", " like Mac OS X)",
    "(Linux; Android ", "Edg/", "compatible; ", "+http://", "+https://", ".0.0.0", "Mobile/15E148",
    "(iPad; CPU OS ", "Firefox/", "OPR/", "SamsungBrowser/", "YaBrowser/", "CriOS/", "FxiOS/",
    # accept* values
    "text/html,application/xhtml+xml,application/xml;q=0.9,", "image/avif,image/webp,image/apng,",
    "image/svg+xml,image/*,*/*;q=0.8", "application/signed-exchange;v=b3;q=0.7", "*/*;q=0.8",
    "image/webp,", "text/css,*/*;q=0.1", "application/json", "application/x-www-form-urlencoded",
    "multipart/form-data", "text/plain", "charset=UTF-8", "gzip, deflate, br, zstd", "gzip, deflate, br",
    "gzip, deflate", "en-US,en;q=0.9", "en-US,en;q=0.5", "en-GB,en;q=0.9",
    # client hints and fetch metadata
    '"Not_A Brand";v="', '"Not A(Brand";v="', '"Not)A;Brand";v="', '"Not/A)Brand";v="',
    '"Chromium";v="', '"Google Chrome";v="', '"Microsoft Edge";v="', '"Windows"', '"macOS"',
    '"Android"', '"Linux"', "same-origin", "same-site", "cross-site", "navigate", "no-cors",
    # URLs
    "https://", "http://", "www.", ".com/", ".html", ".php",
)



def _trie_pattern(words: Sequence[str]) -> str:
    """A regex matching the longest of ``words`` at a position, shaped as a trie.

    Python's ``re`` tries alternatives one by one; factoring common prefixes makes
    each position cost one character-class test instead of one test per phrase.
    """
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        group = "(?:" + "|".join(branches) + ")"
        return group + "?" if "" in node else group

    return build(trie)


_PHRASE_RE = re.compile(_trie_pattern(PHRASES))
# A phrase is coded as the character whose code point is its id less BYTE_OFFSET, just past the
# bytes (text reaching the coder is latin-1, below 256), so every coded character becomes its id
# by adding BYTE_OFFSET, and the coded text fits UTF-16 code units.
_PHRASE_CHAR = {p: chr(PHRASE_OFFSET - BYTE_OFFSET + i) for i, p in enumerate(PHRASES)}
if PHRASE_OFFSET + len(PHRASES) > VOCAB_SIZE:
    raise AssertionError("the phrase vocabulary does not fit below VOCAB_SIZE")


def _phrase_char(match: re.Match[str]) -> str:
    return _PHRASE_CHAR[match[0]]


# No phrase spans a line, so a serialization can be coded line by line. The header lines (names,
# user agent, accept*, client hints, fetch metadata, content type, credentials) repeat from
# request to request of the same browser or client: their coded form is kept (a bounded LRU),
# and the phrase scan, the costliest step of encoding, runs on the request's own lines only.
if any("\n" in p for p in PHRASES):
    raise AssertionError("a phrase spans a line: encode cannot code the serialization line by line")
_REPEATING_LINES = frozenset("hualecftk")


@functools.lru_cache(maxsize=8192)
def _coded_header_line(line: str) -> str:
    return _PHRASE_RE.sub(_phrase_char, line)


def _coded_line(line: str) -> str:
    return _coded_header_line(line) if line[:1] in _REPEATING_LINES else _PHRASE_RE.sub(_phrase_char, line)


def encode(text: str) -> np.ndarray:
    """Token ids (int64) of a serialization: phrases first, then one id per byte."""
    if not text.isascii():
        # Characters above latin-1 only come from hand-made records; the wire is bytes.
        text = "".join(c if ord(c) < 256 else "\x00" for c in text)
    coded = "\n".join(map(_coded_line, text.split("\n")))
    units = np.frombuffer(coded.encode("utf-16-le"), dtype="<u2")[:MAX_TOKENS]
    return np.add(units, BYTE_OFFSET, dtype=np.int64)


def decode_ids(ids: np.ndarray) -> str:
    """The text behind token ids (padding dropped): for explanations and debugging."""
    out: list[str] = []
    for i in ids.tolist():
        if i == PAD_ID:
            continue
        if i >= PHRASE_OFFSET:
            out.append(PHRASES[i - PHRASE_OFFSET] if i - PHRASE_OFFSET < len(PHRASES) else "\ufffd")
        elif i == UNKNOWN_ID:
            out.append("\ufffd")
        else:
            out.append(chr(i - BYTE_OFFSET))
    return "".join(out)


def bucket_length(n: int) -> int:
    """The padded length for a longest sequence of ``n`` ids (a multiple of BUCKET, ≤ MAX_TOKENS)."""
    return min(MAX_TOKENS, max(BUCKET, -(-n // BUCKET) * BUCKET))
