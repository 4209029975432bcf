"""The gate: a candidate Clef-flash version checked on the calibration side's gate sets.

    python -m models.gate --repository /tmp/candidate --version 1.8.0 --tag candidate
    python -m models.gate --repository models/repository --version 1.7.0 --only C3,DQ --json out.json

A candidate is read held out only after it passes this gate (the limits are ``THRESHOLDS``):
the shipped rules (``gateway/default.yaml``) + the candidate's int8 model on the CPU, at
``policy.challenge_risk`` 0.5, scored by ``gateway.tools.evaluate.evaluate`` (the figures of ``clefgate
eval``'s rules + model), on eleven sets that no training, epoch or threshold choice reads (``SETS``):

- C3, C4, C5, N6, N9: 16,000 calibration-side requests each (people blocked / challenged,
  attacks blocked, bad bots stopped);
- DQ, docs2, locales, md, oneclick2, restwrites: people only (blocked / challenged).

It reads calibration-side sets and measurement sets only, never the eval split or an exam:
every recipe draws with ``--split calib`` or from a measurement generator.

Each set is written once into ``--sets-dir`` by its recipe (the command it equals is in
``SETS`` and in the sets manifest, ``MANIFEST.json``, with the file's SHA-256). A file whose
SHA-256 is not the one recorded when it was written is refused, and so is a rewrite that
comes out different. Full-size sets on which this tool reproduced 1.7.0's recorded figures
carry that file's SHA-256 (``pinned``) and are refused if the recipe ever writes another
file. Two are not pinned, and the gate prints a note for each: docs2 reads the documents
the machine has installed (machines differ in which ones they have), and DQ's original
recipe was never written down, so its recipe here is
a stand-in of the same kind (people's calibration-side searches for developer questions).
Both are held to limits re-derived from a reference version (``--reference``, 1.7.0) scored
on the same files in the same run, with the recorded margins (``RELATIVE``).

int8 arithmetic. The recorded figures came from hosts where onnxruntime computed the int8
model's ``MatMulInteger`` (uint8 activations x int8 weights) exactly. On an AVX2-only CPU its
default kernel saturates at 16 bits, which moves some probabilities (AVX2 EPYC:
1.7.0 blocks 14.30% of the restwrites set against the 14.47% recorded). The gateway sets
onnxruntime's ``session.x64quantprecision`` (``OnnxOptions.exact_int8``) where a probe finds the
default kernel wrong, under which those products are exact
on AVX2 too, so a gate line does not depend on the host; ``--int8 saturating`` scores as the
gateway did before (the same as ``exact`` on a VNNI CPU).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.decider.manifest import file_sha256

SAMPLE_FIGURES = ("humans_blocked", "humans_challenged", "attacks_blocked", "bad_bots_stopped")
PEOPLE_FIGURES = ("humans_blocked", "humans_challenged")

# The gate: set -> figure -> (comparison, limit in percent). Every figure without a limit is reported only.
_SAMPLE_LIMITS: dict[str, tuple[str, float]] = {
    "humans_blocked": ("<=", 0.05), "humans_challenged": ("<=", 0.5), "attacks_blocked": (">=", 98.3), "bad_bots_stopped": (">=", 95.5)}
THRESHOLDS: dict[str, dict[str, tuple[str, float]]] = {
    **{name: _SAMPLE_LIMITS for name in ("C3", "C4", "C5", "N6", "N9")},
    "DQ": {"humans_blocked": ("<=", 0.125)},
    "docs2": {"humans_blocked": ("<=", 3.57)},
    "locales": {"humans_blocked": ("<=", 0.61)},
    "md": {"humans_blocked": ("<=", 0.80)},
    "oneclick2": {"humans_blocked": ("<=", 0.30)},
    "restwrites": {"humans_blocked": ("<=", 0.1), "humans_challenged": ("<=", 1.0)},
}
# The sets this tool cannot rebuild as recorded (not pinned) are held to limits re-derived from a reference version
# scored on the same files in the same run, keeping the recorded margin over what the reference blocked there:
# DQ at least 0.125 and the reference + 0.10 points (1.5.0's
# recorded 0.125 was the first limit); docs2 the reference + 1.58 points (3.57 recorded limit - 1.99 by 1.7.0).
RELATIVE: dict[str, tuple[float, float]] = {"DQ": (0.10, 0.125), "docs2": (1.58, 0.0)}  # set -> (margin, floor), humans_blocked
REFERENCE = "1.7.0"

# ---------------------------------------------------------------------------- recipes

# N6, N9 and DQ were drawn while the calibration side had a 23rd developer-question fragment, "void 0", right after
# "typeof null"; commit 0602950 dropped it (a near-copy of a held-out hard query). The gate keeps the sets as drawn:
# only these recipes put it back, for the time they write, and nothing else sees it.
_VOID0_FRAGMENT = ("typeof null", "void 0")


@contextlib.contextmanager
def _with_void0_fragment() -> Iterator[None]:
    from models.data import devqueries

    saved = devqueries.FRAGMENTS
    after, extra = _VOID0_FRAGMENT
    fragments = list(saved)
    if extra not in fragments:
        fragments.insert(fragments.index(after) + 1, extra)
    devqueries.FRAGMENTS = tuple(fragments)
    devqueries._SIDES.clear()
    try:
        yield
    finally:
        devqueries.FRAGMENTS = saved
        devqueries._SIDES.clear()


def _calib(seed: int, dev_questions: float = 0.0) -> Callable[[Path, int], None]:
    def write(out: Path, rows: int) -> None:
        from models.data import generate

        with _with_void0_fragment() if dev_questions else contextlib.nullcontext():
            generate.write_jsonl(generate.generate("calib", rows, seed, dev_questions=dev_questions), out)
    return write


def _dev_questions(seed: int) -> Callable[[Path, int], None]:
    """DQ's stand-in (the original recipe is lost): people's searches on the calibration side's search pages, every
    query a developer question. Not the recorded DQ; see the module docstring."""
    def write(out: Path, rows: int) -> None:
        from models.data import generate, site

        drawn_query = site.search_query

        def human(rng: Any) -> dict[str, Any]:
            agent = generate._weighted(rng, generate.browsers_for(rng.split))
            site_name = rng.choice(site.SITES[:5])
            tpl = rng.choice(generate._templates(rng, site_name, ("search",)))
            return generate.person(rng, agent, generate._make(rng, tpl), site.HOSTS[site_name], f"human/devquestion/{tpl.id}")

        site.search_query = lambda rng, hard_share=0.35: drawn_query(rng, 1.0)
        generate.BUILDERS["human"] = human
        try:
            with _with_void0_fragment():
                generate.write_jsonl(generate.generate("calib", rows, seed, {"human": 1.0}, dev_questions=1.0), out)
        finally:
            site.search_query = drawn_query
            generate.BUILDERS["human"] = generate.human
    return write


def _realtext(source: str, seed: int) -> Callable[[Path, int], None]:
    def write(out: Path, rows: int) -> None:
        from models.data import realtext

        with contextlib.redirect_stdout(sys.stderr):
            if realtext.main(["--source", source, "--rows", str(rows), "--seed", str(seed), "--out", str(out)]) != 0:
                raise GateError(f"realtext --source {source} could not write its set (see above)")
    return write


def _measurement(module: str, seed: int) -> Callable[[Path, int], None]:
    def write(out: Path, rows: int) -> None:
        import importlib

        from models.data import generate

        generate.write_jsonl(importlib.import_module(f"models.data.{module}").rows(rows, seed), out)
    return write


@dataclass(frozen=True)
class GateSet:
    name: str
    rows: int
    command: str  # the command line the recipe equals
    write: Callable[[Path, int], None]
    sample: bool  # a labelled calibration sample (four figures), else people only (two)
    pinned: str | None  # SHA-256 of the full-size file the recorded figures were measured on; None: depends on the machine


_GEN = "python -m models.data.generate --split calib --rows 16000"
_VOID0 = " (calibration fragments with 'void 0', as the set was first drawn)"
# Pins: the files on which this tool reproduced 1.7.0's recorded figures exactly. DQ's recipe was never recorded and the one here
# is a stand-in; docs2 reads the machine's installed documents. Neither is pinned, and the gate says so.
SETS: tuple[GateSet, ...] = (
    GateSet("C3", 16000, f"{_GEN} --seed 3", _calib(3), True, "13bdeefc939e94197c38b4b983df698b1f2e0e1d3e69fa21ce98f774f0d996f0"),
    GateSet("C4", 16000, f"{_GEN} --seed 4", _calib(4), True, "23ebb154a1a3f2ff3c7a5043ac0684496bddd26a7e21cdb3b5aca4309fb30b39"),
    GateSet("C5", 16000, f"{_GEN} --seed 5", _calib(5), True, "a45a9c532e60cc08ccd49d9d6907a393b0b273e84c3b73b299a9c4607eaa3393"),
    GateSet("N6", 16000, f"{_GEN} --seed 6 --dev-questions 0.5{_VOID0}", _calib(6, 0.5), True,
            "5cf6bbd6ab62da0524ee46252c200282a15a43ce3cb30c7083472576c3056abb"),
    GateSet("N9", 16000, f"{_GEN} --seed 9 --dev-questions 0.5{_VOID0}", _calib(9, 0.5), True,
            "200fcec99ecc72f9b53f488b2734da29452c40e454902d82af2b2e6e31d09772"),
    GateSet("DQ", 4000, "STAND-IN (the original recipe is lost): models.data.generate.generate('calib', 4000, 1, {'human': 1.0}, "
            f"dev_questions=1.0), every person on a search page, every search a hard one{_VOID0}", _dev_questions(1), False, None),
    GateSet("docs2", 20000, "python -m models.data.realtext --rows 20000 --seed 1 (reads the machine's installed documents)",
            _realtext("docs", 1), False, None),
    GateSet("locales", 20000, "python -m models.data.realtext --source locales --rows 20000 --seed 1", _realtext("locales", 1), False,
            "f8b48d26e2c8b574032fe244b681389a617dd2dd6fa7762d4c63b4b3ebcc0a13"),
    GateSet("md", 20000, "python -m models.data.realtext --source markdown --rows 20000 --seed 1", _realtext("markdown", 1), False,
            "9f219436e438eb41153046f4271b4b03996202dd090f22429fa30ed2bf48136e"),
    GateSet("oneclick2", 4000, "python -m models.data.oneclick --rows 4000 --seed 1", _measurement("oneclick", 1), False,
            "ab38ea42d07ffd1455389cc97e6b997ab6e84621eb665007b63919102f6d5928"),
    GateSet("restwrites", 3000, "python -m models.data.restwrites --rows 3000 --seed 1", _measurement("restwrites", 1), False,
            "ff8986a1b50e93aa029ce01048be0eeb99a00a193a45ca5d6c9f5d0f5c1d064a"),
)
BY_NAME = {s.name: s for s in SETS}
MANIFEST = "MANIFEST.json"


class GateError(Exception):
    """A set or model the gate cannot use; the message says why."""


def _read_manifest(sets_dir: Path) -> dict[str, Any]:
    path = sets_dir / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else {"sets": {}}


def _write_manifest(sets_dir: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    (sets_dir / MANIFEST).write_text(text)


def ensure_set(gs: GateSet, sets_dir: Path, rows: int, manifest: dict[str, Any]) -> Path:
    """The set's file in ``sets_dir``, written by its recipe if missing; refused if it is not what the recipe wrote."""
    key = gs.name if rows == gs.rows else f"{gs.name}-{rows}"
    path = sets_dir / f"{key}.jsonl"
    entry = manifest["sets"].get(key)
    if path.is_file():
        digest = file_sha256(path)
        if entry is None:
            fresh = path.with_suffix(".check")
            gs.write(fresh, rows)
            written = file_sha256(fresh)
            fresh.unlink()
            if written != digest:
                raise GateError(f"{path}: not what its recipe writes (sha256 {digest[:16]}, the recipe {written[:16]}); delete it")
        elif digest != entry["sha256"]:
            raise GateError(f"{path}: sha256 {digest[:16]} is not the {entry['sha256'][:16]} recorded when it was written; "
                            "delete it to write it again")
    else:
        sets_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        gs.write(partial, rows)
        digest = file_sha256(partial)
        if entry is not None and digest != entry["sha256"]:
            partial.unlink()
            raise GateError(f"{key}: its recipe now writes sha256 {digest[:16]}, not the {entry['sha256'][:16]} it wrote first "
                            f"(the recorded figures are of that file)")
        partial.replace(path)
    if rows == gs.rows and gs.pinned is not None and digest != gs.pinned:
        raise GateError(f"{path}: sha256 {digest[:16]} is not the set the recorded figures were measured on ({gs.pinned[:16]})")
    manifest["sets"][key] = {"command": gs.command, "rows": rows, "sha256": digest}
    return path


