"""The keyword baseline clef is measured against.

It sees exactly what clef sees (state, criteria, options) and nothing task-specific:
a choice option scores the number of its words (prefix-stemmed) found in the state; a
bool question scores the share of its criteria words found, against a threshold. The
threshold and the temperatures are fitted on the same generated calibration split as
clef's, so both are calibrated the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gateway.clef import Question, humanize
from models.clef import calibration

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset("""a an and are as at be been being but by can could did do does for from had has have how i if in into is it
its may might must no not of on or our so than that the their them then there these they this to was we were what when where which
who whom why will with would you your should shall about any all some more most other such only own same too very just whether
need needs much many""".split())


def stems(text: str) -> set[str]:
    """Lower-case words without stop words, cut to 5 letters so that inflections meet."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1}


@dataclass
class KeywordBaseline:
    """Word-overlap scores turned into probabilities by fitted temperatures."""

    temperature_choice: float = 1.0
    temperature_bool: float = 1.0
    threshold: float = 0.5

    def logits(self, state: str, question: Question) -> np.ndarray:
        words = stems(state)
        if question.type == "bool":
            crit = stems(question.effective_criteria)
            share = len(crit & words) / max(len(crit), 1)
            return np.array([share, self.threshold])
        return np.array([float(len(stems(humanize(o)) & words)) for o in question.options])

    def probabilities(self, state: str, question: Question) -> np.ndarray:
        t = self.temperature_bool if question.type == "bool" else self.temperature_choice
        return calibration.softmax(self.logits(state, question), t)

    def fit(self, items: Sequence[tuple[str, Question, int]]) -> KeywordBaseline:
        """Fit the bool threshold (best accuracy) and both temperatures (NLL) on labelled items."""
        bools = [(s, q, y) for s, q, y in items if q.type == "bool"]
        if bools:
            shares = [self.logits(s, q)[0] for s, q, _ in bools]
            candidates = sorted({0.0, *shares, 1.0})
            best = max(candidates, key=lambda th: sum((sh > th) == (y == 0) for sh, (_, _, y) in zip(shares, bools, strict=True)))
            self.threshold = float(best)
            self.temperature_bool = calibration.fit_temperature([self.logits(s, q) for s, q, _ in bools], [y for _, _, y in bools])
        choices = [(s, q, y) for s, q, y in items if q.type == "choice"]
        if choices:
            self.temperature_choice = calibration.fit_temperature([self.logits(s, q) for s, q, _ in choices],
                                                                  [y for _, _, y in choices])
        return self
