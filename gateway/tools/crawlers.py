"""Named lists for rules: verified-crawler IP ranges and crawler user-agent tokens.

Search engines publish the addresses their crawlers use as JSON of the form
``{"creationTime": "...", "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "..."}]}``
(Google, Bing, Apple, DuckDuckGo, OpenAI and others use this shape). Rules refer to such a
list by name (``ip: list:googlebot``); ``clefgate crawlers import FILE`` refreshes one::

    clefgate crawlers import googlebot.json                  # -> rules/lists/googlebot.txt
    clefgate crawlers import bing.json --name bingbot --lists-dir /etc/clefgate/lists

A user-agent list holds the product tokens crawlers name themselves by (``GPTBot``,
``AhrefsBot``); rules refer to it as ``user_agent: list:ai-crawlers``, and
``clefgate crawlers import-agents FILE`` writes one from a JSON object keyed by crawler
name (the shape of ai.robots.txt's ``robots.json``), a JSON list of names, or a text file::

    clefgate crawlers import-agents robots.json --name ai-crawlers \
        --source https://github.com/ai-robots-txt/ai.robots.txt/blob/<commit>/robots.json

A token matches a user agent case-insensitively as a name of its own, never as a piece of
a longer name, a host name or an address: the character before it is not a letter, digit
or one of ``. _ - @ /``, the one after it not a letter, digit or one of ``. _ @``
(``SemrushBot`` matches ``SemrushBot/7~bl`` and ``SemrushBot-SI/0.97``; ``Spider`` would
match ``Spider/1.0`` but neither ``Baiduspider`` nor ``www.baidu.com/search/spider.html``). Every token is checked the same way on import and on load: letters, digits,
spaces and ``. _ / : + -`` only (so nothing in it acts as a pattern), at least
:data:`MIN_AGENT_TOKEN` characters, and matching none of :data:`BROWSER_AGENTS`, so no list
can catch people's browsers.

The written files are plain text, one entry per line, with a header recording where it
came from and when, so a reviewer can see what changed in a diff.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIST_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DEFAULT_LISTS_DIR = Path(__file__).resolve().parents[2] / "rules" / "lists"
# A prefix this broad is never a crawler's own range: refusing it keeps a bad or hostile
# file from turning "verified crawler" into "anyone".
MIN_V4_PREFIX = 8
MIN_V6_PREFIX = 16

AGENT_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._/:+-]*$")
# Shorter tokens are words of browsers' and libraries' user agents far more often than names of crawlers.
MIN_AGENT_TOKEN = 3
MAX_AGENT_TOKEN = 64
# People's browsers as they name themselves: no token of a user-agent list may match any of these.
BROWSER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/129.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 14; SM-S918B Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Version/4.0 Chrome/130.0.6723.107 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/128.0.0.0 YaBrowser/24.10.0.0 "
    "Safari/537.36",
    "Mozilla/5.0 (Linux; Android 13; SAMSUNG SM-A536B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 "
    "Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 "
    "Safari/604.1",
    "Mozilla/5.0 (iPad; CPU OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 "
    "Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/132.0 Mobile/15E148 "
    "Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; WOW64; Trident/7.0; rv:11.0) like Gecko",
    "Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.1; Trident/6.0)",
)


@dataclass
class PublishedRanges:
    """What an operator's file says: the prefixes, its creation time, and what could not be read."""

    prefixes: list[str] = field(default_factory=list)
    created: str = ""
    problems: list[str] = field(default_factory=list)


