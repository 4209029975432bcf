"""The pages the site serves: what its own answers say about a path the model suspects of being a probe.

A request with no query, body, cookie or header value that can hold a payload carries nothing but its path, and the
model's P(attack) on such a request says "this path looks like a probe": a scanner asking for software or files the
site may not have. The site knows better. :class:`ServedPages` remembers the pages it served: every GET or HEAD the
gateway forwarded that the site answered with a 2xx or a 304, by host (lower case, no port, no trailing dot) and path
exactly as sent (no case folding nor decoding: ``/Admin`` is not ``/admin``, a site may route them apart). For a bare
request to such a page the policy does not count P(attack) short of a block (``gateway.policy``; the client's look
still counts, and so does a P(attack) that would block): a path the site serves to anyone who asks is a page, and a
request that carries nothing else cannot do more than read it. The first visitor of a page nobody asked for before is
judged as before; a page the site stopped serving is forgotten after ``ttl_s``.

Only a forwarded request teaches: a probe the gateway challenged or blocked never reached the site, so it teaches
nothing, whatever the site would have answered; nor does a request forwarded because its page was known (a scanner
asking again keeps no page alive), one with credentials (``Authorization``: what the site serves to its holder, not
to anyone), or one naming a host longer than DNS allows. A path that holds attack syntax (``/.env``,
``/.git/config``, a backup's name: ``gateway.witness.syntax_free``) is judged as before whoever was served it. A site
that answers every path with a 200 (a single-page app's catch-all, a soft 404) teaches every path forwarded to it;
the page such a site serves is the same whatever the path, so a bare request to it reads nothing a person would not.
Each worker keeps its own pages (not shared through Redis), at most ``max_pages`` of them: the least recently served
goes first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from gateway import metrics
from gateway.config import ServedPagesConfig
from gateway.features import Features

PAGES = metrics.gauge("clefgate_served_pages", "Pages (host and path) the site answered a forwarded GET or HEAD with a 2xx or 304, "
                      "remembered in this worker.")

_METHODS = frozenset({"GET", "HEAD"})
# the words of a verdict's reason when a request's P(attack) was not counted since the site serves its page (gateway.policy)
SERVED_PAGE = "a page the site serves"
# ... and when a request's P(attack) was not counted since it asks for a file of the kind pages load
STATIC_FILE = "a file of the kind pages load"
# what pages load, by the extension of the path's last segment: images, fonts, styles, scripts and pages themselves
STATIC_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp", "woff", "woff2", "ttf", "otf", "eot",
                               "css", "js", "mjs", "html", "htm"})
# the longest path remembered: a longer one is no page a person types or a site links to often enough to matter
MAX_PATH = 512
# the longest host name DNS allows: a longer Host names no site
MAX_HOST = 253


def site_host(features: Features) -> str:
    """The host a request names, as the site routes it: lower case, without a port or a trailing dot."""
    host = features.header_map.get("host", "").lower()
    end = host.rfind(":")
    if end > host.rfind("]"):  # a port (an IPv6 literal's colons are inside its brackets)
        host = host[:end]
    return host.rstrip(".")


# extensions a server runs rather than serves: a folder or an inner extension named so makes the path a script's
# (``/index.php/x.png`` is PATH_INFO to index.php, Apache runs ``shell.php.png``)
_RUN = frozenset({"php", "php3", "php4", "php5", "php7", "phtml", "phar", "pht", "jsp", "jspx", "jsf", "asp", "aspx", "ashx", "asmx",
                  "axd", "cfm", "cgi", "pl", "py", "rb", "do", "action", "shtml", "dll", "exe"})


def static_file(features: Features) -> bool:
    """True for a GET or HEAD whose path names a file of the kind pages load (:data:`STATIC_EXTENSIONS`): an image, a
    font, a style sheet, a script or a page. A bare request for one reads what any page's visitor reads, so a probe for
    one learns at most that the file exists. A path with a parameter or an escape anywhere (``x.jsp;.png``,
    ``/admin;x=1/a.js``, ``x.jsp%3B.png``), or with a segment or an inner extension a server runs (``/index.php/x.png``,
    ``shell.php.png``), names whatever the server makes of it, not a file of that kind."""
    path = features.path
    if features.method not in _METHODS or ";" in path or "%" in path:
        return False
    *folders, name = path.split("/")
    parts = name.split(".")
    if len(parts) < 2 or not parts[0] or parts[-1].lower() not in STATIC_EXTENSIONS:
        return False
    return not any(part.lower() in _RUN for part in parts[1:-1]) and \
        not any(folder.rpartition(".")[2].lower() in _RUN for folder in folders if "." in folder)


class ServedPages:
    """Pages the site served (module docstring): ``observe`` each forwarded answer, ``serves`` to ask about a request."""

    def __init__(self, cfg: ServedPagesConfig | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg or ServedPagesConfig()
        self.clock = clock
        self._pages: OrderedDict[tuple[str, str], float] = OrderedDict()  # (host, path) -> when last served

    def __len__(self) -> int:
        return len(self._pages)

    def observe(self, features: Features, status: int, reason: str = "") -> None:
        """A forwarded request the site answered with ``status``, under a verdict with this ``reason``: one forwarded
        because its page was known (:data:`SERVED_PAGE`) neither teaches the page again nor keeps it from being
        forgotten, or a scanner asking again would keep a page alive."""
        if not (200 <= status < 300 or status == 304) or features.method not in _METHODS or not self.cfg.enabled \
                or len(features.path) > MAX_PATH or "authorization" in features.header_map or SERVED_PAGE in reason:
            return
        host = site_host(features)
        if len(host) > MAX_HOST:
            return
        pages = self._pages
        key = (host, features.path)
        if key in pages:
            pages.move_to_end(key)
            pages[key] = self.clock()
            return
        if len(pages) >= self.cfg.max_pages:
            pages.popitem(last=False)
        pages[key] = self.clock()
        PAGES.set(len(pages))

    def serves(self, features: Features) -> bool:
        """True when the site served the request's page (host and path) to a GET or HEAD within ``ttl_s``."""
        pages = self._pages
        if not pages or features.method not in _METHODS or not self.cfg.enabled:
            return False
        key = (site_host(features), features.path)
        at = pages.get(key)
        if at is None:
            return False
        if self.clock() - at > self.cfg.ttl_s:
            del pages[key]
            PAGES.set(len(pages))
            return False
        return True

    def retune(self, cfg: ServedPagesConfig) -> None:
        """A reload's settings, keeping what was learnt (the oldest pages beyond a lowered ``max_pages`` go)."""
        self.cfg = cfg
        while len(self._pages) > cfg.max_pages:
            self._pages.popitem(last=False)
        if not cfg.enabled:
            self._pages.clear()
        PAGES.set(len(self._pages))
