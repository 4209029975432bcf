"""Model manifests: what a model in the repository is, and whether this gateway can run it.

A built model lives in ``<repository>/<name>/<version>/`` next to its
``manifest.json``. The manifest is the only description the runtime trusts: the
input tensors, the questions and the order of their options, the calibration
temperature per question, the feature version the model was trained on, the files
per precision (with their SHA-256), the training-data hash and held-out metrics, and, for
a version trained with them, the familiarity statistics' output and threshold (``familiarity``:
absent in older versions, which then report no familiarity).

Loading validates everything and reports *every* problem at once, each as
``field: message`` (like the config). A model built for another feature version
is refused with an error that names both versions. The module is shared by the
whole Clef family (``clef-flash``, ``clef``), so nothing here is specific to one
model's inputs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
FAMILY = "clef"
PRECISIONS = ("fp32", "int8", "fp16")
_DTYPES = ("int64", "int32", "float32", "float16", "bool", "string")
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._+-]*$")
# A version's release channel: "stable" versions are what ``latest`` resolves to; an "opt-in"
# version (a candidate with a documented trade) loads only when a config names it.
CHANNELS = ("stable", "opt-in")
# Policy settings a version can record as the ones it was evaluated with (manifest ``policy``).
POLICY_KEYS = ("block_attack", "block_risk", "block_attack_corroborated", "challenge_risk")


class ManifestError(Exception):
    """A model directory or its manifest is unusable; ``problems`` lists every issue."""

    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  {p}" for p in problems))


class FeatureVersionMismatch(ManifestError):
    """The model was trained on features this gateway no longer (or not yet) computes."""

    def __init__(self, model: str, model_version: str, runtime_version: str, source: str, detail: str = "") -> None:
        self.model_feature_version = model_version
        self.runtime_feature_version = runtime_version
        message = (f"feature_version: model {model} was trained on feature version {model_version!r}, but this "
                   f"gateway computes feature version {runtime_version!r}{detail}; retrain and export the model "
                   f"with this gateway's models/ (make model), or run the gateway release that matches the model")
        super().__init__([message], source)


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """One model input: name, element type and shape (ints, or names of dynamic axes)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """One model output: the logits of ``question``, options in the question's order."""

    name: str
    question: str


@dataclass(frozen=True, slots=True)
class Question:
    """A question the model answers with a probability per option (summing to 1).

    ``given`` = ``(question, option)`` when the answer is only meaningful if that
    option holds (e.g. ``attack_kind`` given ``class == attack``): the model was
    trained on those rows only, and a reader should weigh it by that option's
    probability.
    """

    id: str
    options: tuple[str, ...]
    description: str = ""
    given: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ModelFile:
    """A model file of one precision, relative to the version directory."""

    precision: str
    path: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class FamiliarityStats:
    """How familiar a request's payload is to the model (manifest ``familiarity``): the payload graph's ``output`` is the
    Mahalanobis distance of the payload head's input to the training rows' (the statistics are constants in the graph);
    a distance above ``threshold`` (a high quantile of the calibration rows' distances) is unfamiliar."""

    output: str
    threshold: float
    quantile: float | None = None


