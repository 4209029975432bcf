"""What the gateway knows about one request: ``Features``, ``ClientStats`` and records.

``Features`` is built once per request by the proxy (or by ``from_record`` for
training, evaluation and replay) and read by rules, the model and the logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class ClientStats:
    """Per-client sliding-window statistics (from ``gateway.clients``), before this request."""

    requests: int = 0
    rate_per_min: float = 0.0
    error_ratio: float = 0.0
    path_diversity: float = 0.0
    mean_gap_s: float = 0.0
    challenges_passed: int = 0


@dataclass(frozen=True, slots=True)
class Features:
    """Everything the gateway knows about one request when it decides.

    Strings are decoded from the wire as latin-1 (byte-preserving). ``path`` and
    ``query`` are raw (percent-encoding kept); decoding is the reader's choice.
    ``headers`` keeps wire order and the client's spelling of names;
    ``header_map`` maps lower-case names to values (repeats joined with ", ").
    """

    method: str
    path: str
    query: str = ""
    http_version: str = "1.1"
    headers: tuple[tuple[str, str], ...] = ()
    header_map: Mapping[str, str] = field(default_factory=dict)
    client_ip: str = ""
    peer_ip: str = ""
    host: str = ""
    user_agent: str = ""
    content_length: int | None = None
    chunked: bool = False
    body_prefix: bytes = b""
    scheme: str = "http"
    request_id: str = ""
    received_at: float = 0.0
    client: ClientStats | None = None

    @property
    def target(self) -> str:
        """The request-target as sent: path plus ``?query`` when there is one."""
        return f"{self.path}?{self.query}" if self.query else self.path

    def header(self, name: str, default: str = "") -> str:
        """Value of a header by lower-case name ("" when absent)."""
        return self.header_map.get(name, default)


def make_header_map(headers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Lower-case name -> value, repeated headers joined with ", " (cookie with "; ")."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in out:
            out[key] = out[key] + ("; " if key == "cookie" else ", ") + value
        else:
            out[key] = value
    return out


def _wire(text: Any) -> str:
    """A JSON string as the server would have decoded its bytes (UTF-8 bytes read as latin-1)."""
    s = str(text)
    return s if s.isascii() else s.encode("utf-8", "surrogateescape").decode("latin-1")


def _client_stats(raw: Any) -> ClientStats | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return ClientStats(
            requests=int(raw.get("requests", 0)),
            rate_per_min=float(raw.get("rate_per_min", 0.0)),
            error_ratio=float(raw.get("error_ratio", 0.0)),
            path_diversity=float(raw.get("path_diversity", 0.0)),
            mean_gap_s=float(raw.get("mean_gap_s", 0.0)),
            challenges_passed=int(raw.get("challenges_passed", 0)),
        )
    except (TypeError, ValueError):
        return None


def from_record(record: Mapping[str, Any]) -> Features:
    """Build Features from a logged or generated request record.

    The record shape is the one ``clefgate eval`` reads: ``method``, ``path``
    (with query), ``http_version``, ``headers`` as ``[[name, value], ...]`` in
    wire order, ``body`` (str or null), ``client_ip``; optionally ``client``, the
    per-client window statistics (``ClientStats`` field names); other keys are
    ignored. Non-ASCII text is turned into what the server sees on the wire
    (UTF-8 bytes decoded as latin-1), so records and live requests serialize alike.
    """
    target = _wire(record.get("path") or "/")
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        path, query = parts.path or "/", parts.query
    else:
        path, _, query = target.partition("?")
    headers = tuple((_wire(n), _wire(v)) for n, v in (record.get("headers") or ()))
    header_map = make_header_map(headers)
    body = record.get("body")
    if body is None:
        body_bytes = b""
    elif isinstance(body, bytes):
        body_bytes = body
    else:
        body_bytes = str(body).encode("utf-8", "surrogateescape")
    cl = header_map.get("content-length")
    content_length = int(cl) if cl and cl.strip().isdigit() else (len(body_bytes) if body_bytes else None)
    version = str(record.get("http_version") or "1.1")
    if version.upper().startswith("HTTP/"):
        version = version[5:]
    return Features(
        method=str(record.get("method") or "GET").upper(),
        path=path,
        query=query,
        http_version=version,
        headers=headers,
        header_map=header_map,
        client_ip=str(record.get("client_ip") or ""),
        peer_ip=str(record.get("client_ip") or ""),
        host=header_map.get("host", ""),
        user_agent=header_map.get("user-agent", ""),
        content_length=content_length,
        chunked="chunked" in header_map.get("transfer-encoding", "").lower(),
        body_prefix=body_bytes[:4096],
        request_id=str(record.get("request_id") or ""),
        client=_client_stats(record.get("client")),
    )