# ---------------------------------------------------------------------------- scoring

def load_scorer(repository: Path, name: str, version: str, int8: str = "exact") -> Any:
    """The gateway's CPU scorer for ``name@version`` in ``repository``, int8 file; ``int8="exact"`` (the gateway's default
    where a probe finds the default kernel wrong) makes onnxruntime's uint8 x int8 products exact on every x86 CPU, ``"saturating"`` leaves
    onnxruntime's default kernel, which saturates on AVX2-only CPUs (see the module docstring)."""
    from gateway.decider.onnx import OnnxOptions, OnnxScorer

    return OnnxScorer(OnnxOptions(repository=repository.resolve(), name=name, version=version, variant="int8", providers=("cpu",),
                                  exact_int8=int8 == "exact"))


def gate_config(challenge_risk: float) -> Any:
    """The shipped config (rules, fallback signatures, policy) with ``challenge_risk``."""
    from gateway.tools import evaluate as ev

    cfg = ev.load_config(None)
    cfg.policy.challenge_risk = challenge_risk
    return cfg


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """Rules + model figures (percent) from ``gateway.tools.evaluate.evaluate``'s counts, with the counts themselves."""
    m = result["systems"]["rules_model"]["matrix"]
    people = sum(m["human"].values())
    attacks = sum(m["attack"].values())
    bad = sum(m["bad_bot"].values())

    def pct(k: int, n: int) -> float | None:
        return 100.0 * k / n if n else None
    return {"n": result["n"], "people": people, "attacks": attacks, "bad_bots": bad,
            "humans_blocked": pct(m["human"]["block"], people), "humans_challenged": pct(m["human"]["challenge"], people),
            "attacks_blocked": pct(m["attack"]["block"], attacks),
            "bad_bots_stopped": pct(m["bad_bot"]["challenge"] + m["bad_bot"]["block"], bad)}


