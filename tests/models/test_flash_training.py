"""A tiny Clef-flash trained in seconds: training, calibration, export, parity, runtime, refusals."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from gateway import features as feat
from gateway.decider import manifest as mf
from gateway.decider.onnx import ModelLoadError, OnnxOptions, OnnxScorer
from models import export, train
from models.calibrate import softmax
from models.data.generate import generate
from models.flash import FlashConfig, FlashEnsemble, FlashNet, build

TINY = Path(__file__).resolve().parents[2] / "models" / "configs" / "tiny.yaml"
NAME = "clef-flash-tiny"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    work, repo = root / "work", root / "repo"
    assert train.main(["--config", str(TINY), "--work-dir", str(work), "--repository", str(repo)]) == 0
    return {"work": work, "repo": repo, "version": repo / NAME / "0.0.1"}


def held_out_batch(rows: int = 96) -> tuple[np.ndarray, np.ndarray]:
    inputs = [feat.model_input(feat.from_record(r)) for r in generate("eval", rows, seed=99)]
    return feat.pad_batch(inputs)


def members_config(tmp_path: Path) -> Path:
    """tiny.yaml with two members, trained apart with seeds 3 and 8."""
    config = tmp_path / "tiny-members.yaml"
    config.write_text(TINY.read_text().replace("  trigram_buckets: 512", "  trigram_buckets: 512\n  members: 2")
                      .replace("  select: calibration", "  select: calibration\n  member_seeds: [3, 8]"))
    return config


def load_net(work: Path) -> FlashNet:
    checkpoint = torch.load(work / "model.pt", map_location="cpu", weights_only=False)
    net = FlashNet(FlashConfig(**checkpoint["config"]))
    net.load_state_dict(checkpoint["state_dict"])
    return net.eval()


def test_training_writes_a_complete_version(tiny: dict[str, Path]) -> None:
    m = mf.load(tiny["version"], feature_version=feat.V1_VERSION, feature_fingerprint=feat.V1_FINGERPRINT,
                require=("fp32", "int8", "fp16"), name=NAME)
    for precision in ("fp32", "int8", "fp16"):
        m.verify_file(precision)
    assert (tiny["version"] / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert m.training_data["sha256"] == hashlib.sha256((tiny["work"] / "train.jsonl").read_bytes()).hexdigest()
    assert m.training_data["rows"] == 1200 and m.training_data["eval"]["rows"] == 400
    ev = m.metrics["eval"]["class"]
    assert {"accuracy", "ece_before", "ece_after", "brier_before", "brier_after", "confusion", "per_option"} <= set(ev)
    assert sum(map(sum, ev["confusion"])) == 400
    assert set(m.metrics["eval"]["policy_model_alone"]) >= {"humans_blocked", "humans_challenged", "attacks_blocked"}
    assert m.raw["parity"]["fp32"]["max_abs_prob_diff"] <= 1e-4
    assert all(0.01 <= t <= 100 for t in m.temperature.values())
    assert len(m.explain["weights"]) == 4 and len(m.explain["weights"][0]) == feat.NUM_FEATURES
    assert m.question("attack_kind").given == ("class", "attack")
    assert m.channel == "stable" and mf.resolve(tiny["version"].parents[1], NAME) == tiny["version"]


def test_onnxruntime_matches_torch(tiny: dict[str, Path]) -> None:
    net = load_net(tiny["work"])
    ids, numeric = held_out_batch()
    with torch.no_grad():
        ref = [softmax(t.numpy()) for t in net(torch.from_numpy(ids), torch.from_numpy(numeric))]

    def run(name: str) -> list[np.ndarray]:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        session = ort.InferenceSession(str(tiny["version"] / name), so, providers=["CPUExecutionProvider"])
        return [softmax(o) for o in session.run(None, {"ids": ids, "numeric": numeric})]

    fp32, int8, fp16 = run("model.onnx"), run("model.int8.onnx"), run("model.fp16.onnx")
    for got, want in zip(fp32, ref, strict=True):
        assert np.abs(got - want).max() < 1e-4
    # int8 and fp16 drift a little: compare with a tolerance and on decisions
    for approx, tol in ((int8, 0.03), (fp16, 0.01)):
        assert np.abs(approx[0] - ref[0]).mean() < tol
        assert np.mean(approx[0].argmax(1) == ref[0].argmax(1)) >= 0.95


def test_runtime_applies_the_manifest(tiny: dict[str, Path]) -> None:
    scorer = OnnxScorer(OnnxOptions(repository=tiny["repo"], name=NAME, providers=("cpu",), variant="fp32"))
    assert (scorer.label, scorer.provider, scorer.precision) == (f"{NAME}@0.0.1", "cpu", "fp32")
    rows = [feat.from_record(r) for r in generate("eval", 40, seed=5)]
    probs = scorer.run_batch(rows)
    assert len(probs) == 40 and scorer.run_batch([]) == []
    for p in probs:
        assert list(p) == ["class", "attack_kind"]
        assert list(p["class"]) == ["human", "good_bot", "bad_bot", "attack"]
        for options in p.values():
            assert abs(sum(options.values()) - 1.0) < 1e-6
    inputs = [feat.model_input(f) for f in rows]
    logits = scorer.logits(inputs)
    t = scorer.manifest.temperature["class"]
    expected = softmax(logits["class"], t)
    assert np.allclose([[p["class"][c] for c in ("human", "good_bot", "bad_bot", "attack")] for p in probs], expected, atol=1e-6)
    ungrouped = OnnxScorer(OnnxOptions(repository=tiny["repo"], name=NAME, providers=("cpu",), variant="fp32", group_by_length=False))
    assert np.allclose(ungrouped.logits(inputs)["class"], logits["class"], atol=1e-4)
    int8 = OnnxScorer(OnnxOptions(repository=tiny["repo"], name=NAME, providers=("cpu",)))
    assert int8.precision == "int8"
    explanation = scorer.explain(rows[0])
    assert all(": " in e and "=" in e for e in explanation)


def test_refuses_a_model_of_another_feature_version(tiny: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / NAME / "0.0.9"
    shutil.copytree(tiny["version"], copy)
    raw = json.loads((copy / mf.MANIFEST_FILE).read_text())
    raw["feature_version"] = "0"
    (copy / mf.MANIFEST_FILE).write_text(json.dumps(raw))
    with pytest.raises(mf.FeatureVersionMismatch) as err:
        OnnxScorer(OnnxOptions(repository=tmp_path, name=NAME, providers=("cpu",)))
    assert "feature version '0'" in str(err.value) and f"feature version '{feat.FEATURE_VERSION}'" in str(err.value)


def test_refuses_a_changed_model_file(tiny: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / NAME / "0.0.1"
    shutil.copytree(tiny["version"], copy)
    with (copy / "model.int8.onnx").open("ab") as fh:
        fh.write(b"\0")
    with pytest.raises(mf.ManifestError, match="sha256"):
        OnnxScorer(OnnxOptions(repository=tmp_path, name=NAME, providers=("cpu",)))


def test_no_usable_provider_is_a_clear_error(tiny: dict[str, Path]) -> None:
    if "CUDAExecutionProvider" in ort.get_available_providers():
        try:
            OnnxScorer(OnnxOptions(repository=tiny["repo"], name=NAME, providers=("cuda",)))
            pytest.skip("a CUDA device is present")
        except ModelLoadError as exc:
            assert "cuda:" in str(exc)
    with pytest.raises(ModelLoadError, match="unknown provider"):
        OnnxScorer(OnnxOptions(repository=tiny["repo"], name=NAME, providers=("tpu",)))


def test_export_cli_reexports_a_checkpoint(tiny: dict[str, Path], tmp_path: Path) -> None:
    assert export.main(["--checkpoint", str(tiny["work"] / "model.pt"), "--repository", str(tmp_path), "--version", "0.0.2",
                        "--sample", str(tiny["work"] / "eval.jsonl"), "--channel", "opt-in"]) == 0
    m = mf.load(tmp_path / NAME / "0.0.2", feature_version=feat.V1_VERSION, require=("fp32", "int8", "fp16"))
    assert m.version == "0.0.2" and m.raw["parity"]["int8"]["checked"] and m.channel == "opt-in"
    assert not list(tmp_path.glob(f"{NAME}/.*"))  # the temporary build folder was renamed away


def test_training_history_tracks_the_calibration_side(tiny: dict[str, Path]) -> None:
    """Every epoch reports attacks and humans blocked on unseen sources (what early stopping on in-source rows cannot see)."""
    history = json.loads((tiny["work"] / "metrics.json").read_text())["training"]["epochs"]
    assert history
    for epoch in history:
        side = epoch["calibration_side"]
        assert set(side) == {"0.95", "0.9", "0.8"}
        for attacks, humans in side.values():
            assert 0.0 <= attacks <= 1.0 and 0.0 <= humans <= 1.0
        # a lower threshold blocks at least as much
        assert side["0.8"][0] >= side["0.9"][0] >= side["0.95"][0]


def test_ema_follows_the_network_with_warm_up() -> None:
    torch.manual_seed(0)
    net = FlashNet(FlashConfig(width=16, layers=1, heads=2, ffn=32, embed=4, head_hidden=16, trigram_buckets=64))
    ema = train._Ema(net, 0.99)
    before = [p.detach().clone() for p in ema.net.parameters()]
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    ema.update(net)  # first step: decay min(0.99, 2/11), so the average moves 9/11 of the way
    for b, e in zip(before, ema.net.parameters(), strict=True):
        assert torch.allclose(e, b + 9 / 11, atol=1e-5)
    assert not any(p.requires_grad for p in ema.net.parameters())
    for _ in range(2000):
        ema.update(net)
    for p, e in zip(net.parameters(), ema.net.parameters(), strict=True):
        assert torch.allclose(e, p, atol=1e-4)


def _epoch(val_loss: float, at95: tuple[float, float]) -> dict[str, object]:
    return {"val_loss": val_loss, "calibration_side": {"0.95": at95, "0.9": (at95[0], at95[1]), "0.8": (at95[0], at95[1])}}


def test_calibration_selection_keeps_people_within_the_bound() -> None:
    opt = train.OptimConfig(select="calibration", select_max_humans_blocked=0.001)
    history = [_epoch(0.09, (0.950, 0.0000)), _epoch(0.05, (0.973, 0.0009)), _epoch(0.04, (0.975, 0.0047)), _epoch(0.045, (0.970, 0.0012))]
    # epoch 3 blocks most attacks and has the lowest validation loss, but blocks too many people
    assert train._choose_epoch(history, opt) == 1
    # equal attacks within the bound: the lower validation loss wins
    assert train._choose_epoch([_epoch(0.05, (0.97, 0.0)), _epoch(0.04, (0.97, 0.001))], opt) == 1
    # nobody within the bound: fewest people blocked
    assert train._choose_epoch([_epoch(0.05, (0.99, 0.004)), _epoch(0.06, (0.96, 0.002))], opt) == 1
    assert train._choose_epoch([{"val_loss": 0.1, "calibration_side": {}}], opt) is None


def test_calibration_selection_also_bounds_developer_text() -> None:
    """With Markdown text in the choice, an epoch within the people bound but blocking too much of the text is passed over."""
    opt = train.OptimConfig(select="calibration", select_max_humans_blocked=0.001, select_max_text_blocked=0.004)
    history = [{"val_loss": 0.05, "calibration_side": {"0.95": (0.960, 0.0005, 0.0020)}},
               {"val_loss": 0.04, "calibration_side": {"0.95": (0.975, 0.0005, 0.0090)}},
               {"val_loss": 0.04, "calibration_side": {"0.95": (0.980, 0.0030, 0.0010)}}]
    assert train._choose_epoch(history, opt) == 0
    assert train._choose_epoch(history, train.OptimConfig(select="calibration", select_max_humans_blocked=0.001,
                                                          select_max_text_blocked=0.01)) == 1
    # within the people bound but none within the text bound: the least text, not the most attacks
    strict = train.OptimConfig(select="calibration", select_max_humans_blocked=0.001, select_max_text_blocked=0.001)
    assert train._choose_epoch(history, strict) == 0
    # nobody within the people bound: fewest people, then least text
    over = [{"val_loss": 0.04, "calibration_side": {"0.95": (0.99, 0.002, 0.009)}},
            {"val_loss": 0.05, "calibration_side": {"0.95": (0.97, 0.002, 0.003)}}]
    assert train._choose_epoch(over, strict) == 1


def test_training_config_rejects_an_unknown_selection(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("data:\n  dev_questions: -0.2\n  evasions: 1.0\n  mounts: -0.1\n  xhr_attacks: 1.5\n  rest_writes: 2\nmodel:\n  members: 0\n"
                   "train:\n  select: eval\n  select_threshold: 0.7\n  select_text_rows: -5\n  select_max_text_blocked: 2\n"
                   "export:\n  channel: beta\n  policy: {challenge_risk: 1.5}\n",
                   encoding="utf-8")
    with pytest.raises(SystemExit) as err:
        train.load_config(bad)
    message = str(err.value)
    assert "train.select: 'eval' is not one of validation, calibration" in message
    assert "train.select_threshold: 0.7" in message and "12 problem(s)" in message
    assert "export.policy.challenge_risk: 1.5 is not a probability (0-1)" in message
    assert "export.channel: 'beta' is not one of stable, opt-in" in message
    assert "model.members: 0 is not a number of networks" in message
    assert "train.select_text_rows: -5 is negative" in message and "train.select_max_text_blocked: 2" in message
    assert "data.dev_questions: -0.2 is not a fraction" in message
    assert "data.evasions: 1.0 is not a fraction below 1" in message and "data.rest_writes: expected true or false" in message
    assert "data.mounts: -0.1 is not a fraction below 1" in message
    assert "data.xhr_attacks: 1.5 is not a fraction (0-1)" in message


def test_distillation_options_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.read_text().replace("  select: calibration", "  select: calibration\n  distill_from: clef-flash 1.7.0\n"
                                            "  distill_weight: 1.5").replace("  trigram_buckets: 512", "  trigram_buckets: 512\n  members: 2")
                   .replace("  threads: 1", "  threads: 1\n  member_seeds: [3, 8]"), encoding="utf-8")
    with pytest.raises(SystemExit) as err:
        train.load_config(bad)
    message = str(err.value)
    assert "3 problem(s)" in message
    assert "train.distill_weight: 1.5 is not a fraction in (0, 1]" in message
    assert "train.distill_from: 'clef-flash 1.7.0' is not <name>@<version>" in message
    assert "train.distill_from: distils into one network; model.members must be 1" in message


def test_a_teacher_that_agrees_with_the_labels_changes_nothing() -> None:
    """The distillation target mixes the label with the teacher: a teacher answering the labels leaves the loss as it was,
    and a teacher that disagrees pulls the network towards its own answer."""
    torch.manual_seed(0)
    logits = torch.randn(6, 4, requires_grad=True)
    kind_logits = torch.randn(6, 6)
    y = torch.tensor([0, 1, 2, 3, 0, 3])
    kind = torch.tensor([-1, -1, -1, 2, -1, 5])
    w = torch.ones(6)
    opt = train.OptimConfig(distill_weight=0.7)
    plain = train.loss_fn((logits, kind_logits), y, kind, w, opt)
    agreeing = train.loss_fn((logits, kind_logits), y, kind, w, opt, torch.nn.functional.one_hot(y, 4).float())
    assert torch.allclose(plain, agreeing, atol=1e-6)
    teacher = torch.full((6, 4), 0.25)  # a teacher unsure of everything
    (grad_label,) = torch.autograd.grad(plain, logits)
    (grad_teacher,) = torch.autograd.grad(train.loss_fn((logits, kind_logits), y, kind, w, opt, teacher), logits)
    rows = torch.arange(6)
    # towards the label, less steeply: the unsure teacher asks for less confidence in it
    assert (grad_label[rows, y] < 0).all() and (grad_teacher[rows, y] > grad_label[rows, y]).all()


def test_a_student_learns_from_a_teacher_version(tiny: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """distill_from: the teacher's calibrated probabilities (its fp32 file) on the training rows; recorded in the manifest."""
    repo = tmp_path / "repo"
    shutil.copytree(tiny["repo"], repo)
    config = tmp_path / "student.yaml"
    config.write_text(TINY.read_text().replace("  select: calibration",
                                               f"  select: calibration\n  distill_from: {NAME}@0.0.1\n  distill_weight: 0.6"),
                      encoding="utf-8")
    work = tmp_path / "work"
    assert train.main(["--config", str(config), "--work-dir", str(work), "--repository", str(repo), "--version", "0.0.2",
                       "--hide-eval"]) == 0
    log = capfd.readouterr().err
    assert f"distill: {NAME}@0.0.1 (fp32, T " in log and "target = 0.4 x label + 0.6 x teacher" in log
    student = mf.load(repo / NAME / "0.0.2")
    teacher = mf.load(repo / NAME / "0.0.1")
    recorded = student.training_data["distilled_from"]
    assert recorded["model"] == f"{NAME}@0.0.1" and recorded["weight"] == 0.6
    assert recorded["sha256"] == teacher.files["fp32"].sha256 == mf.file_sha256(teacher.path("fp32"))
    # the targets are what the gateway's scorer answers with the teacher
    cfg = train.load_config(config)
    cfg.export.repository = str(repo)
    enc = train.encode(list(generate("train", 40, seed=5)))
    probs, info = train.teacher_probabilities(cfg, enc, lambda msg: None, batch_size=16)
    scorer = OnnxScorer(OnnxOptions(repository=repo, name=NAME, version="0.0.1", providers=("cpu",), variant="fp32"))
    want = np.array([[p["class"][c] for c in train.CLASSES] for p in scorer.run_inputs(enc.inputs)])
    assert np.allclose(probs.numpy(), want, atol=1e-6)
    assert info["agreement_with_labels"] == round(float((want.argmax(1) == enc.labels).mean()), 5)
    assert {k: v for k, v in info.items() if k != "agreement_with_labels"} == {k: recorded[k] for k in info if k != "agreement_with_labels"}
    # a student trained on the labels alone differs: the teacher was used
    plain = tmp_path / "plain"
    assert train.main(["--config", str(TINY), "--work-dir", str(plain), "--no-export", "--hide-eval"]) == 0
    a = torch.load(plain / "model.pt", map_location="cpu", weights_only=False)["state_dict"]
    b = torch.load(work / "model.pt", map_location="cpu", weights_only=False)["state_dict"]
    assert (work / "train.jsonl").read_bytes() == (plain / "train.jsonl").read_bytes()
    assert not all(torch.equal(a[k], b[k]) for k in a)
    # a teacher that is not there is named, with the versions that are
    missing = tmp_path / "missing.yaml"
    missing.write_text(config.read_text().replace("@0.0.1", "@9.9.9"), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"(?s)train.distill_from: clef-flash-tiny@9.9.9: .*version .9.9.9. not found.*available: 0.0.1"):
        train.main(["--config", str(missing), "--work-dir", str(tmp_path / "m"), "--repository", str(repo), "--no-export"])


