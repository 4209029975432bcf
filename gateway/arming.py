"""What a config arms (rules, signatures, the model), and what a reload takes away.

A reload that removes every rule or the model, halves the rules or drops the payload signatures still applies
(an operator may mean it), but it is said: a WARNING with the before/after summary, a count in
``clefgate_reload_disarm_total{what}``, and the reasons in the answer to ``POST /admin/reload``. ``clefgate check``
prints the same summary, and with ``--against RUNNING`` the difference from the running config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gateway import metrics

DISARMS = metrics.counter("clefgate_reload_disarm_total",
                          "Reloads that applied while taking protection away, by what (rules_removed, rules_halved, model_removed, "
                          "signatures_dropped, fallback_removed).", ("what",))


@dataclass(frozen=True)
class Arming:
    """The protection one config compiles to."""

    rules: int = 0                # rules in rules.files
    block_rules: int = 0          # of which block
    signatures: int = 0           # block rules that search the request's inputs (payload signatures)
    fallback_rules: int = 0       # rules in rules.fallback_files
    fallback_signatures: int = 0  # of which payload signatures
    model: str = ""               # name@version, empty when off
    default: str = ""             # what an unmatched request gets

    def summary(self) -> str:
        return (f"rules {self.rules} (block {self.block_rules}, signatures {self.signatures}), fallback rules "
                f"{self.fallback_rules} (signatures {self.fallback_signatures}), model {self.model or 'off'}, default {self.default}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _count(table: Any) -> tuple[int, int, int]:
    rules = getattr(table, "rules", ()) if table is not None else ()
    block = [r for r in rules if r.action == "block"]
    return len(rules), len(block), sum(1 for r in block if "_inputs(f)" in r.condition)


def arming(pipeline: Any, model: str = "") -> Arming:
    """The arming of a compiled pipeline (``model``: the serving model's label, empty when off)."""
    rules, block, sigs = _count(pipeline.rules)
    fallback, _, fallback_sigs = _count(pipeline.fallback_rules)
    default = pipeline.default
    label = "score" if type(default).__name__ == "ScoreRequest" else getattr(getattr(default, "action", None), "value", str(default))
    return Arming(rules, block, sigs, fallback, fallback_sigs, model, label)


def disarms(before: Arming, after: Arming) -> list[tuple[str, str]]:
    """(what, why) for each way ``after`` protects less than ``before``."""
    out: list[tuple[str, str]] = []
    if before.rules and not after.rules:
        out.append(("rules_removed", f"every rule removed ({before.rules} -> 0)"))
    elif before.rules and after.rules * 2 <= before.rules:
        out.append(("rules_halved", f"rules halved or worse ({before.rules} -> {after.rules})"))
    if before.model and not after.model:
        out.append(("model_removed", f"model removed ({before.model} -> off)"))
    if after.signatures + after.fallback_signatures < before.signatures + before.fallback_signatures:
        out.append(("signatures_dropped", f"payload signatures dropped ({before.signatures} + {before.fallback_signatures} fallback -> "
                                          f"{after.signatures} + {after.fallback_signatures} fallback)"))
    if before.fallback_rules and not after.fallback_rules:
        out.append(("fallback_removed", f"every fallback rule removed ({before.fallback_rules} -> 0)"))
    return out
