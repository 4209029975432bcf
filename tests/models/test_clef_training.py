"""clef's training side: data generation, a tiny end-to-end training + export run, ONNX/torch parity.

The tiny run uses a random 2-layer backbone so that it trains and exports in seconds;
the parity test at the end uses the real MiniLM backbone with the shipped adapters
against the shipped int8 encoder.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gateway.clef import Question, QuestionSet, ZeroShotModel, hypothesis_text
from models.clef import calibration, data, evaluate, export, train
from models.clef.tasks import TASKS

SHIPPED = Path(__file__).resolve().parents[2] / "models" / "repository" / "clef" / "1"


def test_generation_is_reproducible_and_holds_families_out() -> None:
    a, b = data.generate(states=300, seed=7), data.generate(states=300, seed=7)
    assert a.sha256() == b.sha256() and a.rows == b.rows
    assert data.generate(states=300, seed=8).sha256() != a.sha256()
    train_tasks = {r.task for r in a.train}
    held = {r.task for r in a.val + a.calib}
    assert held <= set(data.HELD_OUT) and not (train_tasks & set(data.HELD_OUT))
    assert {r.qtype for r in a.train} == {"choice", "bool"}
    for r in a.train[:200]:
        if r.qtype == "choice":
            assert 0 <= r.label < len(r.options) and len(set(r.options)) == len(r.options)
        else:
            assert r.label in (0, 1) and r.options == ()


def test_zero_shot_suite_is_disjoint_from_the_training_families() -> None:
    suite = evaluate.load_suite()
    assert {t.name for t in suite} == {"ticket_urgency", "log_anomaly", "content_moderation", "support_intent"}
    assert all(len(t.examples) >= 30 for t in suite)
    family_names = {t.name for t in TASKS}
    suite_options = {o.lower() for t in suite for o in t.question.options}
    train_options = {o.lower() for t in TASKS for o in t.options}
    assert not family_names & {t.name for t in suite}
    assert not suite_options & train_options
    generated = {r.state for r in data.generate(states=500).train}
    assert not generated & {s for t in suite for s, _ in t.examples}


def test_temperature_fit_recovers_a_known_temperature() -> None:
    rng = np.random.default_rng(0)
    logits, labels = [], []
    for _ in range(3000):
        true = rng.normal(size=3) * 2.0
        y = int(rng.choice(3, p=calibration.softmax(true)))
        logits.append(true * 3.0)  # overconfident by a factor 3
        labels.append(y)
    assert calibration.fit_temperature(logits, labels) == pytest.approx(3.0, rel=0.1)
    conf = np.array([0.9] * 10)
    assert calibration.ece(conf, np.array([1.0] * 9 + [0.0])) == pytest.approx(0.0, abs=1e-9)
    assert calibration.ece(conf, np.zeros(10)) == pytest.approx(0.9)


@pytest.fixture(scope="module")
def tiny_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, tiny_work: Path) -> Path:
    work = tiny_work
    repo = tmp_path_factory.mktemp("repo")
    assert train.main(["--tiny", "--states", "80", "--epochs", "1", "--batch", "8", "--eval-every", "4", "--threads", "1",
                       "--out", str(work)]) == 0
    assert export.main(["--tiny", "--work", str(work), "--repository", str(repo), "--version", "t", "--precisions", "fp32,int8",
                        "--no-suite"]) == 0
    return repo / "t"


def test_tiny_training_writes_a_loadable_model(tiny_model: Path, tiny_work: Path) -> None:
    manifest = json.loads((tiny_model / "manifest.json").read_text())
    assert manifest["family"] == "clef" and manifest["questions"] == []
    assert set(manifest["files"]) == {"fp32", "int8"}  # fp16 not asked for, so not listed
    assert all(len(f["sha256"]) == 64 and f["size"] > 0 for f in manifest["files"].values())
    assert manifest["training_data"]["rows"] > 0 and len(manifest["training_data"]["sha256"]) == 64
    assert set(manifest["temperature"]) == {"choice", "bool"} and all(t > 0 for t in manifest["temperature"].values())
    report = json.loads((tiny_work / "train_report.json").read_text())
    assert report["history"] and report["prior_val"]["choice"]["n"] > 0
    assert (tiny_model / "reliability.png").stat().st_size > 1000
    assert manifest["metrics"]["fused_nodes"] < 60  # attention fused: the 2-layer graph is a few dozen nodes


def _torch_reference(model_dir: Path, texts: list[str], tiny: bool) -> tuple[np.ndarray, object]:
    manifest = json.loads((model_dir / "manifest.json").read_text())
    config = {k: v for k, v in manifest["adapters"].items() if k not in ("path", "sha256", "size")}
    net = export.build_net(model_dir / "adapters.npz", {"config": config}, tiny=tiny)
    tok = train.load_tokenizer(model_dir / "tokenizer.json")
    encs = tok.encode_batch(texts, add_special_tokens=True)
    ids, mask = train._pad([e.ids for e in encs])
    with torch.no_grad():
        return net.embed(ids, mask).numpy(), net


def test_tiny_onnx_matches_torch(tiny_model: Path) -> None:
    texts = ["the kettle is boiling", "a much longer sentence about trains, weather and the price of bread in town", "ok"]
    ref, net = _torch_reference(tiny_model, texts, tiny=True)
    fp32 = ZeroShotModel.load(tiny_model, device="cpu", precision="fp32", warmup=False)
    int8 = ZeroShotModel.load(tiny_model, device="cpu", precision="int8", warmup=False)
    assert np.abs(fp32.embed_texts(texts) - ref).max() < 1e-4
    cos = (int8.embed_texts(texts) * ref).sum(axis=1)
    assert cos.min() > 0.9
    # the numpy routing head computes what the torch head computes
    q = Question("q", ("boiling kettle", "bread price", "train"), "what is it about")
    hyps = [hypothesis_text(q.criteria, o) for o in q.options]
    h_ref, _ = _torch_reference(tiny_model, hyps, tiny=True)
    with torch.no_grad():
        s, h = torch.from_numpy(ref[:1]), torch.from_numpy(h_ref)
        logits = (net.pair_logits(s, h)[0] + net.contrast_logits(s[0], h)).numpy()  # type: ignore[attr-defined]
    t = fp32.temperature["choice"]
    ((answer,),) = fp32.answer([QuestionSet(texts[0], (q,))])
    assert [answer.probabilities[o] for o in q.options] == pytest.approx(list(calibration.softmax(logits, t)), abs=1e-4)


@pytest.mark.skipif(not (SHIPPED / "adapters.npz").is_file(), reason="shipped clef model not present")
def test_shipped_int8_encoder_matches_torch_with_the_shipped_adapters() -> None:
    texts = ["FATAL: the database crashed and every request fails.", "Please end my membership at the end of the month.",
             "Thanks everyone, the sourdough finally rose this weekend!", "ok"]
    ref, _ = _torch_reference(SHIPPED, texts, tiny=False)
    model = ZeroShotModel.load(SHIPPED, device="cpu", warmup=False)
    cos = (model.embed_texts(texts) * ref).sum(axis=1)
    assert cos.min() > 0.97, cos
