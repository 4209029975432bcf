"""The small languages inside rule conditions: path globs, regex lists, sizes and comparisons.

Everything here runs at compile time except :func:`normalize_path`, which runs once per
request and returns the path untouched (no allocation) in the common clean case.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from gateway.config import parse_size


class PatternError(ValueError):
    """A pattern in a rule does not compile; the message says where and why."""


# ----------------------------------------------------------------------------- path normalisation

def normalize_path(path: str) -> str:
    """The path as a server would resolve it: percent-decoded, ``\\`` as ``/``, ``//`` collapsed,
    segment parameters (``;...``) dropped, dot segments removed.

    Rules match the normalised path so that ``/%2e%65nv`` or ``/static/../.env`` cannot
    slip past a rule written for ``/.env``. Java servlet containers (Tomcat, Jetty,
    Spring) drop everything from a ``;`` to the end of each segment before they map the
    path, so ``/actuator;/env`` is ``/actuator/env`` and ``/app/..;/manager/html`` is
    ``/manager/html`` to them; the rules read it the same way.
    """
    if "%" not in path and "//" not in path and "/." not in path and "\\" not in path and ";" not in path:
        return path  # the common clean path: five C-level scans, no allocation
    if "%" in path:
        path = unquote_to_bytes(path).decode("latin-1")
    path = path.replace("\\", "/")
    out: list[str] = []
    seg = ""
    for seg in path.split("/"):
        if ";" in seg:
            seg = seg[:seg.index(";")]
        if seg == "..":
            if out:
                out.pop()
        elif seg and seg != ".":
            out.append(seg)
    result = "/" + "/".join(out)
    if seg in ("", ".", "..") and out:  # the last segment names a folder: keep its trailing slash
        result += "/"
    return result


# ----------------------------------------------------------------------------- globs


def glob_to_regex(glob: str) -> str:
    """Translate a glob into a regex for ``fullmatch``.

    ``*`` matches within one path segment, ``**`` across segments (``/**/`` also matches
    ``/``, a trailing ``/**`` also matches nothing), ``?`` one character, ``[abc]`` a
    class, ``{a,b}`` alternatives.
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("/**/", i):
            out.append("/(?:.*/)?")
            i += 4
            continue
        if glob.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 2)
            if end < 0:
                raise PatternError(f"bad glob {glob!r}: unclosed '[' at position {i}")
            body = glob[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
            continue
        elif c == "{":
            end = glob.find("}", i)
            if end < 0:
                raise PatternError(f"bad glob {glob!r}: unclosed '{{' at position {i}")
            options = glob[i + 1:end].split(",")
            out.append("(?:" + "|".join(glob_to_regex(o) for o in options) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def compile_globs(globs: Sequence[str], *, ignore_case: bool = False) -> re.Pattern[str]:
    """One regex that fully matches any of ``globs`` (a single alternation: one C-level scan per request)."""
    flags = re.IGNORECASE if ignore_case else 0
    for g in globs:  # each alone first, so the error names the glob (a class such as [z-a] is not a range)
        try:
            re.compile(glob_to_regex(g), flags)
        except re.error as exc:
            raise PatternError(f"bad glob {g!r}: {exc.msg}") from None
    body = "|".join(f"(?:{glob_to_regex(g)})" for g in globs)
    return re.compile(body, flags)


def expand_braces(glob: str) -> list[str]:
    """``/a.{css,js}`` -> [``/a.css``, ``/a.js``] (one level per pair, applied repeatedly)."""
    start = glob.find("{")
    if start < 0:
        return [glob]
    end = glob.find("}", start)
    if end < 0:
        raise PatternError(f"bad glob {glob!r}: unclosed '{{' at position {start}")
    out: list[str] = []
    for option in glob[start + 1:end].split(","):
        out.extend(expand_braces(glob[:start] + option + glob[end + 1:]))
    return out


_WILD = frozenset("*?[{")


def _literal(text: str) -> bool:
    return bool(text) and not any(c in _WILD for c in text)


@dataclass
class PathShapes:
    """Path globs sorted by the cheapest exact test that implements each (see :func:`classify_path_globs`)."""

    exact: list[str] = field(default_factory=list)      # p == x
    suffixes: list[str] = field(default_factory=list)   # p.endswith(x)
    prefixes: list[str] = field(default_factory=list)   # p.startswith(x)
    contains: list[str] = field(default_factory=list)   # x in p
    rest: list[str] = field(default_factory=list)       # regex fullmatch


def classify_path_globs(globs: Sequence[str]) -> PathShapes:
    """Split path globs into shapes that need no regex.

    Most rule globs are "a file anywhere" (``/**/.env``), "a folder anywhere"
    (``/**/.git/**``), "under a prefix" (``/cgi-bin/**``), "an extension"
    (``/**/*.css``) or exact paths; those become ``str.endswith`` / ``in`` /
    ``startswith`` / set tests on the normalised path, which cost tens of nanoseconds
    where a backtracking ``/(?:.*/)?`` regex costs a microsecond. Everything else stays a
    glob for one combined regex. Semantics are exactly :func:`glob_to_regex`'s.
    """
    shapes = PathShapes()
    for glob in globs:
        glob_to_regex(glob)  # validate (raises PatternError with the position)
        for g in expand_braces(glob):
            if _literal(g):
                shapes.exact.append(g)
            elif g.startswith("/**/") and g.endswith("/**") and _literal(g[4:-3]):
                mid = g[3:-3]                          # "/name"
                shapes.contains.append(mid + "/")      # a folder anywhere: "/name/" inside ...
                shapes.suffixes.append(mid)            # ... or the folder itself at the end
            elif g.startswith("/**/*.") and _literal(g[6:]) and "/" not in g[6:]:
                shapes.suffixes.append(g[5:])          # "/**/*.css": the last segment ends with ".css"
            elif g.startswith("/**/") and _literal(g[4:]):
                shapes.suffixes.append(g[3:])          # "/**/.env": ends with "/.env" (or is "/.env")
            elif g.endswith("/**") and _literal(g[:-3]):
                shapes.prefixes.append(g[:-3] + "/")   # "/cgi-bin/**": under "/cgi-bin/" ...
                shapes.exact.append(g[:-3])            # ... or "/cgi-bin" itself
            else:
                shapes.rest.append(g)
    return shapes


# ----------------------------------------------------------------------------- regex lists

_GLOBAL_FLAGS = re.compile(r"^\(\?([imsx]+)\)")


def compile_regex(pattern: str) -> re.Pattern[str]:
    """Compile one regex; the error names the pattern and the position."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        pos = f" at position {exc.pos}" if exc.pos is not None else ""
        raise PatternError(f"bad regex {pattern!r}: {exc.msg}{pos}") from None


def compile_regexes(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regex that searches for any of ``patterns``.

    Each pattern is checked alone first (so its error position is its own); leading
    global flags such as ``(?i)`` become scoped groups so patterns can be joined.
    """
    for p in patterns:
        compile_regex(p)
    if len(patterns) == 1:
        return compile_regex(patterns[0])
    parts = []
    for p in patterns:
        m = _GLOBAL_FLAGS.match(p)
        parts.append(f"(?{m.group(1)}:{p[m.end():]})" if m else f"(?:{p})")
    return compile_regex("|".join(parts))


# ----------------------------------------------------------------------------- comparisons

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq, "!=": operator.ne,
}
_CMP = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\S+)\s*$")


