"""gateway.tools.evaluate (`clefgate eval`): three systems in one run, the metrics, the table and the JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gateway import features as feat
from gateway.tools import evaluate as ev
from gateway.verdict import Probabilities

CLASSES = ("human", "good_bot", "bad_bot", "attack")
# path prefix -> the class probabilities the fake model answers
ANSWERS = {
    "/page": (0.97, 0.01, 0.01, 0.01),        # confident human
    "/odd": (0.30, 0.05, 0.60, 0.05),          # risk 0.65: challenged
    "/scrape": (0.05, 0.05, 0.85, 0.05),       # bad bot: challenged
    "/inject": (0.01, 0.0, 0.01, 0.98),        # attack: blocked
    "/weak": (0.10, 0.0, 0.20, 0.70),          # attack, not sure: challenged only
    "/feed": (0.20, 0.20, 0.55, 0.05),         # risk 0.60: challenged by the model alone
}


class FakeScorer:
    """Answers by path prefix; records what it was asked."""

    label = "fake@1"
    provider = "cpu"
    precision = "fp32"

    def __init__(self) -> None:
        self.calls = 0

    def run_inputs(self, inputs: Sequence[feat.ModelInput]) -> list[Probabilities]:
        self.calls += 1
        out: list[Probabilities] = []
        for mi in inputs:
            target = mi.text.split("\n", 1)[0].split(" ", 1)[1]
            probs = next(v for k, v in ANSWERS.items() if target.startswith(k))
            out.append({"class": dict(zip(CLASSES, probs, strict=True)),
                        "attack_kind": {"sqli": 0.9, "xss": 0.02, "traversal": 0.02, "cmdi": 0.02, "probe": 0.02, "other": 0.02}})
        return out


def record(path: str, label: str, **extra: Any) -> dict[str, Any]:
    return {"method": "GET", "path": path, "http_version": "1.1", "headers": [["Host", "a.example"], ["User-Agent", "x"]],
            "body": None, "client_ip": "198.51.100.9", "label": label, **extra}


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - name: allow-feeds\n    path: ['/feed', '/feed/**']\n    action: allow\n"
        "  - name: block-env\n    path: ['/**/.env']\n    action: block\n"
        "  - name: score-the-rest\n    action: score\n")
    cfg = tmp_path / "clefgate.yaml"
    cfg.write_text(f"rules:\n  files: [{rules}]\npolicy:\n  block_attack: 0.95\n  challenge_risk: 0.6\n")
    rows = [record("/page/1", "human")] * 6 + [record("/odd/1", "human")] * 2 + [record("/scrape/1", "bad_bot")] * 3 + [
        record("/page/2", "bad_bot"), record("/inject?q=0x61646d696e", "attack", attack_kind="sqli"), record("/weak/.env", "attack"),
        record("/weak/1", "attack"), record("/feed", "good_bot", verified=True), record("/page/3", "good_bot", verified=False),
        record("/scrape/2", "good_bot", verified=True)]
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n{broken\n" + json.dumps({**rows[0], "label": None}) + "\n")
    return {"config": cfg, "data": data}


def run(setup: dict[str, Path]) -> dict[str, Any]:
    cfg = ev.load_config(setup["config"])
    skipped = ev.Skipped()
    rows = ev.read_rows(setup["data"], skipped)
    assert skipped.counts == {"invalid JSON": 1, "no label (human, good_bot, bad_bot, attack)": 1}
    return ev.evaluate(rows, cfg, FakeScorer())


def test_lines_no_request_can_be_read_from_are_skipped_and_counted(tmp_path: Path) -> None:
    good = json.dumps(record("/page/1", "human"))
    data = tmp_path / "odd.jsonl"
    data.write_bytes(b"\n".join([
        good.encode(),
        b'{"n": ' + b"[" * 100_000 + b"}",                                         # nested past the parser's depth
        b'{"n": ' + b"1" * 5000 + b"}",                                            # a number past Python's digit limit
        json.dumps(record("/x", "human", headers=[["Host"]])).encode(),           # a header without a value
        json.dumps({**record("/x", "human"), "input": {"feature_version": feat.V1_VERSION, "text": "x",
                                                        "numeric": [None] * feat.NUM_FEATURES}}).encode(),  # a broken logged input
        json.dumps(record("/caf\u00e9", "human")).encode().replace(b"\\u00e9", b"\xe9"),  # not UTF-8
    ]) + b"\n")
    skipped = ev.Skipped()
    rows = ev.read_rows(data, skipped)
    assert len(rows) == 1
    assert skipped.counts == {"invalid JSON": 2, "unreadable record (ValueError)": 1, "unreadable record (TypeError)": 1,
                              "not UTF-8": 1}


def test_three_systems_in_one_run(setup: dict[str, Path]) -> None:
    result = run(setup)
    s = result["systems"]
    assert result["n"] == 18 and result["labels"] == {"human": 8, "good_bot": 3, "bad_bot": 4, "attack": 3}
    # rules + model: /weak/.env blocked by the rule, /feed allowed by the rule, the rest by the policy
    assert s["rules_model"]["decided_by_rules"] == 2 and s["rules_model"]["scored_by_model"] == 16
    assert s["rules_model"]["matrix"] == {
        "human": {"forward": 6, "challenge": 2, "block": 0}, "good_bot": {"forward": 2, "challenge": 1, "block": 0},
        "bad_bot": {"forward": 1, "challenge": 3, "block": 0}, "attack": {"forward": 0, "challenge": 1, "block": 2}}
    assert result["humans_challenged"] == pytest.approx(2 / 8) and result["humans_blocked"] == 0.0
    assert result["attacks_blocked"] == pytest.approx(2 / 3) and result["bad_bots_stopped"] == pytest.approx(3 / 4)
    assert result["good_bots_passed"] == pytest.approx(2 / 3) and result["verified_good_bots_passed"] == pytest.approx(1 / 2)
    assert result["accuracy"] == pytest.approx((6 + 2 + 3 + 2) / 18)
    # the model alone challenges the feed reader and misses the .env probe's block
    assert s["model"]["matrix"]["good_bot"] == {"forward": 1, "challenge": 2, "block": 0}
    assert s["model"]["attacks_blocked"] == pytest.approx(1 / 3)
    # rules only forward everything the rules leave open
    assert s["rules_only"]["matrix"]["attack"] == {"forward": 2, "challenge": 0, "block": 1}
    assert s["rules_only"]["humans_challenged"] == 0.0 and s["rules_only"]["ece"] is None
    assert result["rule_hits"] == {"allow-feeds": 1, "block-env": 1}
    assert result["targets"]["humans_challenged"]["met"] is False and result["targets"]["humans_blocked"]["met"] is True


def test_class_metrics_and_calibration(setup: dict[str, Path]) -> None:
    result = run(setup)
    mc = result["model_class"]
    assert mc["confusion"]["human"] == {"human": 6, "good_bot": 0, "bad_bot": 2, "attack": 0}
    assert mc["per_class"]["attack"] == {"precision": 1.0, "recall": 1.0, "support": 3}
    assert mc["per_class"]["good_bot"]["recall"] == 0.0
    assert result["attack_kind_accuracy"] == 1.0
    probs = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.6, 0.4]])
    labels = np.array([0, 1, 0, 0])
    ece, brier = ev._softmax_ece(probs, labels)
    # bin 0.9: accuracy 0.5 vs 0.9 (half the rows); bin 0.6: accuracy 1.0 vs 0.6 (half)
    assert ece == pytest.approx(0.5 * 0.4 + 0.5 * 0.4)
    assert brier == pytest.approx(np.mean([0.02, 1.62, 0.32, 0.32]))


def test_shadow_policies_count_what_would_be_enforced(setup: dict[str, Path]) -> None:
    text = setup["config"].read_text().replace("policy:\n", "policy:\n  shadow: true\n")
    setup["config"].write_text(text)
    assert run(setup)["systems"]["rules_model"]["matrix"]["attack"]["block"] == 2


def test_a_route_policy_applies_as_in_the_gateway(setup: dict[str, Path]) -> None:
    # people's /odd requests (risk 0.65) are challenged by the default policy; their route's policy asks more
    text = setup["config"].read_text().replace("policy:\n", "policy:\n  routes:\n    lenient: {challenge_risk: 0.8}\n")
    setup["config"].write_text(text + "backends: {app: {servers: ['http://127.0.0.1:9']}}\n"
                               "routes:\n  - {path_prefix: /odd, backend: app, policy: lenient}\n")
    s = run(setup)["systems"]
    assert s["rules_model"]["matrix"]["human"]["challenge"] == 0
    assert s["model"]["matrix"]["human"]["challenge"] == 0
    assert s["rules_model"]["matrix"]["bad_bot"]["challenge"] == 3  # /scrape (risk 0.90) is on no such route


@pytest.mark.parametrize("corroborated,blocked", [(0.4, 3), (0.8, 2), (None, 2)])
def test_a_fallback_rule_corroborates_as_in_the_gateway(setup: dict[str, Path], corroborated: float | None, blocked: int) -> None:
    signatures = setup["config"].parent / "signatures.yaml"
    signatures.write_text("rules:\n  - name: weak-signature\n    path: ['/weak/**']\n    action: block\n")
    text = setup["config"].read_text().replace("policy:\n", f"policy:\n  block_attack_corroborated: {corroborated or 'null'}\n")
    setup["config"].write_text(text.replace("rules:\n", f"rules:\n  fallback_files: [{signatures}]\n"))
    result = run(setup)
    s = result["systems"]
    # /weak/1 (P(attack) 0.70) is blocked when the floor is at or under 0.70 and the signature matches
    assert s["rules_model"]["matrix"]["attack"]["block"] == blocked
    assert result["policy_blocks"] == {"p_attack": 1, "combined_risk": 0, "corroborated": blocked - 2,
                                       "corroborating_rules": {"weak-signature": 1} if blocked == 3 else {},
                                       "held_back": {"unfamiliar": 0, "no_syntax": 0},
                                       "syntaxless": {"human": 0, "good_bot": 0, "bad_bot": 0, "attack": 0}}
    assert ("corroborated by a fallback rule 1 (weak-signature 1)" in ev.render(result, "d")) is (blocked == 3)
    assert s["model"]["matrix"]["attack"]["block"] == 1  # the model alone has no rules to corroborate it
    assert s["rules_only"]["matrix"]["attack"]["block"] == 2  # the fallback rule decides when the model is down


@pytest.mark.filterwarnings("error::RuntimeWarning")  # an empty group is never averaged (NaN)
def test_report_and_json_from_the_command_line(setup: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("gateway.decider.onnx.OnnxScorer", lambda options: FakeScorer())
    assert ev.main(["--data", str(setup["data"]), "--config", str(setup["config"]), "--json"]) == 0
    printed = capsys.readouterr().out

    def no_nan(constant: str) -> None:
        raise AssertionError(f"--json printed {constant}, which is not JSON")

    out = json.loads(printed, parse_constant=no_nan)
    for key in ("humans_blocked", "humans_challenged", "attacks_blocked", "bad_bots_stopped", "good_bots_passed", "accuracy", "ece", "n"):
        assert key in out
    # a client-context group without rows reports no accuracy rather than NaN
    assert any(group["n"] == 0 and group["attacks_blocked"] is None for group in out["by_client_context"].values())
    assert out["n"] == 18 and out["skipped"] and out["model"] == "fake@1"
    assert ev.main(["--data", str(setup["data"]), "--config", str(setup["config"])]) == 0
    table = capsys.readouterr().out
    for text in ("rules+model", "model alone", "rules only", "humans blocked", "humans challenged", "attacks blocked",
                 "bad bots challenged or blocked", "ECE (class, 15 bins)", "confusion", "targets missed: humans_challenged"):
        assert text in table


def test_compare_setups_and_files_side_by_side(setup: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Several configs, model versions and files: every setup on every file in one run, differences from the first."""
    asked: list[str] = []

    def scorer(options: Any) -> FakeScorer:
        asked.append(options.version)
        return FakeScorer()

    monkeypatch.setattr("gateway.decider.onnx.OnnxScorer", scorer)
    reads: list[str] = []
    read_rows = ev.read_rows
    monkeypatch.setattr(ev, "read_rows", lambda path, *a: reads.append(path.name) or read_rows(path, *a))
    strict = tmp_path / "strict.yaml"  # the same rules, challenging from risk 0.3: /odd and /feed are challenged anyway
    strict.write_text(setup["config"].read_text().replace("challenge_risk: 0.6", "challenge_risk: 0.3")
                      + "  block_risk: 0.8\n")
    people = tmp_path / "people.jsonl"
    people.write_text("\n".join(json.dumps(record(p, "human", source=f"human/{p[1:5]}")) for p in ("/page/9", "/odd/9", "/scrape/9")) + "\n")
    argv = ["--data", str(setup["data"]), "--data", str(people), "--config", str(setup["config"]), "--config", str(strict),
            "--model-version", "1.7.0", "--model-version", "1.5.0"]
    assert ev.main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["compare"]
    assert asked == ["1.7.0", "1.5.0", "1.7.0", "1.5.0"] and reads == ["data.jsonl", "people.jsonl"]  # a scorer per setup, files read once
    assert [(r["setup"], Path(r["data"]).name) for r in out] == [
        (s, d) for s in ("clefgate.yaml model 1.7.0", "clefgate.yaml model 1.5.0", "strict.yaml model 1.7.0", "strict.yaml model 1.5.0")
        for d in ("data.jsonl", "people.jsonl")]
    by = {(r["setup"].split()[0], Path(r["data"]).name): r for r in out}
    assert by[("clefgate.yaml", "people.jsonl")]["humans_blocked"] == 0.0
    # risk 0.9 for /scrape (0.65 for /odd): blocked under block_risk 0.8, so a person there is blocked and named by source
    assert by[("strict.yaml", "people.jsonl")]["humans_blocked"] == pytest.approx(1 / 3)
    assert by[("strict.yaml", "people.jsonl")]["humans_blocked_by_source"] == {"human/scra": 1}
    assert by[("strict.yaml", "data.jsonl")]["attacks_blocked"] > by[("clefgate.yaml", "data.jsonl")]["attacks_blocked"]  # /weak/1: risk 0.9
    assert ev.main(argv) == 0
    table = capsys.readouterr().out
    assert "4 setups on 2 files" in table and "[4] strict.yaml model 1.5.0" in table
    assert "skipped lines: invalid JSON 1" in table.split("people.jsonl")[0]  # data.jsonl has a broken line
    people_block = table.split("people.jsonl")[1]
    assert "33.33% (+33.33)" in people_block and "[3] people blocked, by source: human/scra 1" in people_block
    # the same version twice would be one column under two names: refused
    assert ev.main(["--data", str(people), "--model-version", "1.5.0", "--model-version", "1.5.0"]) == 2
    assert "given more than once: 1.5.0" in capsys.readouterr().err
    # one setup on one file keeps the single report
    assert ev.main(["--data", str(setup["data"]), "--config", str(setup["config"]), "--model-version", "1.5.0"]) == 0
    assert "rules+model" in capsys.readouterr().out and asked[-1] == "1.5.0"


