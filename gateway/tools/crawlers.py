"""Verified-crawler IP ranges: read an operator's published list, write a named list for rules.

Search engines publish the addresses their crawlers use as JSON of the form
``{"creationTime": "...", "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "..."}]}``
(Google, Bing, Apple, DuckDuckGo, OpenAI and others use this shape). Rules refer to such a
list by name (``ip: list:googlebot``); ``clefgate crawlers import FILE`` refreshes one::

    clefgate crawlers import googlebot.json                  # -> rules/lists/googlebot.txt
    clefgate crawlers import bing.json --name bingbot --lists-dir /etc/clefgate/lists

The written file is plain text, one CIDR per line, with a header recording where it came
from and when, so a reviewer can see what changed in a diff.
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
    header = [
        f"# {name}: verified crawler IP ranges ({len(ranges.prefixes)} prefixes)",
        f"# source: {source}",
        f"# published: {ranges.created or 'unknown'}",
        f"# imported: {imported} by `clefgate crawlers import`",
    ]
    return "\n".join(header + ranges.prefixes) + "\n"


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


def main(argv: Sequence[str] | None = None) -> int:
    """``clefgate crawlers import FILE [--name NAME] [--lists-dir DIR] [--source URL]``."""
    parser = argparse.ArgumentParser(prog="clefgate crawlers", description="Manage verified-crawler IP lists used by rules (ip: list:NAME).")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="import an operator's published JSON (creationTime + prefixes) as a named list")
    imp.add_argument("file", help="the published JSON file (e.g. googlebot.json, bingbot.json)")
    imp.add_argument("--name", help="list name (default: the file name without extension)")
    imp.add_argument("--lists-dir", default=str(DEFAULT_LISTS_DIR), help=f"folder of named lists (default: {DEFAULT_LISTS_DIR})")
    imp.add_argument("--source", help="where the file was downloaded from, recorded in the list header (default: the file path)")
    args = parser.parse_args(list(argv) if argv is not None else None)

    name = args.name or Path(args.file).stem.lower()
    if not LIST_NAME.fullmatch(name):
        print(f"clefgate crawlers: {name!r} is not a list name (lower-case letters, digits, - and _)", file=sys.stderr)
        return 2
    try:
        data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"clefgate crawlers: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    except json.JSONDecodeError as exc:
        print(f"clefgate crawlers: {args.file}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", file=sys.stderr)
        return 1
    ranges = parse_published(data)
    for problem in ranges.problems:
        print(f"clefgate crawlers: {args.file}: {problem}", file=sys.stderr)
    if not ranges.prefixes:
        print(f"clefgate crawlers: {args.file}: no usable prefixes; the list was not written", file=sys.stderr)
        return 1
    imported = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    target = write_list(Path(args.lists_dir), name, render_list(name, ranges, args.source or args.file, imported))
    print(f"{target}: {len(ranges.prefixes)} prefixes (published {ranges.created or 'unknown'})"
          + (f", {len(ranges.problems)} entries skipped" if ranges.problems else ""))
    return 1 if ranges.problems else 0


if __name__ == "__main__":
    sys.exit(main())
