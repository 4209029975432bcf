"""Where a request carries values a client chose, each with the name of its location (``gateway.payload``).

Query and form pairs (``query:NAME``, ``form:NAME``; a name that is more than a word is
looked at too, as ``NAME (name)``), JSON string values and keys with their path
(``json:$.a.b[0]``, or ``json:#n`` for the n-th string of a body cut short), multipart field
values, names and file names (``multipart:NAME``; file contents are read only for the fallback rules), and
X-Forwarded-For entries that are not addresses.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from collections.abc import Iterator
from typing import Any

from gateway.payload.decoding import decode_percent, fragment
from gateway.rules.inputs import whole_characters

# (location, value, form-encoded: + is a space, in a body, the decoding the value already had)
Value = tuple[str, str, bool, bool, str]
NAME_CHARS = 64      # longest parameter, field, cookie or header name shown in a location
JSON_DEPTH = 32
# a value made only of these cannot be SQL injection (no spaces, quotes, parentheses, operators or comments)
INERT = re.compile(r"[\w.\-@:/~!]*")
# ... but a name made only of them can still walk the application's object graph where a framework binds names to
# objects: prototype pollution (``__proto__.isAdmin``, ``constructor.prototype``) and Spring's data binding
# (``class.module.classLoader...``, Spring4Shell); such a name is read like any other
GRAPH_NAME = re.compile(r"__proto__|\bconstructor\.prototype\b|^class\.|\.classloader\b", re.IGNORECASE)
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_BOUNDARY = re.compile(r'boundary=(?:"([^"]{1,200})"|([^\s;,]{1,200}))', re.IGNORECASE)
_DISPOSITION = re.compile(r'\b(name|filename)="([^"]*)"|\b(name|filename)=([^\s;]+)', re.IGNORECASE)


def name_of(text: str) -> str:
    """A parameter, field, cookie or header name as a location shows it (bounded, escaped)."""
    return fragment(text[:NAME_CHARS])


_inet_pton = socket.inet_pton
_AF_INET, _AF_INET6 = socket.AF_INET, socket.AF_INET6


def is_address(entry: str) -> bool:
    """An X-Forwarded-For entry that is an address (``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``, ``unknown``).

    A bare address, the form nearly every entry has, is settled by ``inet_pton`` for a fraction
    of the cost: for IPv4 it accepts exactly the text ``ipaddress`` accepts (four decimal octets up
    to 255, no leading zeros, nothing around them), for IPv6 only text ``ipaddress`` accepts too
    (``ipaddress`` takes more, a scope id say). What it refuses is :func:`read_address`'s.
    """
    try:
        _inet_pton(_AF_INET6 if ":" in entry else _AF_INET, entry)
        return True
    except (OSError, ValueError):
        return read_address(entry)


def read_address(entry: str) -> bool:
    """:func:`is_address` with every entry read by ``ipaddress`` (the plain form, and the reference of its shortcut)."""
    if entry.lower() == "unknown":
        return True
    text = entry
    if text.startswith("["):
        text = text[1:text.find("]")] if "]" in text else text[1:]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def pairs(text: str, kind: str, plus: bool) -> Iterator[Value]:
    """Query-string or form pairs: the value under ``kind:NAME``, a name that needs looking at under ``kind:NAME (name)``."""
    for pair in text.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        shown = name_of(decode_percent(name, plus) if "%" in name or "+" in name else name)
        if value:
            yield f"{kind}:{shown}", value, plus, False, "raw"
        if not INERT.fullmatch(name) or GRAPH_NAME.search(name):
            yield f"{kind}:{shown} (name)", name, plus, False, "raw"


def json_values(body: bytes) -> Iterator[Value]:
    """JSON string values and keys with their ``$.a.b[0]`` path; a body cut short yields its string literals (``json:#n``)."""
    text = body.decode("utf-8", "replace")
    base = "json" if "\\" in text else "raw"
    if "\\u" in text:  # only an escape can leave half a pair
        yield from ((where, whole_characters(value), plus, quoted, how) for where, value, plus, quoted, how in _json_values(text, base))
    else:
        yield from _json_values(text, base)


def _json_values(text: str, base: str) -> Iterator[Value]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        for i, m in enumerate(_JSON_STRING.finditer(text)):
            try:
                value = json.loads(m.group(0))
            except ValueError:
                continue
            if isinstance(value, str) and value:
                yield f"json:#{i}", value, False, True, base
        return
    stack: list[tuple[str, Any, int, str]] = [("$", doc, 0, "")]
    while stack:
        path, node, depth, parent = stack.pop()
        if isinstance(node, str):
            if node:
                yield f"json:{path}", node, False, True, base
        elif depth >= JSON_DEPTH:
            continue
        elif isinstance(node, dict):
            for key, value in reversed(node.items()):
                key_path = f"{path}.{name_of(key)}" if INERT.fullmatch(key) else f"{path}[{name_of(json.dumps(key))}]"
                if not INERT.fullmatch(key):
                    # a query operator is read as written, after the key it applies to (``"password": {"$ne":``): what
                    # decides whether it is a filter an API takes or a login bypassed
                    yield f"json:{key_path} (key)", f'"{parent}": {{"{key}":' if key.startswith("$") else key, False, True, base
                elif key == "__proto__" or (key == "prototype" and path.endswith(".constructor")):
                    # prototype pollution: the path the key walks (``__proto__``, ``constructor.prototype``)
                    yield f"json:{key_path} (key)", key if key == "__proto__" else "constructor.prototype", False, True, base
                stack.append((key_path, value, depth + 1, key))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                stack.append((f"{path}[{i}]", node[i], depth + 1, parent))


def boundary_of(content_type: str) -> bytes | None:
    """The multipart boundary a Content-Type names, or None."""
    m = _BOUNDARY.search(content_type)
    return None if m is None else (m.group(1) or m.group(2)).encode("latin-1")


def multipart_values(body: bytes, boundary: bytes, files: bool = False) -> Iterator[Value]:
    """Multipart field values, field names and file names; file contents only with ``files`` (``multipart:NAME (file)``)."""
    for part in body.split(b"--" + boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = part.partition(b"\n\n")
        params: dict[str, str] = {}
        for line in head.decode("latin-1").splitlines():
            if line.lower().startswith("content-disposition:"):
                for m in _DISPOSITION.finditer(line):
                    params.setdefault((m.group(1) or m.group(3)).lower(), m.group(2) if m.group(1) else m.group(4))
        name = params.get("name", "")
        shown = name_of(name)
        if name and (not INERT.fullmatch(name) or GRAPH_NAME.search(name)):
            yield f"multipart:{shown} (name)", name, False, True, "raw"
        if "filename" in params:
            if params["filename"]:
                yield f"multipart:{shown} (filename)", params["filename"], False, True, "raw"
            if not files:
                continue
            shown += " (file)"
        if sep:
            value = content[:-2] if content.endswith(b"\r\n") else content.rstrip(b"\n")
            if value:
                yield f"multipart:{shown}", value.decode("utf-8", "replace"), False, True, "raw"


def body_values(content_type: str, body: bytes, whole: bool = False) -> Iterator[Value]:
    """A body's values by its ``Content-Type`` (sniffed when missing: JSON when it starts like JSON, a form when it has
    ``=``): form pairs, JSON strings, multipart fields. With ``whole``, also uploaded files' contents and a body no
    parser reads by its type: JSON sent as text/plain (a beacon, a request kept CORS-simple) as JSON, anything else
    (text, XML) as one value."""
    ctype = content_type.lower()
    if not ctype:
        head = body.lstrip()[:1]
        ctype = "application/json" if head in (b"{", b"[") else "application/x-www-form-urlencoded" if b"=" in body else ""
    if "x-www-form-urlencoded" in ctype:
        for location, value, plus, _, base in pairs(body.decode("latin-1"), "form", True):
            yield location, value, plus, True, base
    elif "json" in ctype:
        yield from json_values(body)
    elif "multipart/form-data" in ctype and (boundary := boundary_of(content_type)):
        yield from multipart_values(body, boundary, files=whole)
    elif whole:
        if body.lstrip()[:1] in (b"{", b"["):
            yield from json_values(body)
        else:
            yield "body", body.decode("utf-8", "replace"), False, True, "raw"
