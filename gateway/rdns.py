"""Forward-confirmed reverse DNS: the names an address really has, for crawlers that are verified by name.

A search engine documents two ways to tell its crawler from an impostor: its published address ranges,
and the address's reverse DNS name, under the engine's own domain, which resolves back to the address.
The ranges change and a shipped list is a snapshot, so the rule table asks both: ``ip: list:NAME``, and
``reverse_dns: [domain, ...]`` (:mod:`gateway.rules.conditions`), which holds when one of the address's
forward-confirmed names is a domain listed or under one.

The PTR lookup alone proves nothing: whoever owns an address writes its PTR record. The name must resolve
back (A/AAAA) to the address, and that answer comes from the domain's owner.

:class:`ReverseNames` keeps each address's answer (confirmed names, none, or a failed lookup) for a while,
so a crawler's address is looked up once a day, not per request. Lookups run on the system resolver in a
few threads of their own (``getnameinfo``, then ``getaddrinfo``), never on the event loop and never in the
loop's shared executor; a request waits for at most ``timeout_s`` (0: no lookups, every address unverified by
name and unanswered). A lookup that times out or fails confirms nothing (counted as ``failed``), leaves the
address unanswered (neither a crawler nor a spoofer: the condition ``reverse_dns_unanswered``) and is tried
again after ``RETRY_S``; one that finds every thread taken, or half of them taken by addresses of its network,
is refused (``busy``), counts as unanswered too, and is tried again after ``BUSY_RETRY_S``. A thread stays
taken until the system resolver answers, which a slow PTR zone can make last its full timeout (seconds). Only
requests that claim a name a ``reverse_dns`` or ``reverse_dns_unanswered`` rule reads ever cause a lookup (the
rule loader requires a ``user_agent`` condition beside it), so a flood of other traffic costs none.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from gateway import metrics
from gateway.config import Config

LOOKUPS = metrics.counter("clefgate_reverse_dns_lookups_total",
                          "Forward-confirmed reverse DNS lookups of client addresses, by result: confirmed (a name that resolves "
                          "back), unconfirmed (no name, or none that resolves back), failed (timeout or resolver error), "
                          "busy (every lookup thread, or its network's share of them, taken).", ("result",))
RETRY_S = 60.0  # a failed lookup is tried again after this long
BUSY_RETRY_S = 5.0  # and one refused for want of a thread after this long
THREADS = 8  # lookups at once; past this, a lookup is refused (busy), never queued behind slow ones
NETWORK_THREADS = THREADS // 2  # of them for addresses of one /24 (IPv4) or /48 (IPv6): one network cannot take them all

# (ptr lookup, forward lookup): the system resolver's, or a test's
Resolver = tuple[Callable[[str], str | None], Callable[[str], Iterable[str]]]


def _ptr(address: str) -> str | None:
    """The address's PTR name, or None when it has none."""
    try:
        host, _ = socket.getnameinfo((address, 0), socket.NI_NAMEREQD)
    except socket.gaierror as exc:
        if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            return None
        raise
    return host


