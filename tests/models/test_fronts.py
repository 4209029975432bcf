"""A person's request behind any front proxy carries no payload and no injection syntax (gateway.carriers, gateway.witness)."""

from __future__ import annotations

import random

import pytest

from gateway.carriers import payload_carriers
from gateway.witness import SYNTAX, syntax_witness
from models.corpus import fronts
from tests.conftest import make_features

BROWSER = [["Host", "shop.example"],
           ["User-Agent", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15"],
           ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"], ["Sec-Fetch-Site", "same-origin"],
           ["Sec-Fetch-Mode", "navigate"], ["Sec-Fetch-Dest", "document"], ["Accept-Language", "en-GB,en;q=0.9"],
           ["Referer", "https://shop.example/category/desks?page=2"], ["Accept-Encoding", "gzip, deflate, br"],
           ["Cookie", "sid=AbC123.sig; _ga=GA1.2.3.4"], ["Connection", "keep-alive"]]


@pytest.mark.parametrize("front", [f for f in fronts.FRONTS if f != "none"])
def test_what_a_front_writes_is_neither_a_payload_nor_a_witness(front: str) -> None:
    for seed in range(25):
        headers, version = fronts.apply(front, random.Random(seed), [list(h) for h in BROWSER], "198.51.100.23", "shop.example", "1.1")
        f = make_features(target="/products/12", headers=[(n, v) for n, v in headers], http_version=version)
        assert payload_carriers(f) == (), (front, headers)
        assert syntax_witness(f, tuple(SYNTAX)) is None, (front, headers)