def relative_limits(reference: dict[str, dict[str, Any]]) -> dict[str, dict[str, tuple[str, float]]]:
    """THRESHOLDS with the unpinned sets' limits re-derived from the reference's figures on the same files (``RELATIVE``)."""
    out = dict(THRESHOLDS)
    for name, (margin, floor) in RELATIVE.items():
        blocked = reference.get(name, {}).get("humans_blocked")
        if blocked is not None:
            out[name] = {**THRESHOLDS[name], "humans_blocked": ("<=", round(max(floor, blocked + margin), 4))}
    return out


def failures(name: str, figs: dict[str, Any], limits: dict[str, dict[str, tuple[str, float]]] | None = None) -> set[str]:
    """The figures of set ``name`` outside the gate (a missing figure fails its limit)."""
    out = set()
    for figure, (op, limit) in (limits or THRESHOLDS)[name].items():
        value = figs.get(figure)
        if value is None or not (value <= limit if op == "<=" else value >= limit):
            out.add(figure)
    return out


def _cell(name: str, figs: dict[str, Any], failed: set[str]) -> str:
    sample = name in BY_NAME and BY_NAME[name].sample
    keys = SAMPLE_FIGURES if sample else PEOPLE_FIGURES
    places = (3, 2, 2, 2) if sample else (2, 2)
    parts = ["-" if figs.get(k) is None else f"{figs[k]:.{p}f}" for k, p in zip(keys, places, strict=True)]
    return f"{name} " + "/".join(part + ("✗" if k in failed else "") for part, k in zip(parts, keys, strict=True))


