"""Gateway-made error responses, in one place.

Every failure the data path can meet is mapped where it happens to a
:class:`GatewayError` (status + a short machine reason for metrics + a sentence
for people), and turned into bytes here. Each error response names the request
id in a header and in its body, and the same id is in the access log line, so an
operator can go from a user's screenshot to the log entry.
"""

from __future__ import annotations

from gateway.proxy.http1 import status_line

# status -> what the client is told (the reason is added per error)
_EXPLANATION = {
    400: "The request is malformed or its framing is ambiguous.",
    403: "The request was refused.",
    408: "The request head was not received in time.",
    413: "The request body is larger than this gateway accepts.",
    417: "The request's Expect header cannot be met.",
    431: "The request line or header fields are too large.",
    499: "The client closed the connection.",
    500: "The gateway failed while handling the request.",
    501: "The request uses a method or transfer coding this gateway does not implement.",
    502: "The upstream server could not be reached or sent an invalid response.",
    503: "No healthy upstream server is available right now.",
    504: "The upstream server did not answer in time.",
}


class GatewayError(Exception):
    """A request that ends in a gateway-made error response.

    ``reason`` is a short snake_case cause used as a metric label and in the
    access log (``header_too_large``, ``upstream_connect``...); ``detail`` is a
    sentence for the client and the process log.
    """

    def __init__(self, status: int, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.status = status
        self.reason = reason
        self.detail = detail


def error_body(status: int, request_id: str, detail: str) -> bytes:
    """The plain-text body of an error response."""
    text = _EXPLANATION.get(status, "The gateway could not complete the request.")
    lines = [f"{status} {status_line(status)[13:].decode()}", text]
    if detail:
        lines.append(detail)
    lines.append(f"request id: {request_id}")
    return ("\n".join(lines) + "\n").encode("utf-8", "replace")


def render_error(status: int, request_id: str, detail: str, *, id_header: bytes, close: bool,
                 head_only: bool = False) -> bytes:
    """A complete error response (head and body) ready for ``transport.write``."""
    body = error_body(status, request_id, detail)
    head = [
        status_line(status), b"\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ",
        str(len(body)).encode(), b"\r\ncache-control: no-store\r\n", id_header, b": ", request_id.encode("latin-1", "replace"), b"\r\n",
    ]
    if close:
        head.append(b"connection: close\r\n")
    head.append(b"\r\n")
    if not head_only:
        head.append(body)
    return b"".join(head)
