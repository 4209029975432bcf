"""The decision API's input checks: every fault of the request is a 400 ``invalid_request`` naming the field."""

from __future__ import annotations

import json

import pytest

from gateway.config import JevConfig
from gateway.jev import ApiError, check_values, parse_item

RECORD = {"method": "GET", "path": "/", "headers": [["Host", "a"]]}
CLASS_Q = {"id": "class", "type": "choice", "options": ["human", "good_bot", "bad_bot", "attack"]}

# raw body text -> the field path the 400 names
BAD_BODIES = [
    ('{"input": "x\\ud800"}', "input"),
    ('{"input": "\\udfff tail"}', "input"),
    ('[{"input": "ok"}, {"input": "x\\ud800"}]', "[1].input"),
    ('{"state": {"method": "GET", "path": "/\\ud83d"}, "questions": [{"id": "q", "options": ["a", "b"]}]}', "state.path"),
    ('{"input": "x", "max_tokens": NaN}', "max_tokens"),
    ('{"input": "x", "max_tokens": Infinity}', "max_tokens"),
    ('{"input": "x", "max_tokens": -Infinity}', "max_tokens"),
    ('{"input": "x", "max_tokens": 1e400}', "max_tokens"),
    ('{"task": "t", "features": {"n": NaN}, "candidates": ["a", "b"]}', "features.n"),
    ('{"x\\ud800": 1, "input": "x"}', "x\ud800"),
]

BAD_ITEMS = [
    ({"state": {**RECORD, "method": 5}, "questions": [CLASS_Q]}, "state.method"),
    ({"state": {**RECORD, "path": None}, "questions": [CLASS_Q]}, "state.path"),
    ({"state": {**RECORD, "method": "GET /x"}, "questions": [CLASS_Q]}, "state.method"),
    ({"state": {**RECORD, "headers": {"Host": "a"}}, "questions": [CLASS_Q]}, "state.headers"),
    ({"state": {**RECORD, "headers": [[1, 2, 3]]}, "questions": [CLASS_Q]}, "state.headers[0]"),
    ({"state": {**RECORD, "headers": [["Host", 7]]}, "questions": [CLASS_Q]}, "state.headers[0]"),
    ({"state": {**RECORD, "headers": "Host: a"}, "questions": [CLASS_Q]}, "state.headers"),
    ({"state": {**RECORD, "body": {"a": 1}}, "questions": [CLASS_Q]}, "state.body"),
    ({"state": {**RECORD, "http_version": 1.1}, "questions": [CLASS_Q]}, "state.http_version"),
    ({"state": json.dumps({**RECORD, "method": 5}), "questions": [CLASS_Q]}, "state.method"),
    ({"state": "x", "questions": [[1, 2, 3]]}, "questions[0]"),
    ({"input": 5}, "input"),
    ({"input": ["x"]}, "input"),
    ({"task": 5, "candidates": ["a", "b"]}, "task"),
    ({"state": 5, "questions": [CLASS_Q]}, "state"),
]


def refused(body: object) -> ApiError:
    with pytest.raises(ApiError) as err:
        check_values(body, "")
        items = body if isinstance(body, list) else [body]
        for i, item in enumerate(items):
            parse_item(item, f"[{i}]." if isinstance(body, list) else "", JevConfig())
    return err.value


@pytest.mark.parametrize("raw,field", BAD_BODIES, ids=[b[0][:40] for b in BAD_BODIES])
def test_bad_text_and_numbers_are_400_with_the_field(raw: str, field: str) -> None:
    err = refused(json.loads(raw))
    assert (err.status, err.code, err.field) == (400, "invalid_request", field), err.message


@pytest.mark.parametrize("body,field", BAD_ITEMS, ids=[f for _, f in BAD_ITEMS])
def test_wrong_types_are_400_with_the_field(body: object, field: str) -> None:
    err = refused(body)
    assert (err.status, err.code, err.field) == (400, "invalid_request", field), err.message


def test_a_batch_of_lists_is_400() -> None:
    err = refused([[1, 2, 3]])
    assert (err.status, err.field) == (400, "[0]")


def test_good_bodies_pass() -> None:
    for body in ({"input": "héllo 🌍"}, {"state": RECORD, "questions": [CLASS_Q]}, {"state": {"service": "db", "errors": 5.5},
                 "questions": [{"id": "ok", "type": "bool"}], "model": "clef"}, {"state": {"method": 5}, "model": "clef",
                 "questions": [{"id": "ok", "type": "bool"}]}):
        check_values(body, "")
        parse_item(body, "", JevConfig())
