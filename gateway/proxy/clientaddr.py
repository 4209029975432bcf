"""The client's address: the TCP peer, or what trusted proxies in front say it is.

``X-Forwarded-For`` and ``Forwarded`` are believed only when the TCP peer is in
``trusted_proxies``; then the list is walked from the right (the hop nearest to
us), skipping every trusted address, and the first untrusted one is the client.
Anything a client writes on the left of the list is therefore never believed.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_inet_pton = socket.inet_pton
_AF_INET = socket.AF_INET


def _ipv4_value(text: str) -> int | None:
    """A dotted-quad IPv4 address as an integer, else None.

    ``inet_pton`` accepts exactly the text ``ipaddress`` writes for an IPv4 address (four
    decimal octets, no leading zeros, nothing around them) at a fraction of the cost of
    ``ipaddress.ip_address``; a flood from many addresses parses a new one per request.
    Anything else (IPv6, garbage) is left to ``ipaddress``.
    """
    try:
        return int.from_bytes(_inet_pton(_AF_INET, text), "big")
    except (OSError, ValueError):
        return None


class TrustedProxies:
    """A compiled set of trusted CIDRs with a bounded per-address verdict cache."""

    __slots__ = ("_cache", "_networks", "_v4")

    _CACHE_MAX = 4096

    def __init__(self, cidrs: Iterable[str]) -> None:
        self._networks: tuple[_Network, ...] = tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)
        # the IPv4 networks as (first address, netmask) integers: an IPv4 address is in one when value & mask == first
        self._v4 = tuple((int(n.network_address), int(n.netmask)) for n in self._networks if n.version == 4)
        self._cache: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return bool(self._networks)

    def __contains__(self, ip: str) -> bool:
        hit = self._cache.get(ip)
        if hit is not None:
            return hit
        value = _ipv4_value(ip)
        if value is not None:
            trusted = any(value & mask == first for first, mask in self._v4)
        else:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                trusted = False
            else:
                if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
                    addr = addr.ipv4_mapped
                trusted = any(addr in net for net in self._networks)
        if len(self._cache) >= self._CACHE_MAX:
            self._cache.clear()
        self._cache[ip] = trusted
        return trusted

    def client_ip(self, peer: str, xff: str | None, forwarded: str | None) -> str:
        """The client address for a request from ``peer`` with these headers."""
        if not self._networks or peer not in self:
            return peer
        hops = parse_xff(xff) if xff else parse_forwarded_for(forwarded) if forwarded else []
        client = peer
        for hop in reversed(hops):
            client = hop
            if hop not in self:
                return hop
        return client


@functools.lru_cache(maxsize=65536)
def _clean(addr: str) -> str:
    """An address from a header without brackets, quotes or a port ('' if unusable).

    Cached: the same few thousand addresses repeat, and ``ipaddress`` parsing costs
    microseconds per call on every proxied request.
    """
    addr = addr.strip().strip('"')
    if addr.startswith("["):
        addr = addr[1 : addr.find("]")] if "]" in addr else ""
    elif addr.count(":") == 1:
        addr = addr.partition(":")[0]
    if _ipv4_value(addr) is not None:
        return addr  # a dotted quad is already written the way ipaddress writes it
    try:
        return str(ipaddress.ip_address(addr))
    except ValueError:
        return ""


def parse_xff(value: str) -> list[str]:
    """Addresses of an X-Forwarded-For value, left to right; garbage entries are dropped."""
    return [a for a in (_clean(p) for p in value.split(",")) if a]


def parse_forwarded_for(value: str) -> list[str]:
    """The ``for=`` addresses of a Forwarded value (RFC 7239), left to right."""
    out = []
    for element in value.split(","):
        for pair in element.split(";"):
            key, _, val = pair.strip().partition("=")
            if key.lower() == "for":
                addr = _clean(val)
                if addr:
                    out.append(addr)
    return out