@dataclass(frozen=True)
class Manifest:
    """A validated manifest; ``directory`` is the version directory it was read from."""

    name: str
    version: str
    family: str
    feature_version: str
    directory: Path
    files: Mapping[str, ModelFile]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[OutputSpec, ...]
    questions: tuple[Question, ...]
    temperature: Mapping[str, float]
    feature_fingerprint: str | None = None
    tokenizer: Mapping[str, Any] = field(default_factory=dict)
    training_data: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    explain: Mapping[str, Any] | None = None
    created: str = ""
    opset: int | None = None
    channel: str = "stable"
    policy: Mapping[str, float | None] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    # a two-input model (feature version 2) ships its client half as a graph of its own, one file per precision
    client_files: Mapping[str, ModelFile] = field(default_factory=dict)
    # None for a version without the statistics (every version before them): the runtime reports no familiarity
    familiarity: FamiliarityStats | None = None

    @property
    def id(self) -> str:
        """``name@version``, as used in logs, metrics and the decision log."""
        return f"{self.name}@{self.version}"

    def question(self, question_id: str) -> Question:
        """The question with this id (KeyError when the model does not answer it)."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)

    def path(self, precision: str, part: str = "files") -> Path:
        """Absolute path of the model file of ``precision`` (KeyError when not shipped); ``part`` ``client_files``
        names the client half's file of a two-input model."""
        return self.directory / self._part(part)[precision].path

    def _part(self, part: str) -> Mapping[str, ModelFile]:
        return self.client_files if part == "client_files" else self.files

    def verify_file(self, precision: str, part: str = "files") -> None:
        """Check the file's SHA-256 against the manifest; raise ManifestError on a mismatch."""
        spec = self._part(part)[precision]
        path = self.directory / spec.path
        if spec.sha256 is None:
            return
        digest = file_sha256(path)
        if digest != spec.sha256:
            raise ManifestError([f"{part}.{precision}: {spec.path} has sha256 {digest[:12]}…, the manifest says "
                                 f"{spec.sha256[:12]}… (the file was changed or truncated; re-export the model)"],
                                str(self.directory / MANIFEST_FILE))


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    # numeric parts compare as numbers (1.10 > 1.9), text parts as text, numbers first
    parts = re.split(r"[._+-]", version)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


def versions(repository: str | Path, name: str) -> list[str]:
    """Versions of model ``name`` present in the repository (with a manifest), oldest first."""
    base = Path(repository) / name
    if not base.is_dir():
        return []
    found = [p.name for p in base.iterdir() if (p / MANIFEST_FILE).is_file()]
    return sorted(found, key=_version_key)


def channel_of(directory: Path) -> str:
    """The channel a version directory's manifest declares: "opt-in" only when it says so.

    A manifest that cannot be read counts as stable here, so that ``latest`` still picks it
    and loading reports its problems.
    """
    try:
        raw = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "stable"
    return "opt-in" if isinstance(raw, Mapping) and raw.get("channel") == "opt-in" else "stable"


def resolve(repository: str | Path, name: str, version: str = "latest") -> Path:
    """The version directory of ``name``; ``latest`` is the highest stable version present.

    Opt-in versions (manifest ``"channel": "opt-in"``) are skipped by ``latest``: adding one
    to a repository changes nothing until a config names its version.
    """
    if version in ("", "latest"):
        available = versions(repository, name)
        if not available:
            raise ManifestError([f"no version of model {name!r} in {Path(repository) / name} "
                                 f"(build one with `make model`, or set the model repository path)"], str(repository))
        stable = next((v for v in reversed(available) if channel_of(Path(repository) / name / v) == "stable"), None)
        if stable is None:
            raise ManifestError([f"no stable version of model {name!r} in {Path(repository) / name}: "
                                 f"{', '.join(available)} {'is' if len(available) == 1 else 'are'} opt-in; "
                                 f"name its version in the config to load it"], str(repository))
        version = stable
    directory = Path(repository) / name / version
    if not (directory / MANIFEST_FILE).is_file():
        available = versions(repository, name)
        hint = f" (available: {', '.join(available)})" if available else ""
        raise ManifestError([f"model {name!r} version {version!r} not found in {Path(repository) / name}{hint}"],
                            str(repository))
    return directory


