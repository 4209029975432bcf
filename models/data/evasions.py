"""Injections in evasion encodings: the calibration side's attacks, each that can be rewritten in one of ``attacks.EVASIONS``.

    python -m models.data.evasions --rows 4000 --out evasions.jsonl
    clefgate eval --data evasions.jsonl

The same requests as the generator's calibration side draws for attacks (its payload
productions, probes, pages and heads), except that every injection placed in a query, path,
form or JSON body has about two thirds of its syntax characters written in one evasion
encoding (full-width forms, overlong UTF-8, IIS ``%u``, HTML references, JavaScript escapes,
mixed-case escapes); the row's source ends with the encoding. Probes, header and XML
placements keep their form. It measures how much of an attack a model still recognises
written another way, on productions training never saw; the encodings themselves are on the
training side when ``data.evasions`` is on. Never training data; rows depend only on the seed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

from models.data.generate import BUILDERS, measurement_main
from models.data.site import Draw


def rows(n: int, seed: int) -> Iterator[dict[str, Any]]:
    """``n`` calibration-side attacks, every evadable injection evaded; row ``i`` depends only on (seed, i)."""
    base = int.from_bytes(hashlib.sha256(f"evasions/{seed}".encode()).digest()[:6], "big")
    for i in range(n):
        rng = Draw(base + i, "calib")
        rng.evasions = 1.0  # the generator allows this on the training side only; here it is the point
        rng.dev_questions = 0.0
        yield BUILDERS["attack"](rng)


def main(argv: Sequence[str] | None = None) -> int:
    return measurement_main(argv, "python -m models.data.evasions", __doc__, rows, 4000, "number of attacks", "evaded attacks")


if __name__ == "__main__":
    raise SystemExit(main())