def test_setup_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps(record("/page", "")) + "\n")
    assert ev.main(["--data", str(empty)]) == 2
    assert "no labelled requests" in capsys.readouterr().err
    assert ev.main(["--data", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy:\n  challenge_risk: 7\n")
    assert ev.main(["--data", str(empty), "--config", str(bad)]) == 2
    assert "policy.challenge_risk" in capsys.readouterr().err


def test_decision_log_rows_are_split_by_the_history_their_logged_input_had(tmp_path: Path) -> None:
    import dataclasses

    from gateway.decisionlog import encode_line
    from gateway.features import ClientStats, model_input
    from gateway.verdict import Action, Source, Verdict
    from tests.conftest import make_features

    lines = []
    for i, requests in enumerate((0, 80, 3)):
        f = make_features(target="/page/1", request_id=f"r{i}")
        if requests:
            f = dataclasses.replace(f, client=ClientStats(requests=requests, rate_per_min=40.0, path_diversity=0.5, mean_gap_s=1.5))
        v = Verdict(Action.FORWARD, Source.MODEL, "x", probabilities={"class": {"human": 0.9, "good_bot": 0.0, "bad_bot": 0.1, "attack": 0.0}},
                    model="m@1", model_input=model_input(f))
        line = json.loads(encode_line(f, v, 200, 0.0))
        lines.append(json.dumps({**line, "label": "human"}))
    data = tmp_path / "decisions.jsonl"
    data.write_text("\n".join(lines) + "\n")
    rows = ev.read_rows(data, ev.Skipped())
    assert all(r.logged_input is not None for r in rows)
    out = ev.evaluate(rows, ev.load_config(None), FakeScorer())
    assert {k: c["n"] for k, c in out["by_client_context"].items()} == {"first_request": 1, "with_history": 2}


def test_eval_decides_with_the_pipeline_serve_builds(setup: dict[str, Path]) -> None:
    """A request no rule matched meets the payload detectors before ``rules.default``, as in serve: an injection is
    blocked, not answered by a default challenge (eval once put the default first)."""
    rules = setup["config"].parent / "rules.yaml"
    rules.write_text("rules:\n  - name: block-env\n    path: ['/**/.env']\n    action: block\n")
    setup["config"].write_text(setup["config"].read_text().replace("rules:\n", "rules:\n  default: challenge\n"))
    data = setup["config"].parent / "injections.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in (record("/inject?q=1%27%20union%20select%20password%20from%20users--", "attack"),
                                                      record("/page/1", "human"), record("/weak/.env", "attack"))) + "\n")
    out = ev.evaluate(ev.read_rows(data, ev.Skipped()), ev.load_config(setup["config"]), FakeScorer())
    for system in ("rules_model", "rules_only"):
        assert out["systems"][system]["matrix"]["attack"] == {"forward": 0, "challenge": 0, "block": 2}
        assert out["systems"][system]["matrix"]["human"] == {"forward": 0, "challenge": 1, "block": 0}
    assert out["rule_hits"] == {"detector": 1, "default": 1, "block-env": 1}
    assert out["payload_hits"] == {"libinjection/sqli": 1}


