"""Coverage-guided fuzzing of one target with atheris (libFuzzer): ``python -m tests.fuzz.run TARGET [libFuzzer flags]``.

``make fuzz`` runs every target for ``FUZZ_MINUTES`` (two at a time). The committed seeds are in
``tests/fuzz/corpus/TARGET``; what the run adds goes to ``tests/fuzz/work/TARGET`` (not committed), crashes to
``tests/fuzz/work/TARGET/crash-*``. A crash becomes a test: its input in ``tests/fuzz/regressions/TARGET-*.bin``
(replayed by ``test_fuzz_smoke.py``) and a named test of the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

HERE = Path(__file__).resolve().parent


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m tests.fuzz.run TARGET [libFuzzer flags]  (targets: head, features, rules, decision)")
    name = sys.argv.pop(1)
    with atheris.instrument_imports(include=["gateway"]):
        import gateway.features
        import gateway.jev
        import gateway.proxy.downstream
        import gateway.rules  # noqa: F401
        from tests.fuzz import targets
    target = targets.TARGETS[name]
    target(b"")  # build what the target keeps between inputs (event loop, runtime, rule tables) before fuzzing
    work = HERE / "work" / name
    work.mkdir(parents=True, exist_ok=True)
    args = [sys.argv[0], *sys.argv[1:], f"-artifact_prefix={work}/", str(work), str(HERE / "corpus" / name)]
    atheris.Setup(args, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
