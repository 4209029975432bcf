"""CIDR sets for the ``ip:`` condition, token sets for ``user_agent: list:NAME``, and the named lists they refer to.

A :class:`PrefixSet` keeps, per prefix length, a Python ``set`` of network numbers, so a
lookup is one shift and one hash probe per distinct length present (Googlebot's ranges
use three lengths), independent of how many prefixes a list holds.

An :class:`AgentSet` is one trie-shaped regex over a list's tokens (see
``gateway.tools.crawlers`` for what a token is and how it matches), with its answers for
recent user agents kept: browsers send a few hundred distinct user agents, so most
requests cost one dictionary probe instead of a scan.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from pathlib import Path

from gateway.config import parse_cidr
from gateway.tools.crawlers import LIST_NAME, AgentTokens, agent_lines, agent_regex, parse_agents, parse_published


class PrefixSet:
    """A set of IPv4/IPv6 networks answering "is this address inside any of them?"."""

    __slots__ = ("count", "v4", "v6")

    def __init__(self, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network] = ()) -> None:
        v4: dict[int, set[int]] = {}
        v6: dict[int, set[int]] = {}
        count = 0
        for net in networks:
            table, bits = (v4, 32) if net.version == 4 else (v6, 128)
            shift = bits - net.prefixlen
            table.setdefault(shift, set()).add(int(net.network_address) >> shift)
            count += 1
        # longest prefixes first: the common hit (a /27 crawler range) is found sooner
        self.v4 = tuple(sorted(v4.items()))
        self.v6 = tuple(sorted(v6.items()))
        self.count = count

    def contains(self, ip: tuple[int, int] | None) -> bool:
        """``ip`` as returned by ``gateway.clients.parse_ip``; None (not an address) is never inside."""
        if ip is None:
            return False
        version, value = ip
        for shift, nets in self.v4 if version == 4 else self.v6:
            if value >> shift in nets:
                return True
        return False

    def __len__(self) -> int:
        return self.count


class AgentSet:
    """Tokens answering "does this lower-cased user agent name any of them?" (as ``gateway.tools.crawlers`` matches a token)."""

    __slots__ = ("_search", "_seen", "count")
    MEMO = 4096      # user agents whose answers are kept; all are dropped when full
    MEMO_CHARS = 512  # longer user agents are searched every time, so the memo stays small

    def __init__(self, tokens: Iterable[str]) -> None:
        tokens = list(tokens)
        self._search = agent_regex(tokens).search
        self._seen: dict[str, bool] = {}
        self.count = len(tokens)

    def matches(self, ua: str) -> bool:
        """``ua`` already lower-cased (the rule table's ``ua``)."""
        hit = self._seen.get(ua)
        if hit is None:
            hit = self._search(ua) is not None
            if len(ua) <= self.MEMO_CHARS:
                if len(self._seen) >= self.MEMO:
                    self._seen.clear()
                self._seen[ua] = hit
        return hit

    def __len__(self) -> int:
        return self.count


class NamedLists:
    """Named lists from a folder. IP lists: ``<name>.txt`` (one CIDR per line, ``#`` comments) or ``<name>.json``
    (an operator's published ``prefixes`` file); user-agent lists: ``<name>.txt`` (one token per line, ``#``
    comments). Which a file is depends on the condition naming it. Loaded on first use, once per compile."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._cache: dict[str, tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], list[str]]] = {}
        self._agents: dict[str, AgentTokens] = {}

    def available(self) -> list[str]:
        if self.folder is None or not self.folder.is_dir():
            return []
        return sorted({p.stem for p in self.folder.iterdir() if p.suffix in (".txt", ".json") and LIST_NAME.fullmatch(p.stem)})

    def get(self, name: str) -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], list[str]] | None:
        """(networks, problems) of a list, or None when no such list exists."""
        if name in self._cache:
            return self._cache[name]
        if self.folder is None or not LIST_NAME.fullmatch(name):
            return None
        txt, js = self.folder / f"{name}.txt", self.folder / f"{name}.json"
        if txt.is_file():
            result = self._read_text(txt)
        elif js.is_file():
            result = self._read_json(js)
        else:
            return None
        self._cache[name] = result
        return result

    def agents(self, name: str) -> AgentTokens | None:
        """A user-agent list's tokens and problems, or None when no ``<name>.txt`` exists."""
        if name in self._agents:
            return self._agents[name]
        if self.folder is None or not LIST_NAME.fullmatch(name):
            return None
        path = self.folder / f"{name}.txt"
        if not path.is_file():
            return None
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            result = AgentTokens(problems=[f"cannot read {path.name}: {exc.strerror}"])
        except UnicodeDecodeError as exc:
            result = AgentTokens(problems=[f"{path.name}: not UTF-8 text (byte {exc.start})"])
        else:
            result = parse_agents(agent_lines(text))
            result.problems = [f"{path.name}:{p}" for p in result.problems]
            if not result.tokens and not result.problems:
                result.problems.append(f"{path.name}: no tokens")
        self._agents[name] = result
        return result

    @staticmethod
    def _read_text(path: Path) -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], list[str]]:
        nets, problems = [], []
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            return [], [f"cannot read {path.name}: {exc.strerror}"]
        except UnicodeDecodeError as exc:
            return [], [f"{path.name}: not UTF-8 text (byte {exc.start})"]
        for lineno, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                nets.append(parse_cidr(text))
            except ValueError as exc:
                problems.append(f"{path.name}:{lineno}: {exc}")
        return nets, problems

    @staticmethod
    def _read_json(path: Path) -> tuple[list[ipaddress.IPv4Network | ipaddress.IPv6Network], list[str]]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            return [], [f"cannot read {path.name}: {exc.strerror}"]
        except json.JSONDecodeError as exc:
            return [], [f"{path.name}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"]
        except UnicodeDecodeError as exc:
            return [], [f"{path.name}: not UTF-8 text (byte {exc.start})"]
        ranges = parse_published(data, crawler=False)
        return [ipaddress.ip_network(p) for p in ranges.prefixes], [f"{path.name}: {p}" for p in ranges.problems]