def test_rows_are_independent_a_clients_history_never_carries_over(setup: dict[str, Path]) -> None:
    """Eval tells no observer how a row ended: a client that was blocked for an attack, or challenged again and again,
    is not blocked on a later row for it (serve would escalate: ``Policy.escalate``)."""
    setup["config"].write_text(setup["config"].read_text().replace("policy:\n", "policy:\n  block_ignored_challenges: 2\n"))
    rows = [record("/inject?q=0x61646d696e", "attack")] + [record("/odd/1", "human")] * 5 + [record("/weak/1", "attack")]
    data = setup["config"].parent / "one-client.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")  # one address and browser throughout
    out = ev.evaluate(ev.read_rows(data, ev.Skipped()), ev.load_config(setup["config"]), FakeScorer())
    assert out["systems"]["rules_model"]["matrix"]["human"] == {"forward": 0, "challenge": 5, "block": 0}
    assert out["systems"]["rules_model"]["matrix"]["attack"] == {"forward": 0, "challenge": 1, "block": 1}
    assert out["policy_blocks"]["p_attack"] == 1


def test_rules_only_forwards_what_no_rule_settles_whatever_the_fallback_mode(setup: dict[str, Path]) -> None:
    """Rules only is the gateway with its model down and ``decider.fallback: rules-only``; a served fallback of
    ``challenge`` does not turn it into a challenge-everything column, and no challenge key is needed to evaluate."""
    text = setup["config"].read_text()
    setup["config"].write_text(text + "decider:\n  fallback: challenge\nchallenge:\n  keys: [{id: k1, secret: 'env:CLEFGATE_UNSET_IN_TESTS'}]\n")
    s = run(setup)["systems"]
    assert s["rules_only"]["matrix"]["human"] == {"forward": 8, "challenge": 0, "block": 0}
    assert s["rules_only"]["matrix"]["attack"] == {"forward": 2, "challenge": 0, "block": 1}
    assert s["rules_model"]["matrix"]["human"] == {"forward": 6, "challenge": 2, "block": 0}


