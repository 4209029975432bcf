"""Readers for labelled traffic: generator/eval JSONL, the gateway's decision log, access logs.

Every reader yields records in the shape ``gateway.features.from_record`` reads, with
a ``label`` (human, good_bot, bad_bot, attack) and, for attacks, an optional
``attack_kind``. Lines without a known label are skipped and counted, never guessed.

- **JSONL records** (``models.data.generate`` output, ``clefgate eval`` input): one
  record per line.
- **Decision log** (``gateway.decisionlog``): lines with the request under
  ``"record"``; add ``"label"`` (and ``"attack_kind"``) to a line to make it
  training data. When the line also carries the model ``"input"`` of the same
  feature version, its exact text and numeric vector (per-client statistics
  included) are used as they were at decision time.
- **Combined access logs** with a label column appended (``… "referer" "user-agent"
  LABEL``). Such a line only has the request line, the referer and the user agent,
  so the header-structure evidence the model relies on for bots is missing; use it
  for attacks in URLs, or weigh it down (``access_log_weight`` in the train config).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLASS_LABELS = ("human", "good_bot", "bad_bot", "attack")
ATTACK_KINDS = ("sqli", "xss", "traversal", "cmdi", "probe", "other")
# Spellings users put in label columns, mapped to the model's options.
_ALIASES = {"bot": "bad_bot", "badbot": "bad_bot", "bad-bot": "bad_bot", "goodbot": "good_bot", "good-bot": "good_bot",
            "crawler": "good_bot", "benign": "human", "user": "human", "malicious": "attack"}
_COMBINED = re.compile(r'^(?P<ip>\S+) \S+ \S+ \[[^\]]*\] "(?P<request>[^"]*)" \d{3} \S+ "(?P<referer>[^"]*)" "(?P<ua>[^"]*)"(?:\s+(?P<rest>.*))?$')


@dataclass
class ReadStats:
    """What a reader kept and skipped (printed by the trainer)."""

    read: int = 0
    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def normalise_label(raw: Any) -> tuple[str, str | None] | None:
    """(class, attack_kind) from a label such as ``attack``, ``attack:sqli``, ``sqli`` or ``bad-bot``."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    text = raw.strip().lower()
    kind: str | None = None
    if ":" in text:
        text, kind = text.split(":", 1)
    if text in ATTACK_KINDS:
        return "attack", text
    text = _ALIASES.get(text, text)
    if text not in CLASS_LABELS:
        return None
    if kind is not None and kind not in ATTACK_KINDS:
        kind = "other"
    return text, (kind if text == "attack" else None)


def _labelled(rec: dict[str, Any], raw_label: Any, raw_kind: Any, stats: ReadStats) -> dict[str, Any] | None:
    label = normalise_label(raw_label)
    if label is None:
        stats.skip("no known label" if raw_label is not None else "unlabelled")
        return None
    cls, kind = label
    if cls == "attack" and kind is None and isinstance(raw_kind, str):
        kind = raw_kind if raw_kind in ATTACK_KINDS else "other"
    rec["label"] = cls
    if kind is not None:
        rec["attack_kind"] = kind
    return rec


def read_jsonl(path: Path, stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Records from a JSONL file: plain records or decision-log lines (with ``record``)."""
    stats = stats if stats is not None else ReadStats()
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            stats.read += 1
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                stats.skip("invalid JSON")
                continue
            if not isinstance(obj, dict):
                stats.skip("not an object")
                continue
            if isinstance(obj.get("record"), dict):  # a decision-log line
                rec = dict(obj["record"])
                if isinstance(obj.get("input"), dict):
                    rec["model_input"] = obj["input"]
                if rec.get("client_ip") is None and obj.get("client"):
                    rec["client_ip"] = obj["client"]
            else:
                rec = obj
            if not rec.get("method") or not rec.get("path"):
                stats.skip("no method or path")
                continue
            out = _labelled(rec, obj.get("label", rec.get("label")), obj.get("attack_kind", rec.get("attack_kind")), stats)
            if out is not None:
                stats.kept += 1
                yield out


def read_access_log(path: Path, stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Records from a combined-format access log whose lines end with a label column."""
    stats = stats if stats is not None else ReadStats()
    with path.open(encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            if not line.strip():
                continue
            stats.read += 1
            m = _COMBINED.match(line.rstrip("\n"))
            if m is None:
                stats.skip("not combined log format")
                continue
            parts = m["request"].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                stats.skip("malformed request line")
                continue
            tail = m["rest"] or ""
            try:
                rest = shlex.split(tail)
            except ValueError:
                rest = tail.split()
            if not rest:
                stats.skip("unlabelled")
                continue
            headers = [["Host", "-"]]
            if m["ua"] not in ("", "-"):
                headers.append(["User-Agent", m["ua"]])
            if m["referer"] not in ("", "-"):
                headers.append(["Referer", m["referer"]])
            rec = {"method": parts[0], "path": parts[1], "http_version": parts[2][5:], "headers": headers, "body": None,
                   "client_ip": m["ip"], "source": "access-log"}
            out = _labelled(rec, rest[-1], None, stats)
            if out is not None:
                stats.kept += 1
                yield out


def read_any(path: Path, stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Pick the reader by content: JSON lines, else a combined access log."""
    with path.open(encoding="utf-8", errors="replace") as fh:
        first = next((ln for ln in fh if ln.strip()), "")
    if first.lstrip().startswith("{"):
        return read_jsonl(path, stats)
    return read_access_log(path, stats)
