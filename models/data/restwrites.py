"""People's REST writes: JSON PUT, PATCH and DELETE XHR from single-page apps, in shapes no template has.

    python -m models.data.restwrites --rows 3000 --out restwrites.jsonl
    clefgate eval --data restwrites.jsonl

A person edits a review, marks a notification read, merges a pull request or deletes a saved
search, and the page's script sends a same-origin ``fetch`` with a JSON body (or none, for
DELETE) and the browser's fetch metadata (``Sec-Fetch-Mode: cors``, ``Origin``). No side of
the generator draws such requests by default; ``site.REST_WRITES`` adds eleven shapes to
the training side when ``data.rest_writes`` is on. The nine shapes here share no path with
those or with the unseen-releases split's, so this measures whether a model generalises to REST writes
it has not seen, not what it memorised. Every row is a person (label ``human``) in a held-out
browser (the eval side's user agents). It is a measurement of false positives, never training
data; rows depend only on the seed (and the installed ``fake-useragent``, as the generator's do).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from models.data import site
from models.data.generate import _weighted, measurement_main, person
from models.data.site import Draw, Endpoint, _hex, _text, rest_write
from models.data.sources import browsers_for

# (name, site, request): what the page's script sends.
WRITES: tuple[tuple[str, str, Callable[[Draw], Endpoint]], ...] = (
    ("preferences", "shop", lambda r: rest_write("PATCH", "/api/me/preferences", {"newsletter": r.random() < 0.5, "currency": r.choice(("EUR", "USD"))})),
    ("saved_search", "shop", lambda r: rest_write("DELETE", f"/api/saved-searches/{r.randint(1, 9999)}")),
    ("review_edit", "shop", lambda r: rest_write("PUT", f"/api/reviews/{r.randint(1, 99999)}", {"rating": r.randint(1, 5), "text": _text(r, site.REVIEW_TEXT)})),
    ("notification_read", "forum", lambda r: rest_write("PUT", f"/notifications/{r.randint(1, 10**6)}/read", {"read": True})),
    ("profile_bio", "forum", lambda r: rest_write("PATCH", f"/u/{r.choice(site.USERS)}/preferences/profile", {"bio_raw": _text(r, site.FORUM_TEXT)})),
    ("branch_delete", "forge", lambda r: rest_write("DELETE", f"/{r.choice(site.USERS)}/{r.choice(site.REPOS)}/branches/{r.choice(('fix-typo', 'old-ui', 'wip'))}")),
    ("merge", "forge", lambda r: rest_write("PUT", f"/{r.choice(site.USERS)}/{r.choice(site.REPOS)}/pulls/{r.randint(1, 900)}/merge",
                                        {"merge_method": r.choice(("squash", "rebase")), "commit_title": r.choice(site.TOPICS).replace("-", " ")})),
    ("comment_delete", "blog", lambda r: rest_write("DELETE", f"/api/comments/{r.randint(1, 99999)}")),
    ("bookmark_note", "docs", lambda r: rest_write("PATCH", f"/api/bookmarks/{_hex(r, 10)}", {"note": f"{r.choice(site.WORDS)} {r.choice(site.WORDS)}"})),
)


def rows(n: int, seed: int) -> Iterator[dict[str, Any]]:
    """``n`` people's REST writes; row ``i`` depends only on (seed, i)."""
    agents = browsers_for("eval")
    base = int.from_bytes(hashlib.sha256(f"restwrites/{seed}".encode()).digest()[:6], "big")
    for i in range(n):
        rng = Draw(base + i, "eval")
        name, site_name, make = WRITES[i % len(WRITES)]
        yield person(rng, _weighted(rng, agents), make(rng), site.HOSTS[site_name], f"human/restwrite/{name}")


def main(argv: Sequence[str] | None = None) -> int:
    return measurement_main(argv, "python -m models.data.restwrites", __doc__, rows, 3000, "number of requests (the writes in turn)", f"{len(WRITES)} REST writes")


if __name__ == "__main__":
    raise SystemExit(main())