def _forward(name: str) -> list[str]:
    """The addresses ``name`` resolves to (empty when it resolves to none). A name of two labels or more is asked as an
    absolute name (``crawl-1.googlebot.com.``), so the resolver's search list never makes it another name
    (``crawl-1.googlebot.com.corp.example``); a one-label name (``localhost``) is under no domain a rule may list."""
    try:
        infos = socket.getaddrinfo(name + "." if "." in name else name, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
            return []
        raise
    return [str(info[4][0]) for info in infos]


SYSTEM: Resolver = (_ptr, _forward)


def _network(address: str) -> str:
    """The /24 of an IPv4 address, the /48 of an IPv6 one (the address itself when it is neither)."""
    found = _address(address)
    if found is None:
        return address
    return str(ipaddress.ip_network(f"{found}/{24 if found.version == 4 else 48}", strict=False))


# ``ReverseNames.timeout_s`` of an offline decider: nothing is looked up, and every address counts as answered with no name
OFFLINE = -1.0


def without_lookups(cfg: Config) -> Config:
    """``cfg`` deciding offline (eval, replay, the console's what-if): nothing is looked up, since no event loop waits for a
    lookup there, and every address counts as answered with no name, as most claimants' addresses are answered live: a
    crawler's name from outside its ranges is decided as a spoofer, not as unanswered (which is for a server whose lookups
    are off or failing)."""
    return dataclasses.replace(cfg, clients=dataclasses.replace(cfg.clients, reverse_dns_timeout_s=OFFLINE))


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``text`` writes (an IPv4-mapped IPv6 address as IPv4; a zone dropped), or None."""
    try:
        found = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    return found.ipv4_mapped or found if isinstance(found, ipaddress.IPv6Address) else found


def confirmed_names(address: str, resolver: Resolver = SYSTEM) -> tuple[str, ...]:
    """The address's PTR name, lower case without the final dot, when it resolves back to the address; else ``()``.

    Raises ``OSError`` when the resolver fails (not when a name is missing)."""
    ptr, forward = resolver
    name = ptr(address)
    if not name:
        return ()
    name = name.lower().rstrip(".")
    if _address(name) is not None:  # a PTR record that holds an address names nothing
        return ()
    mine = _address(address)
    return (name,) if mine is not None and any(_address(a) == mine for a in forward(name)) else ()


class LookupNeeded(Exception):
    """Raised by :meth:`ReverseNames.check` for an address it has no answer for: the pipeline looks the address up
    (:meth:`ReverseNames.lookup`) and resumes the rule table where it stopped (``resume``)."""

    def __init__(self, names: ReverseNames, address: str, resume: tuple[Any, ...]) -> None:
        super().__init__(address)
        self.names = names
        self.address = address
        self.resume = resume  # the rule table's state where it stopped: evaluate(features, resume) goes on from there


def under(name: str, domains: tuple[str, ...]) -> bool:
    """``name`` is one of ``domains`` or a name under one (``crawl-66-249-66-1.googlebot.com`` is under ``googlebot.com``)."""
    return any(name == d or name.endswith("." + d) for d in domains)


class ReverseNames:
    """Each client address's forward-confirmed names, kept ``ttl_s`` (``negative_ttl_s`` for none, ``RETRY_S`` for a
    failed lookup); at most ``max_entries`` addresses, the least recently looked up dropped first."""

    def __init__(self, *, timeout_s: float = 2.0, ttl_s: float = 86400.0, negative_ttl_s: float = 3600.0, max_entries: int = 65536,
                 resolver: Resolver = SYSTEM, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self.negative_ttl_s = negative_ttl_s
        self.max_entries = max_entries
        self.resolver = resolver
        self.clock = clock
        # address -> (expires, confirmed names, answered: False for a failed or refused lookup)
        self._known: OrderedDict[str, tuple[float, tuple[str, ...], bool]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[tuple[str, ...]]] = {}
        self._busy = 0
        self._busy_in: dict[str, int] = {}  # lookups in progress per network (_network)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    def names(self, address: str) -> tuple[str, ...] | None:
        """The address's confirmed names (``()``: none), or None when it was not looked up or its answer expired."""
        entry = self._known.get(address)
        if entry is None:
            return None
        if entry[0] <= self.clock():
            del self._known[address]
            return None
        return entry[1]

    def check(self, address: str, resume: tuple[Any, ...] = (None,)) -> None:
        """Raise :class:`LookupNeeded` when ``address`` has no answer yet and lookups are on (``timeout_s`` > 0). The rule
        table calls it before the first rule that asks for names, for a request that claims a name such a rule verifies,
        and resumes there (``resume``) once the address is looked up: no rule runs twice."""
        if self.timeout_s > 0 and self.names(address) is None:
            raise LookupNeeded(self, address, resume)

    def unanswered(self, address: str) -> bool:
        """Nothing is known of the address's names: lookups are off, or its lookup failed, timed out or was refused for want
        of a thread (or was never made). Neither a crawler nor a spoofer: the rule condition ``reverse_dns_unanswered``."""
        if self.timeout_s <= 0:
            return self.timeout_s == 0  # lookups off: unanswered; offline (OFFLINE): answered with no name
        entry = self._known.get(address)
        return entry is None or entry[0] <= self.clock() or not entry[2]

    def confirmed(self, address: str, domains: tuple[str, ...]) -> bool:
        """A known name of ``address`` is one of ``domains`` or under one (the rule condition; an address without an answer
        is unconfirmed). Never looks anything up."""
        known = self.names(address)
        return known is not None and any(under(n, domains) for n in known)

    async def lookup(self, address: str) -> tuple[str, ...]:
        """Look ``address`` up (once, however many requests wait for it) and keep the answer; its confirmed names."""
        known = self.names(address)
        if known is not None:
            return known
        waiting = self._pending.get(address)
        if waiting is None:
            waiting = self._pending[address] = asyncio.ensure_future(self._resolve(address))
            waiting.add_done_callback(lambda _: self._pending.pop(address, None))
        return await asyncio.shield(waiting)

    async def _resolve(self, address: str) -> tuple[str, ...]:
        if self._closed:
            return ()  # a request still on a pipeline being replaced: unverified, nothing kept
        network = _network(address)
        if self._busy >= THREADS or self._busy_in.get(network, 0) >= NETWORK_THREADS:
            LOOKUPS.inc("busy")
            self._keep(address, (), BUSY_RETRY_S, answered=False)
            return ()
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(THREADS, thread_name_prefix="clefgate-rdns")
        self._busy += 1
        self._busy_in[network] = self._busy_in.get(network, 0) + 1
        job = asyncio.get_running_loop().run_in_executor(self._pool, confirmed_names, address, self.resolver)
        # the thread is taken until the resolver returns, even past our timeout
        job.add_done_callback(lambda done: self._freed(done, network))
        try:
            names = await asyncio.wait_for(asyncio.shield(job), self.timeout_s)
        except (TimeoutError, OSError, UnicodeError):
            LOOKUPS.inc("failed")
            self._keep(address, (), RETRY_S, answered=False)
            return ()
        LOOKUPS.inc("confirmed" if names else "unconfirmed")
        self._keep(address, names, self.ttl_s if names else self.negative_ttl_s)
        return names

    def _freed(self, job: asyncio.Future[tuple[str, ...]], network: str) -> None:
        self._busy -= 1
        left = self._busy_in.pop(network) - 1
        if left:
            self._busy_in[network] = left
        if not job.cancelled():
            job.exception()  # a failure past the timeout was counted then; retrieved so asyncio does not log it

    def _keep(self, address: str, names: tuple[str, ...], ttl_s: float, *, answered: bool = True) -> None:
        self._known[address] = (self.clock() + ttl_s, names, answered)
        self._known.move_to_end(address)
        while len(self._known) > self.max_entries:
            self._known.popitem(last=False)

    def close(self) -> None:
        """Let the lookup threads go (lookups in progress finish on their own); later lookups confirm nothing."""
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