def parse_published(data: Any, *, crawler: bool = True) -> PublishedRanges:
    """Read the ``{"creationTime", "prefixes": [{"ipv4Prefix"|"ipv6Prefix": CIDR}]}`` shape (or a bare list of CIDRs).

    Prefixes are normalised (host bits cleared), de-duplicated and sorted (IPv4 first);
    invalid entries are reported in ``problems`` and left out. With ``crawler`` (the
    import command), private and too-broad prefixes are refused as well: they cannot be
    a crawler operator's own range. Rule lists in this format may hold any network.
    """
    out = PublishedRanges()
    if isinstance(data, dict):
        out.created = str(data.get("creationTime") or data.get("syncToken") or "")
        entries = data.get("prefixes")
        if not isinstance(entries, list):
            out.problems.append("no 'prefixes' list in the file")
            return out
    elif isinstance(data, list):
        entries = data
    else:
        out.problems.append(f"expected a JSON object with 'prefixes', got {type(data).__name__}")
        return out
    seen: set[ipaddress.IPv4Network | ipaddress.IPv6Network] = set()
    for i, entry in enumerate(entries):
        if isinstance(entry, dict):
            raw = entry.get("ipv4Prefix") or entry.get("ipv6Prefix") or entry.get("prefix")
        else:
            raw = entry
        if not isinstance(raw, str):
            out.problems.append(f"prefixes[{i}]: no ipv4Prefix or ipv6Prefix")
            continue
        try:
            net = ipaddress.ip_network(raw.strip(), strict=False)
        except ValueError:
            out.problems.append(f"prefixes[{i}]: {raw!r} is not a CIDR")
            continue
        if not crawler:
            seen.add(net)
            continue
        if net.prefixlen < (MIN_V4_PREFIX if net.version == 4 else MIN_V6_PREFIX):
            out.problems.append(f"prefixes[{i}]: {raw!r} is too broad to be a crawler's range (refused)")
            continue
        if not net.is_global:
            out.problems.append(f"prefixes[{i}]: {raw!r} is not a public address range (refused)")
            continue
        seen.add(net)
    out.prefixes = [str(n) for n in sorted(seen, key=lambda n: (n.version, n.network_address, n.prefixlen))]
    return out


def render_list(name: str, ranges: PublishedRanges, source: str, imported: str) -> str:
    """The text of a named list file: a provenance header, then one CIDR per line."""
    header = _provenance(f"{name}: verified crawler IP ranges ({len(ranges.prefixes)} prefixes)", source,
                         ranges.created, imported, "import")
    return "\n".join(header + ranges.prefixes) + "\n"


def _provenance(title: str, source: str, published: str, imported: str, command: str) -> list[str]:
    """A list file's header: what it is, where it came from, when that was published and when it was imported."""
    return [
        f"# {title}",
        f"# source: {source}",
        f"# published: {published or 'unknown'}",
        f"# imported: {imported} by `clefgate crawlers {command}`",
    ]


# ----------------------------------------------------------------------------- user-agent lists

@dataclass
class AgentTokens:
    """A user-agent list's tokens (first spelling kept, in order), what was refused, and how many repeats were merged."""

    tokens: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    merged: int = 0


def agent_regex(tokens: Sequence[str]) -> re.Pattern[str]:
    """One regex that finds any of ``tokens`` as a name of its own in a **lower-cased** user agent.

    The tokens are folded into a character trie (``gpt(?:bot|-user)``), so at each position
    the engine follows at most one branch per character instead of trying every token.
    """
    trie: dict[str, dict[str, Any]] = {}
    for token in tokens:
        node = trie
        for ch in token.lower():
            node = node.setdefault(ch, {})
        node[""] = {}
    return re.compile(f"(?<![0-9a-z._@/-])(?:{_trie_pattern(trie)})(?![0-9a-z._@])")