def load(directory: str | Path, *, feature_version: str | None = None, feature_fingerprint: str | None = None,
         require: tuple[str, ...] = (), name: str | None = None) -> Manifest:
    """Read and validate ``directory/manifest.json``.

    ``feature_version`` (and ``feature_fingerprint`` when the manifest records one)
    must match the model's, else :class:`FeatureVersionMismatch`. ``require`` lists
    precisions whose files must exist. ``name`` checks the manifest's model name.
    Every other problem is collected and raised as one :class:`ManifestError`.
    """
    directory = Path(directory)
    source = str(directory / MANIFEST_FILE)
    try:
        raw = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ManifestError([f"no {MANIFEST_FILE} in {directory} (is this a model version directory?)"], source) from exc
    except OSError as exc:
        raise ManifestError([f"cannot read: {exc.strerror}"], source) from exc
    except json.JSONDecodeError as exc:
        raise ManifestError([f"line {exc.lineno}, column {exc.colno}: {exc.msg}"], source) from exc
    return parse(raw, directory, feature_version=feature_version, feature_fingerprint=feature_fingerprint,
                 require=require, name=name)


def parse(raw: Any, directory: Path, *, feature_version: str | None = None, feature_fingerprint: str | None = None,
          require: tuple[str, ...] = (), name: str | None = None) -> Manifest:
    """Validate an already-decoded manifest (see :func:`load`)."""
    source = str(directory / MANIFEST_FILE)
    if not isinstance(raw, Mapping):
        raise ManifestError([f"<top>: expected a JSON object, got {type(raw).__name__}"], source)
    problems: list[str] = []

    def text(key: str, required: bool = True) -> str:
        value = raw.get(key)
        if value is None:
            if required:
                problems.append(f"{key}: required")
            return ""
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            problems.append(f"{key}: expected a string, got {type(value).__name__}")
            return ""
        return str(value)

    model_name = text("name")
    version = text("version")
    family = text("family")
    model_features = text("feature_version")
    fingerprint = text("feature_fingerprint", required=False) or None
    if version and not _VERSION_RE.match(version):
        problems.append(f"version: {version!r} is not a version (letters, digits and . _ + -)")
    if family and family != FAMILY:
        problems.append(f"family: {family!r} is not a model of the {FAMILY!r} family")
    if name is not None and model_name and model_name != name:
        problems.append(f"name: the manifest is for {model_name!r}, expected {name!r}")

    questions = _questions(raw.get("questions"), problems)
    by_id = {q.id: q for q in questions}
    qids = set(by_id)
    for q in questions:
        if q.given is not None and (q.given[0] not in by_id or q.given[1] not in by_id[q.given[0]].options):
            problems.append(f"questions.{q.id}.given: {q.given[0]}={q.given[1]} is not a question and option of this model")
    outputs = _outputs(raw.get("outputs"), qids, problems)
    inputs = _inputs(raw.get("inputs"), problems)
    files = _files(raw.get("files"), directory, require, problems)
    client_files = _files(raw["client_files"], directory, require, problems, "client_files") if "client_files" in raw else {}
    temperature = _temperature(raw.get("temperature"), qids, problems)

    channel, policy = raw.get("channel", "stable"), raw.get("policy") or {}
    wrong = channel_problems(channel, "channel"), policy_problems(policy, "policy")
    problems += [*wrong[0], *wrong[1]]
    channel = "stable" if wrong[0] else channel
    policy = {} if wrong[1] else {k: (None if v is None else float(v)) for k, v in policy.items()}
    opset = raw.get("opset")
    if opset is not None and (not isinstance(opset, int) or isinstance(opset, bool) or opset < 1):
        problems.append(f"opset: expected a positive integer, got {opset!r}")
        opset = None
    mappings: dict[str, Mapping[str, Any]] = {}
    for key in ("tokenizer", "training_data", "metrics"):
        value = raw.get(key, {})
        if not isinstance(value, Mapping):
            problems.append(f"{key}: expected an object, got {type(value).__name__}")
            value = {}
        mappings[key] = value
    familiarity = _familiarity(raw.get("familiarity"), {o.name for o in outputs}, problems)
    explain = raw.get("explain")
    if explain is not None and not isinstance(explain, Mapping):
        problems.append(f"explain: expected an object, got {type(explain).__name__}")
        explain = None

    # The feature check comes first: with the wrong features nothing else matters,
    # and the operator needs to see both versions at once.
    if feature_version is not None and model_features and model_features != str(feature_version):
        raise FeatureVersionMismatch(f"{model_name or '?'}@{version or '?'}", model_features, str(feature_version), source)
    if (feature_version is not None and feature_fingerprint is not None and fingerprint is not None
            and fingerprint != feature_fingerprint):
        raise FeatureVersionMismatch(
            f"{model_name or '?'}@{version or '?'}", f"{model_features} ({fingerprint})",
            f"{feature_version} ({feature_fingerprint})", source,
            detail=" — same version number, different feature tables (a table changed without a version bump)")
    if problems:
        raise ManifestError(problems, source)
    return Manifest(
        name=model_name, version=version, family=family, feature_version=model_features, directory=directory,
        files=files, inputs=inputs, outputs=outputs, questions=questions, temperature=temperature,
        feature_fingerprint=fingerprint, tokenizer=mappings["tokenizer"], training_data=mappings["training_data"],
        metrics=mappings["metrics"], explain=explain, created=str(raw.get("created", "")), opset=opset,
        channel=channel, policy=policy, raw=raw, client_files=client_files, familiarity=familiarity)