def test_the_model_stage_eval_builds_decides_with_the_pipelines_policy(setup: dict[str, Path]) -> None:
    from gateway.pipeline import build

    pipeline = build(ev.offline(ev.load_config(setup["config"])), ev.PrecomputedStage)
    assert isinstance(pipeline.scorer, ev.PrecomputedStage) and pipeline.scorer.policy is pipeline.policy
    assert [s.name for s in pipeline.stages] == ["rules", "payload", "default", "model"]


def test_blocks_the_policy_holds_back_for_want_of_syntax_are_counted_and_said(tmp_path: Path) -> None:
    """P(attack) 0.98, the model naming SQL injection: ``q=../b`` holds traversal syntax but none of SQL, so the block on
    P(attack) alone is a challenge, counted as held back; ``0x61646d696e`` is a hex literal that spells text (SQL
    syntax): blocked. P(attack) 0.70 on ``q=(b)``, which holds no attack syntax: not counted, and eval says how many
    requests of each label that spared."""
    cfg = tmp_path / "clefgate.yaml"
    cfg.write_text("policy:\n  block_attack: 0.95\n  challenge_risk: 0.6\n")
    data = tmp_path / "d.jsonl"
    rows = (record("/inject?q=..%2Fb", "attack"), record("/inject?q=0x61646d696e", "attack"), record("/weak/1?q=%28b%29", "human"))
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = ev.evaluate(ev.read_rows(data, ev.Skipped()), ev.load_config(cfg), FakeScorer())
    assert result["systems"]["rules_model"]["matrix"]["attack"] == {"forward": 0, "challenge": 1, "block": 1}
    assert result["systems"]["rules_model"]["matrix"]["human"] == {"forward": 1, "challenge": 0, "block": 0}
    assert result["policy_blocks"]["held_back"] == {"unfamiliar": 0, "no_syntax": 1}
    assert result["policy_blocks"]["syntaxless"] == {"human": 1, "good_bot": 0, "bad_bot": 0, "attack": 0}
    text = ev.render(result, "d")
    assert "challenged instead: the payload unfamiliar to the model 0, no value holds the syntax of the kind named 1" in text
    assert "P(attack) not counted, no attack syntax in any value: human 1, good_bot 0, bad_bot 0, attack 0" in text