def _trie_pattern(node: dict[str, dict[str, Any]]) -> str:
    branches = [re.escape(ch) + _trie_pattern(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in node else body


_BROWSERS = [ua.lower() for ua in BROWSER_AGENTS]


def agent_problem(token: str) -> str | None:
    """Why ``token`` cannot be in a user-agent list, or None when it can."""
    if not AGENT_TOKEN.fullmatch(token):
        return f"{token!r} has characters other than letters, digits, spaces and . _ / : + - (a token is a name, not a pattern)"
    if len(token) < MIN_AGENT_TOKEN:
        return f"{token!r} is shorter than {MIN_AGENT_TOKEN} characters (refused: too likely to match browsers and libraries)"
    if len(token) > MAX_AGENT_TOKEN:
        return f"{token!r} is longer than {MAX_AGENT_TOKEN} characters"
    search = agent_regex([token]).search
    browser = next((ua for ua, low in zip(BROWSER_AGENTS, _BROWSERS, strict=True) if search(low)), None)
    if browser is not None:
        return f"{token!r} matches browsers' user agents (refused), e.g. {browser!r}"
    return None


def parse_agents(entries: Sequence[tuple[str, object]]) -> AgentTokens:
    """Validate ``(where, entry)`` pairs into a user-agent list: each entry a token, duplicates (in any case) merged."""
    out = AgentTokens()
    seen: set[str] = set()
    for where, entry in entries:
        if not isinstance(entry, str):
            out.problems.append(f"{where}: expected a name, got {type(entry).__name__}")
            continue
        token = " ".join(entry.split())
        if not token:
            out.problems.append(f"{where}: an empty name")
            continue
        problem = agent_problem(token)
        if problem is not None:
            out.problems.append(f"{where}: {problem}")
            continue
        key = token.lower()
        if key in seen:
            out.merged += 1
            continue
        seen.add(key)
        out.tokens.append(token)
    return out


def agent_lines(text: str) -> list[tuple[str, object]]:
    """The entries of a user-agent list's text (one per line, ``#`` comments, blank lines skipped), each with its line number."""
    out: list[tuple[str, object]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.append((str(lineno), entry))
    return out


def agent_entries(data: Any) -> list[tuple[str, object]]:
    """The entries of a JSON object keyed by crawler name (``robots.json``) or of a JSON list of names."""
    if isinstance(data, dict):
        return [(f"[{json.dumps(key)}]", key) for key in data]
    if isinstance(data, list):
        return [(f"[{i}]", entry) for i, entry in enumerate(data)]
    raise ValueError(f"expected a JSON object keyed by crawler name or a list of names, got {type(data).__name__}")


def render_agents(name: str, agents: AgentTokens, source: str, published: str, imported: str,
                  excluded: Sequence[str] = ()) -> str:
    """The text of a user-agent list file: a provenance header, then one token per line."""
    header = _provenance(f"{name}: crawler user-agent tokens ({len(agents.tokens)} tokens; matched case-insensitively "
                         "as names of their own)", source, published, imported, "import-agents")
    if excluded:
        header.append(f"# left out on import: {', '.join(excluded)}")
    return "\n".join(header + agents.tokens) + "\n"


def write_list(lists_dir: Path, name: str, text: str) -> Path:
    """Write ``<lists_dir>/<name>.txt`` atomically (a reload never sees half a file)."""
    lists_dir.mkdir(parents=True, exist_ok=True)
    target = lists_dir / f"{name}.txt"
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=lists_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


_UNREAD = object()


def _read(file: str) -> str | None:
    """The file's text, or None with the reason on stderr."""
    try:
        return Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"clefgate crawlers: cannot read {file}: {exc.strerror}", file=sys.stderr)
    except UnicodeDecodeError as exc:
        print(f"clefgate crawlers: {file}: not UTF-8 text (byte {exc.start})", file=sys.stderr)
    return None


def _json(file: str, text: str) -> Any:
    """The JSON document in ``text``, or ``_UNREAD`` with the reason on stderr."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        print(f"clefgate crawlers: {file}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", file=sys.stderr)
        return _UNREAD


def _usable(args: argparse.Namespace, problems: Sequence[str], usable: int, what: str) -> bool:
    """Each problem with the file on stderr; False, saying nothing was written, when nothing usable is left."""
    for problem in problems:
        print(f"clefgate crawlers: {args.file}: {problem}", file=sys.stderr)
    if not usable:
        print(f"clefgate crawlers: {args.file}: no usable {what}; the list was not written", file=sys.stderr)
    return bool(usable)


def _today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def main(argv: Sequence[str] | None = None) -> int:
    """``clefgate crawlers import FILE ...`` (IP ranges) and ``clefgate crawlers import-agents FILE ...`` (user agents)."""
    parser = argparse.ArgumentParser(prog="clefgate crawlers",
                                     description="Manage the named lists rules use (ip: list:NAME, user_agent: list:NAME).")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="import an operator's published JSON (creationTime + prefixes) as a named list")
    imp.add_argument("file", help="the published JSON file (e.g. googlebot.json, bingbot.json)")
    agents = sub.add_parser("import-agents", help="import crawler names (robots.json-style object, JSON list or text) "
                                                  "as a named user-agent list")
    agents.add_argument("file", help="a JSON object keyed by crawler name, a JSON list of names, or a .txt file (one per line)")
    agents.add_argument("--published", default="", help="the source's date or revision, recorded in the list header")
    agents.add_argument("--exclude", action="append", default=[], metavar="NAME",
                        help="leave this name out (case-insensitive; repeatable), recorded in the list header")
    for p in (imp, agents):
        p.add_argument("--name", help="list name (default: the file name without extension)")
        p.add_argument("--lists-dir", default=str(DEFAULT_LISTS_DIR), help=f"folder of named lists (default: {DEFAULT_LISTS_DIR})")
        p.add_argument("--source", help="where the file was downloaded from, recorded in the list header (default: the file path)")
    args = parser.parse_args(list(argv) if argv is not None else None)

    name = args.name or Path(args.file).stem.lower()
    if not LIST_NAME.fullmatch(name):
        print(f"clefgate crawlers: {name!r} is not a list name (lower-case letters, digits, - and _)", file=sys.stderr)
        return 2
    if args.command == "import-agents":
        return _import_agents(args, name)
    text = _read(args.file)
    data = _json(args.file, text) if text is not None else _UNREAD
    if data is _UNREAD:
        return 1
    ranges = parse_published(data)
    if not _usable(args, ranges.problems, len(ranges.prefixes), "prefixes"):
        return 1
    target = write_list(Path(args.lists_dir), name, render_list(name, ranges, args.source or args.file, _today()))
    print(f"{target}: {len(ranges.prefixes)} prefixes (published {ranges.created or 'unknown'})"
          + (f", {len(ranges.problems)} entries skipped" if ranges.problems else ""))
    return 1 if ranges.problems else 0


def _import_agents(args: argparse.Namespace, name: str) -> int:
    text = _read(args.file)
    if text is None:
        return 1
    if Path(args.file).suffix.lower() == ".txt":
        entries = agent_lines(text)
    else:
        data = _json(args.file, text)
        if data is _UNREAD:
            return 1
        try:
            entries = agent_entries(data)
        except ValueError as exc:
            print(f"clefgate crawlers: {args.file}: {exc}", file=sys.stderr)
            return 1
    left_out = {e.lower() for e in args.exclude}
    excluded = list(dict.fromkeys(entry.strip() for _, entry in entries if isinstance(entry, str) and entry.strip().lower() in left_out))
    agents = parse_agents([(where, entry) for where, entry in entries
                           if not (isinstance(entry, str) and entry.strip().lower() in left_out)])
    if not _usable(args, agents.problems, len(agents.tokens), "names"):
        return 1
    text = render_agents(name, agents, args.source or args.file, args.published, _today(), excluded)
    target = write_list(Path(args.lists_dir), name, text)
    notes = [f"{len(agents.problems)} entries refused"] if agents.problems else []
    notes += [f"{agents.merged} repeats merged"] if agents.merged else []
    notes += [f"{len(excluded)} left out"] if excluded else []
    print(f"{target}: {len(agents.tokens)} tokens" + (f" ({', '.join(notes)})" if notes else ""))
    return 1 if agents.problems else 0


if __name__ == "__main__":
    sys.exit(main())