def channel_problems(channel: Any, where: str) -> list[str]:
    """``[where: message]`` when ``channel`` is not a release channel (manifests and the training config)."""
    return [] if channel in CHANNELS else [f"{where}: {channel!r} is not one of {', '.join(CHANNELS)}"]


def policy_problems(policy: Any, where: str) -> list[str]:
    """What is wrong with a ``policy`` block of thresholds (manifests and the training config), ``where.key: message`` each."""
    if not isinstance(policy, Mapping):
        return [f"{where}: expected an object of {', '.join(POLICY_KEYS)}, got {type(policy).__name__}"]
    out = []
    for key, value in policy.items():
        if key not in POLICY_KEYS:
            out.append(f"{where}.{key}: not a policy threshold ({', '.join(POLICY_KEYS)})")
        elif value is None and key in ("block_risk", "block_attack_corroborated"):
            continue
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            out.append(f"{where}.{key}: {value!r} is not a probability (0-1)")
    return out


def _questions(value: Any, problems: list[str]) -> tuple[Question, ...]:
    if not isinstance(value, list) or not value:
        problems.append("questions: required, a non-empty list of {id, options}")
        return ()
    out: list[Question] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"questions[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: expected an object with id and options")
            continue
        qid = item.get("id")
        options = item.get("options")
        if not isinstance(qid, str) or not qid:
            problems.append(f"{where}.id: required, a non-empty string")
            continue
        where = f"questions.{qid}"
        if qid in seen:
            problems.append(f"{where}: duplicate question id")
        seen.add(qid)
        if not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o for o in options):
            problems.append(f"{where}.options: required, a list of at least two option names")
            continue
        if len(set(options)) != len(options):
            problems.append(f"{where}.options: duplicate option names")
        given = item.get("given")
        given_pair: tuple[str, str] | None = None
        if given is not None:
            if isinstance(given, Mapping) and isinstance(given.get("question"), str) and isinstance(given.get("option"), str):
                given_pair = (given["question"], given["option"])
            else:
                problems.append(f"{where}.given: expected {{question, option}}")
        out.append(Question(qid, tuple(options), str(item.get("description", "")), given_pair))
    return tuple(out)


def _outputs(value: Any, qids: set[str], problems: list[str]) -> tuple[OutputSpec, ...]:
    if not isinstance(value, list) or not value:
        problems.append("outputs: required, a non-empty list of {name, question}")
        return ()
    out: list[OutputSpec] = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.append(f"outputs[{i}]: expected {{name, question}}")
            continue
        question = item.get("question")
        if question is not None and question not in qids:
            problems.append(f"outputs[{i}].question: {question!r} is not one of the questions ({', '.join(sorted(qids))})")
        out.append(OutputSpec(item["name"], str(question or "")))
    answered = {o.question for o in out}
    for qid in sorted(qids - answered):
        problems.append(f"outputs: no output answers question {qid!r}")
    return tuple(out)


