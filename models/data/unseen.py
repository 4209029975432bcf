"""Pieces shared by the splits whose sources are a module of their own (``unseen_injections``, ``unseen_protocols``).

Each such module draws people's text straight from its own pools (``pick``), not through ``site._text``: the pools
belong to that split alone, so there is nothing to hold out inside them and the same items come out whatever side a
``site.Draw`` says it is on.
"""

from __future__ import annotations

import html
import random


def pick(rng: random.Random, pool: tuple[str, ...]) -> str:
    """One item of one of a split's own pools."""
    return rng.choice(pool)


def people_query(rng: random.Random, queries: tuple[str, ...], hard_queries: tuple[str, ...], hard_share: float) -> str:
    """A person's search: a hard one (words that look like a payload) with probability ``hard_share``."""
    return pick(rng, hard_queries) if rng.random() < hard_share else pick(rng, queries)


def paragraph(rng: random.Random, pool: tuple[str, ...]) -> str:
    """One item of ``pool`` as an HTML paragraph, escaped the way a rich-text editor sends it."""
    return f"<p>{html.escape(pick(rng, pool), quote=False)}</p>"


def number(rng: random.Random) -> str:
    """A small id, as payloads put beside their trick."""
    return str(rng.randint(1, 9999))


def invented(operators: tuple[tuple[str, tuple[str, ...], str], ...], versions: tuple[int, ...]) -> list[tuple[str, tuple[str, ...], str]]:
    """(user agent, tags, role) of invented crawler operators, each format filled in with every one of ``versions``."""
    return [(fmt.format(n=n), tags, role) for fmt, tags, role in operators for n in versions]