def gate_line(tag: str, challenge_risk: float, results: dict[str, dict[str, Any]],
              limits: dict[str, dict[str, tuple[str, float]]] | None = None) -> tuple[str, bool]:
    """The established one-line form (``TAG ch 0.5: PASS  C3 0.000/0.12/99.21/96.75  ...``) and whether every set passed."""
    failed = {name: failures(name, figs, limits) for name, figs in results.items()}
    ok = not any(failed.values())
    cells = "  ".join(_cell(name, figs, failed[name]) for name, figs in results.items())
    return f"{tag:10s} ch {challenge_risk:g}: {'PASS' if ok else 'fail'}  {cells}", ok


def run(repository: Path, version: str, *, name: str = "clef-flash", challenge_risk: float = 0.5, sets_dir: Path,
        only: Sequence[str] | None = None, rows_scale: float = 1.0, int8: str = "exact", reference: str | None = REFERENCE,
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> dict[str, Any]:
    """Write what is missing, score every chosen set, and return the figures (``results``) with timings.

    With ``reference`` (a version in the shipped repository), the unpinned sets are scored with it too and their
    limits re-derived from its figures (``RELATIVE``); ``limits`` in the result are the ones the gate applies."""
    from gateway.tools import evaluate as ev

    chosen = [BY_NAME[n] for n in only] if only else list(SETS)
    manifest = _read_manifest(sets_dir)
    started = time.perf_counter()
    paths = {}
    try:
        for gs in chosen:
            paths[gs.name] = ensure_set(gs, sets_dir, max(1, round(gs.rows * rows_scale)), manifest)
    finally:
        if manifest["sets"]:
            _write_manifest(sets_dir, manifest)
    prepared = time.perf_counter()
    scorer = load_scorer(repository, name, version, int8)
    cfg = gate_config(challenge_risk)
    log(f"gate: {scorer.label} from {repository} (int8 on {scorer.provider}, {int8} int8 products), rules {', '.join(cfg.rules.files)}, "
        f"challenge_risk {challenge_risk:g}")
    results: dict[str, dict[str, Any]] = {}
    kept_rows: dict[str, Any] = {}  # the unpinned sets' rows, scored again with the reference below
    for gs in chosen:
        rows = ev.read_rows(paths[gs.name], ev.Skipped())
        if gs.name in RELATIVE:
            kept_rows[gs.name] = rows
        results[gs.name] = {**figures(ev.evaluate(rows, cfg, scorer)), "sha256": manifest["sets"][paths[gs.name].stem]["sha256"]}
        if rows_scale == 1.0 and gs.pinned is None:
            log(f"note: {gs.name} is not a pinned set, so its figures are not comparable with recorded ones: {gs.command}")
    reference_results: dict[str, dict[str, Any]] = {}
    relative = [gs for gs in chosen if gs.name in RELATIVE]
    if reference and relative:
        from gateway.decider.onnx import DEFAULT_REPOSITORY

        base = load_scorer(DEFAULT_REPOSITORY, name, reference, int8)
        same = base.manifest.directory.resolve() == scorer.manifest.directory.resolve()  # the candidate is the reference
        for gs in relative:
            reference_results[gs.name] = (
                {k: v for k, v in results[gs.name].items() if k != "sha256"} if same
                else figures(ev.evaluate(kept_rows[gs.name], cfg, base)))
    limits = relative_limits(reference_results)
    for set_name in reference_results:
        log(f"note: {set_name} limit re-derived from {reference} on the same file "
            f"({reference_results[set_name]['humans_blocked']:.3f}% blocked): <= {limits[set_name]['humans_blocked'][1]:g}%")
    return {"model": scorer.label, "repository": str(repository), "challenge_risk": challenge_risk, "int8": int8,
            "rows_scale": rows_scale, "results": results, "reference": reference_results, "limits": limits,
            "seconds": {"sets": round(prepared - started, 1), "scoring": round(time.perf_counter() - prepared, 1)}}


def main(argv: Sequence[str] | None = None) -> int:
    """0 when the candidate passes, 1 when it fails, 2 when the gate could not run."""
    ap = argparse.ArgumentParser(prog="python -m models.gate", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--repository", type=Path, required=True, help="model repository folder (holds NAME/VERSION/)")
    ap.add_argument("--version", required=True, help="model version folder")
    ap.add_argument("--name", default="clef-flash", help="model name (default clef-flash)")
    ap.add_argument("--challenge-risk", type=float, default=0.5, help="policy.challenge_risk (default 0.5)")
    ap.add_argument("--sets-dir", type=Path, default=Path("models/work/gate-sets"), help="where the gate sets and MANIFEST.json live")
    ap.add_argument("--tag", default=None, help="the line's tag (default: the version)")
    ap.add_argument("--only", default=None, help=f"comma-separated sets (default all: {','.join(BY_NAME)})")
    ap.add_argument("--rows-scale", type=float, default=1.0, help="draw each set at this share of its rows (tests; not a gate)")
    ap.add_argument("--int8", choices=("exact", "saturating"), default="exact",
                    help="exact: exact uint8 x int8 products on every CPU, as the gateway runs (default); "
                         "saturating: onnxruntime's default AVX2 kernel, without the exact-products setting")
    ap.add_argument("--reference", default=REFERENCE,
                    help=f"shipped version whose figures on the unpinned sets (DQ, docs2) set their limits (default {REFERENCE}; "
                         "'none': the fixed recorded limits)")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure, count and digest here")
    args = ap.parse_args(argv)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = [n for n in only or () if n not in BY_NAME]
    if unknown:
        ap.error(f"--only: unknown set(s) {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    if not 0.0 < args.rows_scale <= 1.0:
        ap.error("--rows-scale is a share of the rows, in (0, 1]")
    try:
        out = run(args.repository, args.version, name=args.name, challenge_risk=args.challenge_risk, sets_dir=args.sets_dir,
                  only=only, rows_scale=args.rows_scale, int8=args.int8,
                  reference=None if args.reference.lower() == "none" else args.reference)
    except Exception as exc:
        from gateway.decider import manifest as mf
        from gateway.decider.onnx import ModelLoadError

        if not isinstance(exc, GateError | mf.ManifestError | ModelLoadError):
            raise
        print(f"gate: {exc}", file=sys.stderr)
        return 2
    line, ok = gate_line(args.tag or args.version, args.challenge_risk, out["results"], out["limits"])
    print(line)
    print(f"gate: sets {out['seconds']['sets']} s, scoring {out['seconds']['scoring']} s", file=sys.stderr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**out, "tag": args.tag or args.version, "line": line, "pass": ok,
                                         "thresholds": {n: out["limits"][n] for n in out["results"]}}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
