"""Request ids: propagated when a client or proxy in front sent one, created otherwise.

A created id is a per-process random prefix plus a counter: unique across
workers and restarts without a random draw per request (a counter increment and
one small format per request).
"""

from __future__ import annotations

import base64
import os
import re

# ids we accept from the outside: visible ASCII, bounded, so they are safe in
# headers and log lines (llhttp already refused CR/LF/NUL)
_VALID = re.compile(r"[!-~]{1,128}")


class RequestIds:
    """Creates request ids for one process; re-seeds itself in forked children."""

    def __init__(self) -> None:
        self._prefix = ""
        self._counter = 0
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        """A fresh random prefix (after fork, so workers never share ids)."""
        self._prefix = base64.b32encode(os.urandom(5)).decode("ascii").lower() + "-"
        self._counter = 0

    def new(self) -> str:
        """A new id, e.g. ``k3v7q2mz-1f``."""
        self._counter += 1
        return f"{self._prefix}{self._counter:x}"

    def accept(self, value: str) -> str:
        """``value`` when it is a usable id, else a new one."""
        return value if _VALID.fullmatch(value) is not None else self.new()


REQUEST_IDS = RequestIds()
