"""The featurizer's and the runtime's fast paths compute exactly what their plain forms do.

The model was trained on the features' values and its answers are measured: a shortcut taken for speed (a
regex split in pieces, facts kept per header-name sequence, both halves of a two-input model in one run, a single
length group's logits passed on as they are) must not move a single bit.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from gateway import features as feat
from gateway.decider.onnx import OnnxOptions, OnnxScorer, _softmax
from gateway.features import numeric, split
from tests.conftest import make_features
from tests.gateway.test_features import CHROME_HEAD

# every character the payload pattern and the suspicious set treat specially, their neighbours, and some that
# are neither (non-ASCII, a newline, which the pattern's ``$``-free pieces never span)
_ALPHABET = list("{}<>`$\\|'\"();*%../aZ09fFgG \n\x00\xe9\u20ac")


def _strings(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = ["", "%", "%2", "%2g", "%2F", "%%41", "(", ")", "()", ")(", "..", "../", "..\\", ". ./", "a" * 300 + "%7e"]
    out += ["".join(rnd.choice(_ALPHABET) for _ in range(rnd.randint(1, 12))) for _ in range(count)]
    return out


def test_the_payload_character_check_is_the_pattern() -> None:
    for value in _strings(60_000, seed=3):
        assert split._carries_payload(value) is (split._PAYLOAD_CHARS.search(value) is not None), repr(value)


def test_suspicious_characters_are_counted_as_before() -> None:
    for text in _strings(20_000, seed=4):
        expected = sum(map(text.count, numeric._SUSPICIOUS)) / len(text) if text else 0.0
        assert numeric._suspicious(text) == expected, repr(text)


def _reference_facts(headers: tuple[tuple[str, str], ...]) -> tuple[bool, list[str], str]:
    """Front flag, client names and payload-carrying values, as written before the facts were kept."""
    lowered = [(n.lower(), v) for n, v in headers]
    front = any(split.is_front(k) for k, _ in lowered)
    names = [k for k, _ in lowered if k not in split.HOP_HEADERS and not split.is_front(k)]
    parts: list[str] = []
    total = 0
    for key, value in lowered:
        if key in split.PAYLOAD_OWN or key in split.HOP_HEADERS:
            continue
        if key in split.HOST_HEADERS:
            if split._HOSTNAME_RE.fullmatch(value):
                continue
        elif split.is_front(key):
            continue
        elif key in split.CLIENT_HEADERS and split._PAYLOAD_CHARS.search(value) is None:
            continue
        part = f"{key[:split._MAX_NAME]}={value[:split._MAX_OTHER_VALUE]}"
        parts.append(part)
        total += len(part) + 1
        if total >= split._MAX_OTHER_TOTAL:
            break
    return front, names, " ".join(parts)[:split._MAX_OTHER_TOTAL]


def test_header_facts_match_the_header_by_header_reading() -> None:
    rnd = random.Random(7)
    pool = [n for n, _ in CHROME_HEAD] + ["X-Forwarded-For", "X-Forwarded-Host", "Via", "CF-Ray", "X-Custom", "x-api-key",
                                          "Keep-Alive", "TE", "Origin", "Authorization", "Content-Type", "X-Amzn-Foo"]
    values = ["plain", "shop.example.com", "evil.example.com/<x>", "1' OR '1'='1", "../../etc/passwd", "%27", "a()", ""]
    sets = [tuple(CHROME_HEAD), (), (("X-" + "n" * 1100, "v"),)]  # the last is longer than the cache keeps
    sets += [tuple((rnd.choice(pool), rnd.choice(values)) for _ in range(rnd.randint(0, 14))) for _ in range(3000)]
    for headers in sets + sets[::-1]:  # asked again in another order: nothing of the previous request is reused
        f = make_features("GET", "/", headers=list(headers))
        front, names, values_line = _reference_facts(f.headers)
        assert split.forwarded_by_front(f) is front
        assert split.client_names(f) == names
        assert split._payload_values(f.headers) == values_line


@pytest.fixture(scope="module")
def fresh() -> OnnxScorer:
    return OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1, client_cache_ttl_s=0.0))


def _inputs(scorer: OnnxScorer, *, distinct_clients: bool = False) -> list[feat.ModelInput]:
    """Requests of three clients to four targets of two padded lengths (with ``distinct_clients``, each its own client)."""
    browser = [(n, v) for n, v in CHROME_HEAD if n != "Cookie"]
    bot = [("Host", "shop.example.com"), ("User-Agent", "python-requests/2.32"), ("Accept", "*/*")]
    long_target = "/search?q=" + "linen+shirt+" * 30
    targets = ("/", "/c/men?page=2", long_target, "/a.css")
    features = [make_features("GET", t, headers=[*h, ("DNT", str(k))] if distinct_clients else h)
                for k, (t, h) in enumerate((t, h) for t in targets for h in (browser, bot, CHROME_HEAD))]
    inputs = scorer.model_inputs(features)
    assert len({feat.bucket_length(len(i.ids)) for i in inputs}) > 1  # the payload half runs in several length groups
    assert len({i.client_key() for i in inputs}) == (len(inputs) if distinct_clients else 3)
    return inputs


def test_two_input_probabilities_are_the_softmax_of_the_logits(fresh: OnnxScorer) -> None:
    # each row its own client: the client half runs on the same rows in both (rows of one client run once)
    inputs = _inputs(fresh, distinct_clients=True)
    temperature = fresh.manifest.temperature
    for batch in (inputs, inputs[:1], inputs[2:3]):
        logits, probs = fresh.logits(batch), fresh.probabilities(batch)
        for question in fresh.questions:
            expected = _softmax(logits[question], temperature.get(question, 1.0))
            assert probs[question].dtype == np.float64
            assert np.array_equal(probs[question], expected), question


def test_kept_client_answers_are_the_ones_computed(fresh: OnnxScorer) -> None:
    inputs = _inputs(fresh)
    for batch in (inputs, inputs[:1]):  # rows sharing a client, and a request alone
        computed = fresh.probabilities(batch)["client"]  # the client half run for each distinct client, nothing kept
        scorer = OnnxScorer(OnnxOptions(providers=("cpu",), warmup_runs=1))
        first = scorer.probabilities(batch)
        assert len(scorer.client_answers) == len({i.client_key() for i in batch})
        assert np.array_equal(first["client"], computed)
        first["client"][:] = 0.0  # a caller's edit of what it was given does not reach the kept answers
        assert np.array_equal(scorer.probabilities(batch)["client"], computed)


def test_decision_keys_round_as_before() -> None:
    from gateway.decider.cache import _tenths, decision_key

    values = (0.0, -0.0, 0.05, 0.15, 0.25, 0.95, 1.0, 1e-12, 123456.789, float("inf"), float("nan"), 2.5e300, True, 3)
    assert _tenths(len(values)) % values == ",".join(f"{v:.1f}" for v in values)
    base = feat.split_input(make_features("GET", "/c/men", headers=CHROME_HEAD))
    same_tenth = dataclasses.replace(base, numeric=tuple(v + 0.01 if v in (0.0, 1.0) else v for v in base.numeric),
                                     client_numeric=tuple(v + 0.01 if v in (0.0, 1.0) else v for v in base.client_numeric))
    other_client = dataclasses.replace(base, client_text=base.client_text + "x")
    other_window = dataclasses.replace(base, client_numeric=(*base.client_numeric[:-1], base.client_numeric[-1] + 0.5))
    one_input = feat.model_input(make_features("GET", "/c/men", headers=CHROME_HEAD))
    assert decision_key(same_tenth) == decision_key(base)
    assert len({decision_key(i) for i in (base, other_client, other_window, one_input)}) == 4


# dotted quads on the edge of valid, what inet_aton would take and ipaddress refuses, non-ASCII digits, IPv6 with a scope
# id or an IPv4 tail, ports and brackets (the plain form strips those)
_ADDRESS_TRICKS = ["1.2.3.4", "0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.02.3.4", "1.2.3.04", "1.2.3.00", "00.0.0.0",
                   "1.2.3", "1.2.3.4.", ".1.2.3.4", "1..2.3", "1.2.3.4.5", "1.2.3.4:80", "1.2.3.4:", "[1.2.3.4]", " 1.2.3.4",
                   "1.2.3.4 ", "1.2.3.4\x00", "\x001.2.3.4", "0x1.2.3.4", "1e1.2.3.4", "+1.2.3.4", "-1.2.3.4", "1.2.3.4/32",
                   "1.2.3.0/24", "\u0661.\u0662.\u0663.\u0664", "1.2.3.\u0664", "\uff11.2.3.4", "1.2.3.4\udcff", "\udcff", "",
                   "unknown", "UNKNOWN", "Unknown ", "::1", "[::1]:80", "::ffff:1.2.3.4", "::ffff:1.2.3.04", "fe80::1%eth0",
                   "2001:db8::1", "2001:db8::1:80", "1.2.3.4%eth0", "999.999.999.999", "1.2.3.4444", "1234.1.1.1", "1:2:3:4:5:6:7::",
                   "1::2:3:4:5:6:7", "::1.2.3.4", "::1.2.3.04", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "00001::", "0001::", ":::",
                   "::", "1:", ":1", "[2001:db8::1]:443", "[2001:db8::1", "fe80::1%25eth0", "::FFFF:1.2.3.4", "1:2:3:4:5:6:7:8:9"]


def test_an_x_forwarded_for_entry_is_an_address_exactly_when_ipaddress_says_so() -> None:
    import ipaddress

    from gateway.payload.locations import is_address, read_address

    rnd = random.Random(11)
    entries = list(_ADDRESS_TRICKS)
    for _ in range(20_000):  # dotted quads near the valid ones: octets of 0-4 digits, 3-5 of them, now and then a stray character
        octets = [str(rnd.randint(0, 300)).zfill(rnd.choice((0, 0, 0, 2, 3))) for _ in range(rnd.choice((3, 4, 4, 4, 5)))]
        text = ".".join(octets)
        if rnd.random() < 0.2:
            at = rnd.randint(0, len(text))
            text = text[:at] + rnd.choice(" :[]./x%\x00\u0661a0") + text[at:]
        entries.append(text)
    for _ in range(20_000):  # IPv6 in its forms, mangled now and then, and runs of groups with or without "::" and an IPv4 tail
        address = ipaddress.IPv6Address(rnd.getrandbits(128) >> rnd.choice((0, 0, 64, 96, 120)))
        text = rnd.choice((address.compressed, address.exploded, str(address.ipv4_mapped or address)))
        if rnd.random() < 0.3:
            groups = [format(rnd.getrandbits(16), "x").zfill(rnd.choice((0, 0, 4, 5))) for _ in range(rnd.randint(1, 9))]
            text = ":".join(groups)
            if rnd.random() < 0.5:
                at = rnd.randint(0, len(text))
                text = text[:at] + "::" + text[at:]
            if rnd.random() < 0.3:
                text += ":" + ".".join(str(rnd.randint(0, 300)).zfill(rnd.choice((0, 0, 2))) for _ in range(rnd.choice((3, 4))))
        if rnd.random() < 0.3:
            at = rnd.randint(0, len(text))
            text = text[:at] + rnd.choice(":.0fG%x []") + text[at + rnd.randint(0, 1):]
        entries.append(text)
    entries += ["".join(rnd.choice("0123456789.:[]abcdef%") for _ in range(rnd.randint(1, 16))) for _ in range(20_000)]
    for entry in entries:
        assert is_address(entry) is read_address(entry), repr(entry)
    assert sum(map(is_address, entries)) > 2_000  # the valid ones are many, not only the refused


def test_a_fragment_is_its_characters_with_the_unprintable_ones_escaped() -> None:
    from gateway.payload.decoding import FRAGMENT_CHARS, fragment

    for text in [*_strings(20_000, seed=12), "\x7f", "a\u2028b", "\u00a0", "\udcff", "x" * 200]:
        for start, end in ((0, None), (3, 5), (20, 21)):
            lo = max(0, start - 16)
            piece = text[lo:max((len(text) if end is None else end) + 16, lo + 1)][:FRAGMENT_CHARS]
            assert fragment(text, start, end) == "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in piece), repr(text)