def _inputs(value: Any, problems: list[str]) -> tuple[TensorSpec, ...]:
    if not isinstance(value, list) or not value:
        problems.append("inputs: required, a non-empty list of {name, dtype, shape}")
        return ()
    out: list[TensorSpec] = []
    for i, item in enumerate(value):
        where = f"inputs[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.append(f"{where}: expected {{name, dtype, shape}}")
            continue
        dtype = item.get("dtype")
        if dtype not in _DTYPES:
            problems.append(f"{where}.dtype: {dtype!r} is not one of {', '.join(_DTYPES)}")
        shape = item.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, (int, str)) and not isinstance(d, bool) for d in shape):
            problems.append(f"{where}.shape: expected a list of sizes or axis names")
            shape = []
        out.append(TensorSpec(item["name"], str(dtype), tuple(shape)))
    return tuple(out)


def _files(value: Any, directory: Path, require: tuple[str, ...], problems: list[str], key: str = "files") -> dict[str, ModelFile]:
    if not isinstance(value, Mapping) or not value:
        problems.append(f"{key}: required, an object precision -> file (fp32, int8, fp16)")
        return {}
    out: dict[str, ModelFile] = {}
    for precision, spec in value.items():
        where = f"{key}.{precision}"
        if precision not in PRECISIONS:
            problems.append(f"{where}: unknown precision (known: {', '.join(PRECISIONS)})")
            continue
        if isinstance(spec, str):
            spec = {"path": spec}
        if not isinstance(spec, Mapping) or not isinstance(spec.get("path"), str):
            problems.append(f"{where}: expected a file name or {{path, sha256, size}}")
            continue
        rel = spec["path"]
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            problems.append(f"{where}: {rel!r} must be a plain file name inside the version directory")
            continue
        sha = spec.get("sha256")
        if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
            problems.append(f"{where}.sha256: expected 64 lower-case hex digits")
            sha = None
        size = spec.get("size")
        out[precision] = ModelFile(precision, rel, sha, size if isinstance(size, int) else None)
    for precision in require:
        if precision not in out:
            problems.append(f"{key}.{precision}: required by this runtime but not in the manifest")
        elif not (directory / out[precision].path).is_file():
            problems.append(f"{key}.{precision}: {out[precision].path} is missing from {directory}")
    return out


def _familiarity(value: Any, outputs: set[str], problems: list[str]) -> FamiliarityStats | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.append(f"familiarity: expected an object {{output, threshold}}, got {type(value).__name__}")
        return None
    output, threshold, quantile = value.get("output"), value.get("threshold"), value.get("quantile")
    before = len(problems)
    if not isinstance(output, str) or not output:
        problems.append("familiarity.output: required, the name of the payload graph's distance output")
    elif output in outputs:
        problems.append(f"familiarity.output: {output!r} is a question's output, not a distance")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < float(threshold) < float("inf"):
        problems.append(f"familiarity.threshold: expected a positive number, got {threshold!r}")
    if quantile is not None and (isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0.0 < quantile < 1.0):
        problems.append(f"familiarity.quantile: expected a number between 0 and 1, got {quantile!r}")
    if len(problems) > before or not isinstance(threshold, (int, float)):
        return None
    return FamiliarityStats(str(output), float(threshold), None if quantile is None else float(quantile))


def _temperature(value: Any, qids: set[str], problems: list[str]) -> dict[str, float]:
    if value is None:
        return dict.fromkeys(qids, 1.0)
    if not isinstance(value, Mapping):
        problems.append("temperature: expected an object question -> temperature")
        return {}
    out: dict[str, float] = {}
    for qid, t in value.items():
        if qid not in qids:
            problems.append(f"temperature.{qid}: not a question of this model")
            continue
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0.01 <= float(t) <= 100.0:
            problems.append(f"temperature.{qid}: expected a number between 0.01 and 100, got {t!r}")
            continue
        out[qid] = float(t)
    for qid in qids - set(out):
        out[qid] = 1.0
    return out
