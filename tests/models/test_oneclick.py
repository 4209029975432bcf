"""People's one-click form posts: the training side's actions, and the measurement set with other paths."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

from gateway.tools.evaluate import Skipped, read_rows
from models.data import oneclick, site
from models.data.generate import generate
from models.data.sources import browsers_for


def _words(path: str) -> set[str]:
    return {w for w in re.split(r"[^a-z]+", path.lower()) if len(w) > 2}


def test_actions_are_on_the_training_side_only() -> None:
    ids = {t.id for t in site.ACTIONS}
    assert ids <= {t.id for t in site.templates("train")}
    for split in ("calib", "eval"):
        assert not ids & {t.id for t in site.templates(split)}, split
    assert len(ids) == len(site.ACTIONS) and all(t.group == "form" for t in site.ACTIONS)
    assert not ids & {t.id for t in site.TEMPLATES}  # an id names one template
    rows = list(generate("train", 6000, seed=5))
    used = Counter(r["source"].split("/", 2)[2] for r in rows if r["label"] == "human" and r["source"].split("/", 2)[2] in ids)
    assert sum(used.values()) >= 20, used
    rng = random.Random(1)
    for t in site.ACTIONS:  # short posts: an id, a token or a word per field
        ep = t.make(rng)
        assert ep.method == "POST" and ep.body and len(ep.body) < 120 and " " not in ep.body


def test_the_measurement_shares_no_path_word_with_the_actions() -> None:
    rng = random.Random(2)
    trained = set().union(*(_words(t.make(rng).target) for t in site.ACTIONS for _ in range(5)))
    measured = set().union(*(_words(target(site.Draw(i, "eval"))) for i, (_, _, target, _) in enumerate(oneclick.FORMS)))
    # "add" is the one word in common (/basket/add and /compare/add, /cart/add and /wishlist/add): a verb, not a product
    assert measured and trained & measured == {"add"}, trained & measured


def test_oneclick_rows_are_people_posting_forms_from_held_out_browsers(tmp_path: Path) -> None:
    out = tmp_path / "oneclick.jsonl"
    assert oneclick.main(["--rows", "60", "--seed", "3", "--out", str(out)]) == 0
    again = tmp_path / "again.jsonl"
    oneclick.main(["--rows", "60", "--seed", "3", "--out", str(again)])
    assert out.read_bytes() == again.read_bytes()
    parsed = read_rows(out, skipped := Skipped())
    assert len(parsed) == 60 and not skipped.counts and {r.label for r in parsed} == {0}
    assert all(r.features.method == "POST" and r.features.body_prefix for r in parsed)
    assert all(r.features.content_length == len(r.features.body_prefix) for r in parsed)
    held_out = {a.ua for a in browsers_for("eval")}
    assert all(r.features.user_agent in held_out for r in parsed)
    assert Counter(r.features.path.split("/")[1] for r in parsed)["cart"] == 12  # the forms in turn (cart, cart/add)