def test_the_choice_reads_markdown_text_when_asked(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """select_text_rows: people's Markdown text (never trained on) is scored every epoch and recorded with the data."""
    config = tmp_path / "tiny-text.yaml"
    config.write_text(TINY.read_text().replace("  select: calibration", "  select: calibration\n  select_text_rows: 150"))
    assert "seed: 3" in config.read_text()
    assert train.main(["--config", str(config), "--work-dir", str(tmp_path / "work"), "--no-export", "--hide-eval", "--seed", "4"]) == 0
    log = capfd.readouterr().err
    assert "150 people's Markdown text rows for the epoch choice" in log and "Markdown text blocked" in log
    metrics = json.loads((tmp_path / "work" / "metrics.json").read_text())
    epochs = metrics["training"]["epochs"]
    assert all(len(e["calibration_side"]["0.95"]) == 3 for e in epochs)
    # the third figure is a share of the 150 people: a whole number of them
    assert all(abs(e["calibration_side"][t][2] * 150 - round(e["calibration_side"][t][2] * 150)) < 0.01
               for e in epochs for t in ("0.95", "0.9", "0.8"))
    assert f"Markdown text blocked {epochs[metrics['training']['chosen_epoch'] - 1]['calibration_side']['0.95'][2]:.4f}" in log.split("weights of epoch")[1]
    # the rows are the file the recorded generator command writes, with the run's seed (--seed 4 over tiny.yaml's 3)
    from models.data import realtext
    from models.data.generate import generate

    assert realtext.main(["--source", "markdown", "--rows", "150", "--seed", "4", "--out", str(tmp_path / "md.jsonl")]) == 0
    train_rows = (tmp_path / "work" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in train_rows[:50]] == list(generate("train", 50, seed=4))
    assert (tmp_path / "work" / "choice_text.jsonl").read_bytes() == (tmp_path / "md.jsonl").read_bytes()


def test_the_chosen_epoch_is_recorded(tiny: dict[str, Path]) -> None:
    training = json.loads((tiny["work"] / "metrics.json").read_text())["training"]
    assert training["selected_by"] == "calibration"
    assert 1 <= training["chosen_epoch"] <= len(training["epochs"])


def test_hide_eval_keeps_the_held_out_figures_out_of_the_log(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """An experiment trained with --hide-eval logs no held-out figure, yet measures and records them."""
    assert train.main(["--config", str(TINY), "--work-dir", str(tmp_path), "--no-export", "--hide-eval"]) == 0
    log = capfd.readouterr().err
    assert "held-out eval: measured" in log and "held-out eval: accuracy" not in log and "attacks_blocked" not in log
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert 0 <= metrics["eval"]["class"]["accuracy"] <= 1 and "policy_model_alone" in metrics["eval"]


def test_an_ensemble_answers_with_the_mean_of_its_members() -> None:
    """members: M answers log(mean of the members' probabilities): softmax of the outputs is their mean."""
    torch.manual_seed(0)
    cfg = FlashConfig(width=16, layers=1, heads=2, ffn=32, embed=4, head_hidden=16, trigram_buckets=64, members=3)
    net = build(cfg).eval()
    assert isinstance(net, FlashEnsemble) and len(net.member_nets()) == 3
    assert isinstance(build(FlashConfig(width=16, layers=1, heads=2, ffn=32, embed=4, head_hidden=16, trigram_buckets=64)), FlashNet)
    for m in net.member_nets():  # each member initialised on its own
        torch.nn.init.normal_(m.numeric_linear.weight, std=0.5)
    ids, numeric = held_out_batch(12)
    with torch.no_grad():
        outs = net(torch.from_numpy(ids), torch.from_numpy(numeric))
        members = [m(torch.from_numpy(ids), torch.from_numpy(numeric)) for m in net.member_nets()]
    assert not torch.equal(members[0][0], members[1][0])
    for q, out in enumerate(outs):
        want = np.mean([softmax(m[q].numpy()) for m in members], axis=0)
        assert np.abs(softmax(out.numpy()) - want).max() < 1e-5
    weights = torch.stack([m.numeric_linear.weight for m in net.member_nets()]).mean(0)
    assert torch.allclose(net.explain_weight(), weights)
    with pytest.raises(ValueError, match="members must be at least 1"):
        build(FlashConfig(members=0))


def test_members_train_export_and_run(tmp_path: Path) -> None:
    """A two-member tiny model trains, exports one file per precision that matches torch, and the gateway runs it."""
    config = members_config(tmp_path)
    repo = tmp_path / "repo"
    assert train.main(["--config", str(config), "--work-dir", str(tmp_path / "work"), "--repository", str(repo), "--hide-eval"]) == 0
    # each member is the run its seed gives on its own: same rows, same weights
    single = tmp_path / "single"
    assert train.main(["--config", str(TINY), "--work-dir", str(single), "--seed", "8", "--no-export", "--hide-eval"]) == 0
    alone = torch.load(single / "model.pt", map_location="cpu", weights_only=False)["state_dict"]
    second = torch.load(tmp_path / "work" / "member-2" / "model.pt", map_location="cpu", weights_only=False)["state_dict"]
    assert all(torch.equal(alone[k], second[k]) for k in alone)
    assert (single / "train.jsonl").read_bytes() == (tmp_path / "work" / "member-2" / "train.jsonl").read_bytes()
    checkpoint = torch.load(tmp_path / "work" / "model.pt", map_location="cpu", weights_only=False)
    net = build(FlashConfig(**checkpoint["config"]))
    net.load_state_dict(checkpoint["state_dict"])
    net.eval()
    a, b = net.member_nets()
    assert not torch.equal(a.stem.weight, b.stem.weight)
    m = mf.load(repo / NAME / "0.0.1", feature_version=feat.V1_VERSION, feature_fingerprint=feat.V1_FINGERPRINT,
                require=("fp32", "int8", "fp16"), name=NAME)
    assert m.raw["architecture"]["members"] == 2
    assert [d["generator"].split("--seed ")[1] for d in m.training_data["members"]] == ["3", "8"]
    assert [r["chosen_epoch"] >= 1 for r in m.metrics["training"]["members"]] == [True, True]
    assert m.raw["parity"]["fp32"]["max_abs_prob_diff"] <= 1e-4 and m.raw["parity"]["int8"]["class_agreement"] >= 0.95
    assert len(m.explain["weights"]) == 4 and len(m.explain["weights"][0]) == feat.NUM_FEATURES
    # the gateway's scorer: the members' mean, at the manifest's temperature
    scorer = OnnxScorer(OnnxOptions(repository=repo, name=NAME, providers=("cpu",), variant="fp32"))
    inputs = [feat.model_input(feat.from_record(r)) for r in generate("eval", 8, seed=99)]
    # the finished member runs assemble into the same files again (members trained one by one, or elsewhere),
    # here as an opt-in version, which a config must name
    again = tmp_path / "again"
    opt_in = tmp_path / "opt-in.yaml"
    opt_in.write_text(config.read_text() + "  channel: opt-in\n", encoding="utf-8")
    assert train.main(["--config", str(opt_in), "--work-dir", str(tmp_path / "work"), "--repository", str(again), "--hide-eval",
                       "--assemble-only"]) == 0
    assert (again / NAME / "0.0.1" / "model.onnx").read_bytes() == (repo / NAME / "0.0.1" / "model.onnx").read_bytes()
    assert mf.load(mf.resolve(again, NAME, "0.0.1")).channel == "opt-in"
    with pytest.raises(mf.ManifestError, match="opt-in; name its version in the config"):
        mf.resolve(again, NAME)
    # a re-export keeps the channel the training config gave (no silent switch of every 'latest' config)
    assert export.main(["--checkpoint", str(tmp_path / "work" / "model.pt"), "--repository", str(tmp_path / "re"),
                        "--sample", str(tmp_path / "work" / "eval.jsonl")]) == 0
    assert mf.load(tmp_path / "re" / NAME / "0.0.1").channel == "opt-in"
    with pytest.raises(SystemExit, match="no finished member run"):
        train.main(["--config", str(config), "--work-dir", str(tmp_path / "none"), "--no-export", "--assemble-only"])
    got = np.array([[p["class"][c] for c in ("human", "good_bot", "bad_bot", "attack")] for p in scorer.run_inputs(inputs)])
    ids, numeric = feat.pad_batch(inputs)
    with torch.no_grad():
        logits = net(torch.from_numpy(ids), torch.from_numpy(numeric))[0].numpy()
    assert np.allclose(got, softmax(logits, m.temperature["class"]), atol=1e-4)


def test_member_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Member settings that cannot mean anything are refused before any work, with the reason."""
    config = members_config(tmp_path)
    work = ["--work-dir", str(tmp_path / "w"), "--no-export"]
    for argv, reason in ((["--config", str(config), "--member", "3"], "the config has 2 member(s)"),
                         (["--config", str(config), "--member-seeds", "4,4"], "give 2 different seeds"),
                         (["--config", str(config), "--member-seeds", "4,x"], "not a comma-separated list"),
                         (["--config", str(TINY), "--assemble-only"], "needs a model.members > 1 config")):
        with pytest.raises(SystemExit) as err:
            train.main([*argv, *work])
        assert err.value.code == 2 and reason in capsys.readouterr().err, argv
    bad = tmp_path / "bad.yaml"
    bad.write_text(config.read_text().replace("member_seeds: [3, 8]", "member_seeds: [3]\n  member_parallel: 0"))
    with pytest.raises(SystemExit) as err:
        train.load_config(bad)
    assert "train.member_seeds: 2 members need 2 different seeds, got [3]" in str(err.value)
    assert "train.member_parallel: 0 is not a number of runs" in str(err.value)
    assert not (tmp_path / "w").exists()


def test_stopping_the_run_stops_its_members(tmp_path: Path) -> None:
    """SIGTERM to a members run (a plain ``kill``) ends the member runs it started, not only itself."""
    import os
    import signal
    import subprocess
    import sys
    import time

    config = members_config(tmp_path)
    # members that take minutes to generate their rows, so none can finish before it is stopped, however slow the host
    config.write_text(config.read_text().replace("generated_rows: 1200", "generated_rows: 2000000"))
    work = tmp_path / "work"

    def members_running() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if entry.name.isdigit() and str(work).encode() in cmdline and b"--member\x00" in cmdline:
                found.append(int(entry.name))
        return found

    parent = subprocess.Popen([sys.executable, "-m", "models.train", "--config", str(config), "--work-dir", str(work), "--no-export"],
                              cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not members_running() and time.time() < deadline and parent.poll() is None:
        time.sleep(0.05)
    assert members_running(), "the members never started"
    os.kill(parent.pid, signal.SIGTERM)
    assert parent.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.time() + 10
    while members_running() and time.time() < deadline:
        time.sleep(0.1)
    assert members_running() == []
    assert not (work / "member-1" / "model.pt").exists() and not (work / "member-2" / "model.pt").exists()
