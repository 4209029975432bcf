#!/usr/bin/env python3
"""Container health check: exit 0 when the gateway's admin listener answers 200, else 1.

Used by the image's ``HEALTHCHECK`` (the slim image has no curl). It asks ``/readyz``
by default, which is 503 while the gateway starts, warms the model, or drains after
SIGTERM. The admin URL comes from ``CLEFGATE_ADMIN_URL`` (default
``http://127.0.0.1:9090``); set it when ``admin.listen`` uses another port.

Usage: healthcheck.py [PATH] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request

DEFAULT_ADMIN_URL = "http://127.0.0.1:9090"


def probe(url: str, timeout: float) -> tuple[bool, str]:
    """(healthy, what happened) for one GET of ``url``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200, f"{url}: {response.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{url}: {reason}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="exit 0 when the clefgate admin endpoint answers 200")
    parser.add_argument("path", nargs="?", default="/readyz", help="/readyz (default) or /healthz")
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args(argv)
    base = os.environ.get("CLEFGATE_ADMIN_URL", DEFAULT_ADMIN_URL).rstrip("/")
    healthy, detail = probe(base + args.path, args.timeout)
    print(detail, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