def parse_comparison(text: object, *, sizes: bool = False) -> tuple[Callable[[float, float], bool], float, str]:
    """``"> 1MiB"`` / ``">= 0.5"`` -> (operator, number, canonical text); sizes accept k/M/G suffixes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return operator.eq, float(text), f"== {text}"
    m = _CMP.match(str(text)) if isinstance(text, str) else None
    if not m:
        raise PatternError(f"{text!r} is not a comparison like '> 1MiB' or '>= 0.5'" if sizes else
                           f"{text!r} is not a comparison like '>= 20' or '> 0.5'")
    raw = parse_size(m.group(2)) if sizes else m.group(2)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise PatternError(f"{text!r}: {m.group(2)!r} is not a number" + (" or size" if sizes else "")) from None
    return _OPS[m.group(1)], value, f"{m.group(1)} {m.group(2)}"


_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$")
_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0,
            "d": 86400.0, "day": 86400.0}


def parse_rate(text: object) -> tuple[int, float]:
    """``"120/min"`` -> (120, 60.0); ``"10/5s"`` -> (10, 5.0)."""
    m = _RATE.match(text) if isinstance(text, str) else None
    if not m or int(m.group(1)) <= 0 or (m.group(2) and int(m.group(2)) == 0):
        raise PatternError(f"{text!r} is not a rate like 120/min (units: s, min, h, day; a period above 0)")
    return int(m.group(1)), _PERIODS[m.group(3)] * (int(m.group(2)) if m.group(2) else 1)