def test_a_rules_challenge_the_model_scored_counts_as_the_rules_unless_the_model_blocked(tmp_path: Path) -> None:
    """A rule challenges every client named ``crawler``; its requests with a payload are scored (rules.score_challenged):
    ``/inject`` (P(attack) 0.98, hex that spells text) is blocked by the model, ``/page?x=1`` stays the rule's challenge,
    counted as the rule's decision and never as a corroborated block."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: challenge-crawler\n    user_agent: crawler\n    action: challenge\n"
                     "  - name: score-the-rest\n    action: score\n")
    cfg = tmp_path / "clefgate.yaml"
    cfg.write_text(f"rules:\n  files: [{rules}]\npolicy:\n  block_attack: 0.95\n  challenge_risk: 0.6\n")
    crawler = [["Host", "a.example"], ["User-Agent", "crawler/1.0"]]
    rows = [{**record("/page?x=1", "bad_bot"), "headers": crawler}, {**record("/inject?q=0x61646d696e", "attack"), "headers": crawler},
            {**record("/page/2", "bad_bot"), "headers": crawler}]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = ev.evaluate(ev.read_rows(data, ev.Skipped()), ev.load_config(cfg), FakeScorer())
    assert result["systems"]["rules_model"]["matrix"]["bad_bot"] == {"forward": 0, "challenge": 2, "block": 0}
    assert result["systems"]["rules_model"]["matrix"]["attack"] == {"forward": 0, "challenge": 0, "block": 1}
    assert result["systems"]["rules_only"]["matrix"]["attack"] == {"forward": 0, "challenge": 1, "block": 0}
    assert result["rule_hits"] == {"challenge-crawler": 2}
    assert result["policy_blocks"]["corroborated"] == 0 and result["policy_blocks"]["p_attack"] == 1


AGENTS = {
    "chrome": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "edge": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "samsung": "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 "
               "Mobile Safari/537.36",
    "firefox": "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "safari-mac": "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "safari-ios": "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 "
                  "Mobile/15E148 Safari/604.1",
    # Chrome on iOS is WebKit underneath, and names itself
    "chrome-ios": "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 "
                  "Mobile/15E148 Safari/604.1",
    # an in-app web view on Android names the Chrome it runs
    "webview": "Mozilla/5.0 (Linux; Android 14; K) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/131.0.0.0 Mobile Safari/537.36 "
               "[FBAN/EMA;FBLC/en_US]",
}


@pytest.mark.parametrize("name", AGENTS)
def test_a_persons_browser_family_is_read_from_the_user_agent(name: str) -> None:
    want = {"chrome-ios": "chrome", "webview": "chrome"}.get(name, name)
    assert ev.browser_family(AGENTS[name]) == want
    assert ev.browser_family("curl/8.5.0") == "other" and ev.browser_family("") == "other"


def test_people_are_counted_by_browser_family_beside_chrome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def person(path: str, agent: str) -> dict[str, Any]:
        return {**record(path, "human"), "headers": [["Host", "a.example"], ["User-Agent", agent]]}

    rows = ([person("/page/1", AGENTS["chrome"])] * 4 + [person("/page/1", AGENTS["safari-ios"])] * 3
            + [person("/odd/1", AGENTS["safari-ios"])] + [person("/inject?q=0x61646d696e", AGENTS["firefox"])] + [person("/page/2", AGENTS["firefox"])]
            + [record("/odd/2", "bad_bot")])
    data = tmp_path / "people.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "clefgate.yaml"
    cfg.write_text("rules:\n  files: []\n  default: score\npolicy:\n  block_attack: 0.95\n  challenge_risk: 0.6\n")
    result = ev.evaluate(ev.read_rows(data, ev.Skipped()), ev.load_config(cfg), FakeScorer())
    # only people count, in FAMILIES order; the bad bot's challenge is nobody's
    assert result["people_by_family"] == {
        "chrome": {"n": 4, "challenged": 0.0, "blocked": 0.0},
        "firefox": {"n": 2, "challenged": 0.0, "blocked": 0.5},
        "safari-ios": {"n": 4, "challenged": 0.25, "blocked": 0.0}}
    table = ev.render(result, str(data))
    assert "people by browser family (points from Chrome)" in table
    assert [line.split()[:4] for line in table.splitlines() if line.startswith(("chrome ", "firefox ", "safari-ios "))] == [
        ["chrome", "4", "0.00%", "0.00%"], ["firefox", "2", "50.00%", "0.00%"], ["safari-ios", "4", "0.00%", "25.00%"]]
    assert "+25.00" in table and "+50.00" in table
