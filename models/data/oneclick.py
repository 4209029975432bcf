"""People's one-click actions: short form posts to paths no template of the generator has.

    python -m models.data.oneclick --rows 4000 --out oneclick.jsonl
    clefgate eval --data oneclick.jsonl

A like, a vote, "add to cart", "add to wishlist", a newsletter sign-up: a person clicks a
button and the browser posts a form whose only field is an id, a token or a word. These
are among the commonest requests a site receives from people, and a model that has seen
few of them can take ``id=98765`` posted to an unfamiliar path for a probe. Every row is
a person (label ``human``): a held-out browser (the eval side's user agents) with the
generator's own form head for that engine, to one of the paths below, on a first request
or with a browsing history, as the generator's people have.

The paths share no word with the training side's one-click actions (``site.ACTIONS``)
but the verb "add" (``/basket/add`` there, ``/cart/add`` here), so this measures whether the
model generalises from those, not what it memorised. It
is a measurement of false positives, never training data; rows depend only on the seed
(and the installed ``fake-useragent``, as the generator's do).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from models.data import site
from models.data.generate import _weighted, measurement_main, person
from models.data.site import Draw, _form, _hex
from models.data.sources import browsers_for

# (name, site, path, fields): what the button posts.
FORMS: tuple[tuple[str, str, Callable[[Draw], str], Callable[[Draw], dict[str, str]]], ...] = (
    ("cart", "shop", lambda r: "/cart", lambda r: {"id": str(r.randint(1, 99))}),
    ("cart_add", "shop", lambda r: "/cart/add", lambda r: {"product_id": str(r.randint(100, 99999)), "quantity": str(r.randint(1, 3))}),
    ("wishlist_add", "shop", lambda r: "/wishlist/add", lambda r: {"sku": f"{r.choice('ABCDEFGH')}{r.choice('ABCDEFGH')}-{r.randint(1000, 9999)}"}),
    ("checkout", "shop", lambda r: "/checkout", lambda r: {"shipping": r.choice(("standard", "express")), "country": r.choice(("DE", "FR", "US", "GB"))}),
    ("newsletter", "blog", lambda r: "/newsletter", lambda r: {"email": f"{r.choice(site.USERS)}@example.org"}),
    ("vote", "forum", lambda r: "/vote", lambda r: {"post": str(r.randint(1, 9999)), "dir": r.choice(("up", "down"))}),
    ("like", "blog", lambda r: "/like", lambda r: {"id": str(r.randint(1, 999999))}),
    ("comment_delete", "forum", lambda r: f"/comments/{r.randint(1, 99999)}/delete", lambda r: {"confirm": "1"}),
    ("settings", "forge", lambda r: "/settings", lambda r: {"theme": r.choice(("dark", "light")), "lang": r.choice(("en", "de"))}),
    ("dismiss", "docs", lambda r: "/banner/dismiss", lambda r: {"csrf": _hex(r, 32)}),
)


def rows(n: int, seed: int) -> Iterator[dict[str, Any]]:
    """``n`` people's one-click posts; row ``i`` depends only on (seed, i)."""
    agents = browsers_for("eval")
    base = int.from_bytes(hashlib.sha256(f"oneclick/{seed}".encode()).digest()[:6], "big")
    for i in range(n):
        rng = Draw(base + i, "eval")
        name, site_name, target, fields = FORMS[i % len(FORMS)]
        ep = _form(target, fields)(rng)
        yield person(rng, _weighted(rng, agents), ep, site.HOSTS[site_name], f"human/oneclick/{name}")


def main(argv: Sequence[str] | None = None) -> int:
    return measurement_main(argv, "python -m models.data.oneclick", __doc__, rows, 4000, "number of requests (the forms in turn)", f"{len(FORMS)} one-click forms")


if __name__ == "__main__":
    raise SystemExit(main())
