"""XML and YAML request bodies, read whole for what their parser or deserialiser acts on.

The payload detectors read a form, a JSON body or a multipart field value by value. An XML or YAML body is a document:
its text is the application's data (a SOAP call, a purchase order, a config file, a feed about SQL or HTML), which the
model and its witness read, so the signatures for values are not run over it. What its parser acts on before the
application sees anything is read here, with signatures of its own:

* ``xml-external-entities``: an external or parameter entity declaration (XXE), an XInclude element (any prefix, in the
  XInclude namespace). A document type that names an external DTD alone is not: purchase orders (cXML), property lists
  and XHTML name theirs;
* ``code-injection``: what a deserialiser builds: XMLDecoder documents, XStream's dynamic proxies and the Java classes
  exploits build with either (``java.lang.ProcessBuilder``, ``Runtime``, the gadget classes: ``JdbcRowSetImpl``,
  ``TemplatesImpl``, ``ScriptEngineManager``, commons-collections functors, ``EventHandler``, Nashorn's
  ``NativeString``), .NET's ``ObjectDataProvider``, YAML tags that build a language's objects (``!!python/object``,
  ``!!javax.``, ``!ruby/object``, the same written out as ``tag:yaml.org,2002:...``) and ``%TAG`` directives (which
  no everyday document uses and which rename those tags);
* ``template-injection``: expressions a template or expression language evaluates: SpEL's ``T(java.lang...)``,
  ``{{ ...__class__... }}``, FreeMarker's ``Execute``, OGNL's member access.

A kind is read only where its rule is enabled (``rules.disabled``). How a parser decodes the body is followed: a
byte-order mark (UTF-8, UTF-16, UTF-32), NUL bytes between ASCII characters (UTF-16 or UTF-32 without one), numeric
character references in an XML document (``&#80;`` for ``P``: a parser expands them in attribute values), percent
escapes in a YAML document (a tag is a URI). An XML body is known by its type (``application/xml``, ``text/xml``, any
``+xml``) or, under a type that is not a form, JSON or multipart, by its start (``<?xml``, ``<!DOCTYPE``, ``<!--``).
Each reading is one RE2 search over at most ``payload.max_body_bytes``.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import unquote

import re2

from gateway.rules.inputs import re2_options

DOCUMENTS = frozenset({"xml", "yaml"})

# an entity or root name: any characters but space and markup (XML names are not ASCII only)
_NAME = r"""[^\s<>"'%]+"""
# the XInclude namespace, and a reference outside the document's folder (a scheme, an absolute path, a parent)
_XINCLUDE = r"""http://www\.w3\.org/2001/xinclude"""
_OUTSIDE = r"""(?:[a-z][a-z0-9+.-]*:|/|\\|\.\.)"""
# the Java classes deserialisation exploits build or call, spelt as Java names (lower case: documents are lower-cased)
_GADGETS = (r"""java\.lang\.(?:runtime|processbuilder)\b|java\.beans\.(?:xmldecoder|eventhandler)\b|com\.sun\.rowset\.jdbcrowsetimpl|"""
            r"""\btemplatesimpl\b|javax\.script\.scriptenginemanager|org\.apache\.commons\.collections[0-9]?\.functors\.|"""
            r"""jdk\.nashorn\.internal\.objects\.nativestring|javax\.naming\.initialcontext|sun\.rmi\.|com\.sun\.jndi\.""")
SIGNATURES: tuple[tuple[str, str, str], ...] = (
    # (the rule whose kind it is, the document it applies to, the pattern)
    ("xml-external-entities", "xml", r"""<!entity\s+%|<!entity\s+""" + _NAME + r"""\s+(?:system|public)\b|"""
                                     # an XInclude of a file or URL outside the document's folder, its namespace declared
                                     # before the element, on it before or after the reference
                                     r"""xmlns(?::[\w.-]+)?\s*=\s*["']""" + _XINCLUDE + r"""["'][\s\S]*?<(?:[\w.-]+:)?include\b[^>]*\bhref\s*=\s*["']""" + _OUTSIDE + r"""|"""
                                     r"""<(?:[\w.-]+:)?include\b[^>]*\bhref\s*=\s*["']""" + _OUTSIDE + r"""[^>]*\bxmlns(?::[\w.-]+)?\s*=\s*["']""" + _XINCLUDE + r"""|"""
                                     r"""<(?:[\w.-]+:)?include\b[^>]*\bxmlns(?::[\w.-]+)?\s*=\s*["']""" + _XINCLUDE + r"""["'][^>]*\bhref\s*=\s*["']""" + _OUTSIDE),
    ("code-injection", "xml", _GADGETS + r"""|<dynamic-proxy\b|<(?:void|method)\s+[^>]*\b(?:method|name)\s*=\s*["'](?:exec|start|invoke)["']|"""
                                         r"""<method>\s*<class>\s*java\.lang\.|\bobjectdataprovider\b"""),
    ("code-injection", "yaml", _GADGETS + r"""|!!python/(?:object|name|module)\b|!!javax?\.|!!com\.|!!org\.|!ruby/(?:object|hash:)|"""
                                          r"""tag:yaml\.org,2002:(?:python/(?:object|name|module)|javax?\.|com\.|org\.|ruby/object)|"""
                                          r"""(?:^|\n)\s*%tag\s"""),
    ("template-injection", "xml", r"""\bt\s*\(\s*java\.lang\.|\{\{[^}]{0,80}__\w+__|freemarker\.template\.utility\.execute|"""
                                  r"""#_memberaccess|@ognl\.ognlcontext@"""),
    ("template-injection", "yaml", r"""\bt\s*\(\s*java\.lang\.|\{\{[^}]{0,80}__\w+__|freemarker\.template\.utility\.execute|"""
                                   r"""#_memberaccess|@ognl\.ognlcontext@"""),
)

_TYPE = re.compile(r"[/+](xml|yaml|x-yaml)\b", re.IGNORECASE)
_PARSED = re.compile(r"x-www-form-urlencoded|json|multipart/", re.IGNORECASE)
_XML_START = re.compile(r"\s*<(?:\?xml\b|!doctype\b|!--)", re.IGNORECASE)
_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\xef\xbb\xbf", "utf-8-sig"),
         (b"\xfe\xff", "utf-16"), (b"\xff\xfe", "utf-16"))
_REFERENCE = re.compile(r"&#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}));")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")


def decode(body: bytes) -> str:
    """A body's text as a parser decodes it: by its byte-order mark, NUL bytes between characters dropped (UTF-16 or
    UTF-32 without one), else UTF-8."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body.decode(codec, "replace")
    if b"\x00" in body[:64]:
        body = body.replace(b"\x00", b"")
    return body.decode("utf-8", "replace")


def kind_of(content_type: str, body: bytes) -> tuple[str, str] | None:
    """``("xml" | "yaml", text)`` for a body a parser of that language reads: by its type, or for a type that is not a
    form, JSON or multipart, by an XML document's start; else None."""
    m = _TYPE.search(content_type)
    if m is not None:
        return m.group(1).lower().removeprefix("x-"), decode(body)
    if _PARSED.search(content_type) is not None or not body:
        return None
    head = body[:64]
    if b"<" not in head and b"\x00" not in head and not head.startswith((b"\xfe\xff", b"\xff\xfe")):
        return None
    text = decode(body)
    return ("xml", text) if _XML_START.match(text) is not None else None


def readings(kind: str, text: str) -> list[tuple[str, str]]:
    """The document's texts to search (lower-cased) and the decoding each took: as sent, and with numeric character
    references expanded (XML) or percent escapes undone (YAML) where it holds any."""
    out = [(text.lower(), "raw")]
    if kind == "xml" and "&#" in text:
        out.append((_REFERENCE.sub(_character, text).lower(), "html"))
    elif kind == "yaml" and _PERCENT.search(text) is not None:
        out.append((unquote(text).lower(), "percent"))
    return out


def _character(m: re.Match[str]) -> str:
    code = int(m.group(1), 16) if m.group(1) else int(m.group(2))
    return chr(code) if 0 < code < 0x110000 else ""


def search(kind: str, text: str, enabled: frozenset[str]) -> tuple[str, str, int, int, str] | None:
    """The first signature of an ``enabled`` kind that the document matches: (kind, the reading, start, end, decoding)."""
    for reading, decoding in readings(kind, text):
        for rule_kind, regex in _compiled(kind):
            if rule_kind in enabled:
                m = regex.search(reading)
                if m is not None:
                    return rule_kind, reading, m.start(), m.end(), decoding
    return None


@functools.cache
def _compiled(kind: str) -> tuple[tuple[str, Any], ...]:
    return tuple((rule_kind, re2.compile(pattern, re2_options())) for rule_kind, applies, pattern in SIGNATURES if applies == kind)
