"""loadtest/: scenarios, the client, identities, the simulator against a real gateway, the report, the bench commands."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import random
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.challenge.tokens import pow_ok
from loadtest import bench, compare, gpu_check, modelbench, modelrounds, report, scenario, setups
from loadtest.behaviours import KINDS, kind_of_request_id, truth_of_request_id
from loadtest.client import ConnectionPool, CookieJar, RequestFailed, Response
from loadtest.identities import AddressBook, AddressPool, random_browser, read_list
from loadtest.samples import sample_features
from loadtest.simulator import classify, run_scenario, solve_pow
from tests.gateway.test_replay import write_toy_model
from tests.harness import Gateway, Origin

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


# ------------------------------------------------------------------------------------------ scenarios

def test_shipped_scenarios_load_and_are_bounded() -> None:
    for name in ("default", "smoke"):
        sc = scenario.load(name)
        # the phases fit the run's limit: no planned phase is cut
        assert sc.max_requests > 0 and sc.phases and sc.cut_phases() == ()
        assert {c.kind for c in sc.clients} == set(KINDS), f"{name} must exercise every client kind"
        assert any(p.flood for p in sc.phases)


def test_a_bad_scenario_reports_every_problem() -> None:
    raw = {"seed": "x", "limits": {"max_requests": 10}, "phases": [{"name": "a", "duration_s": 1}, {"name": "a", "duration_s": -1}],
           "clients": {"person": {"sessions_per_s": 1, "concurrency": 2, "gap_s": [2, 1], "phases": ["nope"]}, "martian": {}},
           "extra": 1}
    with pytest.raises(scenario.ScenarioError) as err:
        scenario.parse(raw, "bad.yaml")
    assert err.value.problems == [
        "extra: unknown key (known: clients, description, host, limits, name, phases, request_timeout_s, seed)",
        "seed: expected an integer, got 'x'",
        "limits: both max_requests and max_duration_s are required (a run must stop by itself)",
        "phases[1].name: duplicate phase 'a'",
        "phases[1].duration_s: must be >= 0.1 (got -1)",
        "clients.person: give exactly one of sessions_per_s (arriving sessions) or concurrency (closed-loop workers)",
        "clients.person.gap_s: high (1) is below low (2)",
        "clients.person.phases: unknown phase 'nope' (known: a)",
        f"clients.martian: unknown client kind (known: {', '.join(KINDS)})",
    ]


def test_phases_past_the_limit_are_named_and_the_bench_warns(capsys: pytest.CaptureFixture[str]) -> None:
    raw = {"seed": 1, "limits": {"max_requests": 10, "max_duration_s": 4},
           "phases": [{"name": "warm", "duration_s": 3}, {"name": "peak", "duration_s": 2}, {"name": "cool", "duration_s": 1}],
           "clients": {"person": {"sessions_per_s": 1}}}
    sc = scenario.parse(raw, "cut.yaml")
    assert sc.cut_phases() == ("peak", "cool")
    assert sc.shortened(4.0).cut_phases() == ()  # shrunk in proportion, it fits again
    from loadtest import compare

    path = ROOT / "loadtest" / "scenarios" / "smoke.yaml"
    args = argparse.Namespace(scenario=str(path), scale=1.0, seconds=20.0)
    assert compare._scenario(args) is not None  # smoke stretched past its own limit: it still runs, and says so
    limit = scenario.load(str(path)).max_duration_s
    assert (f"warning: scenario smoke: limits.max_duration_s ({limit:g}s) stops the run before the planned end of phase(s) "
            "steady, flood, after") in capsys.readouterr().err


def test_scaling_and_shortening() -> None:
    sc = scenario.load("smoke")
    half = sc.scaled(0.5).shortened(2.0)
    # smoke's phases (3 / 1.5 / 0.5 of 5) shrink in proportion: boundaries at 1.2 and 1.8, none cut by the new limit
    assert [half.phase_at(t) for t in (1.19, 1.21, 1.79, 1.81)] == ["steady", "flood", "flood", "after"]
    assert half.cut_phases() == ()
    person = next(c for c in half.clients if c.kind == "person")
    assert person.sessions_per_s == pytest.approx(2.0)
    assert next(c for c in half.clients if c.kind == "flood").concurrency == 4
    assert half.phase_at(0.1) == "steady" and half.phase_at(1.4) == "flood"


# ------------------------------------------------------------------------------------------ identities

def test_addresses_come_from_the_right_ranges() -> None:
    book = AddressBook.build(random.Random(3))
    verified = read_list("googlebot") + read_list("bingbot")
    for _ in range(3000):
        ip = ipaddress.ip_address(book.datacenter.draw())
        assert not any(ip in n for n in verified if n.version == ip.version)
        ip = ipaddress.ip_address(book.residential.draw())
        assert not any(ip in n for n in verified if n.version == ip.version)
    google = read_list("googlebot")
    for _ in range(300):
        ip = ipaddress.ip_address(book.verified["googlebot"].draw())
        assert any(ip in n for n in google if n.version == ip.version)
    versions = {ipaddress.ip_address(book.residential.draw()).version for _ in range(500)}
    assert versions == {4, 6}


def test_address_pool_never_draws_an_excluded_network() -> None:
    pool = AddressPool(["10.0.0.0/30"], random.Random(1), exclude=[ipaddress.ip_network("10.0.0.1/32")])
    assert {pool.draw() for _ in range(50)} == {"10.0.0.2"}
    with pytest.raises(RuntimeError):
        AddressPool(["10.0.0.0/30"], random.Random(1), exclude=[ipaddress.ip_network("10.0.0.0/30")]).draw()


@pytest.mark.parametrize("seed", range(6))
def test_browser_heads_follow_their_family(seed: int) -> None:
    b = random_browser(random.Random(seed))
    nav = b.navigate("shop.example", referer="http://shop.example/", site="same-origin", cookie="a=1")
    names = [n for n, _ in nav]
    assert names[0] == "Host" and names.count("User-Agent") == 1 and ("Cookie", "a=1") in nav
    assert dict(nav)["Sec-Fetch-Mode"] == "navigate"
    if b.chromium:
        assert names[2:5] == ["sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"]
        assert f'v="{b.major}"' in dict(nav)["sec-ch-ua"]
    else:
        assert "sec-ch-ua" not in names
    css = dict(b.subresource("shop.example", "style", referer="http://shop.example/"))
    assert css["Sec-Fetch-Dest"] == "style" and css["Accept"].startswith("text/css")
    form = dict(b.form("shop.example", origin="http://shop.example", referer="http://shop.example/login", body_length=12))
    assert form["Content-Length"] == "12" and form["Content-Type"] == "application/x-www-form-urlencoded"


def test_request_ids_carry_the_ground_truth() -> None:
    assert truth_of_request_id("sim.person.12") == "human"
    assert truth_of_request_id("sim.scanner.3") == "attack"
    assert kind_of_request_id("sim.fake_crawler.9") == "fake_crawler"
    assert truth_of_request_id("k3v7q2mz-1f") is None and kind_of_request_id("sim.martian.1") is None


# ------------------------------------------------------------------------------------------ client and outcomes

def test_the_simulated_browser_solves_the_same_puzzle_as_the_gateway() -> None:
    for nonce, difficulty in (("AbCd", 8), ("nonce-2", 12)):
        counter = solve_pow(nonce, difficulty)
        assert pow_ok(nonce, str(counter), difficulty)
        assert not any(pow_ok(nonce, str(c), difficulty) for c in range(counter))


def _response(status: int, headers: dict[str, str] | None = None, cookies: list[str] | None = None, body: bytes = b"x") -> Response:
    return Response(status, headers or {}, body, 0.001, cookies or [])


@pytest.mark.parametrize(("response", "via_gateway", "purpose", "outcome"), [
    (_response(200, {"via": "1.1 clefgate"}), True, "", "forwarded"),
    (_response(404, {"via": "1.1 clefgate"}), True, "", "forwarded"),
    (_response(502, {"via": "1.1 clefgate"}), True, "", "forwarded"),
    (_response(403, {"x-clefgate-challenge": "pow; difficulty=16"}), True, "", "challenged"),
    (_response(403), True, "", "blocked"),
    (_response(429), True, "", "rate_limited"),
    (_response(502), True, "", "gateway_error"),
    (_response(200), False, "", "forwarded"),
    (_response(503), False, "", "error"),
    (None, True, "", "error"),
    (_response(303, cookies=["clefgate_pass=x; Path=/"]), True, "verify", "verify_ok"),
    (_response(403), True, "verify", "verify_refused"),
])
def test_outcomes_as_the_client_sees_them(response: Response | None, via_gateway: bool, purpose: str, outcome: str) -> None:
    assert classify(response, via_gateway, purpose) == outcome


def test_cookie_jar_keeps_and_forgets() -> None:
    jar = CookieJar()
    jar.store(["clefgate_pass=abc; Path=/; HttpOnly", "sid=1", "junk"])
    assert jar.header() == "clefgate_pass=abc; sid=1"
    jar.store(["sid=; Max-Age=0"])
    assert jar.header() == "clefgate_pass=abc"


@contextlib.contextmanager
def _raw_server(replies: list[bytes]) -> Iterator[int]:
    """A socket server answering each request with the next canned reply (then closing when told)."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    accepted: list[int] = []

    def serve() -> None:
        queue = list(replies)
        while queue:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(1)
            with conn:
                hold = True
                while queue:
                    data = conn.recv(65536)
                    if not data:
                        break
                    reply = queue.pop(0)
                    if reply == b"CLOSE":
                        hold = False
                        break
                    conn.sendall(reply)
                while hold and conn.recv(65536):  # keep the connection open until the client leaves
                    pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        srv.close()
        thread.join(2)


def test_pool_reuses_keep_alive_connections_and_reads_chunked_bodies() -> None:
    replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nhi",
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
               b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"]
    with _raw_server(replies) as port:
        async def go() -> list[Response]:
            pool = ConnectionPool("127.0.0.1", port, max_connections=1)
            out = [await pool.request("GET", "/", [("Host", "x")]) for _ in range(3)]
            pool.close()
            assert pool.connections_opened == 1
            return out
        first, second, third = asyncio.run(go())
    assert (first.status, first.body, first.set_cookies) == (200, b"hi", ["a=1", "b=2"])
    assert second.body == b"abc" and not second.new_connection
    assert third.status == 404


def test_pool_failures_have_kinds() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]

    async def attempt(port: int, limit_s: float = 2.0) -> str:
        pool = ConnectionPool("127.0.0.1", port)
        try:
            await pool.request("GET", "/", [("Host", "x")], timeout_s=limit_s)
        except RequestFailed as exc:
            return exc.kind
        return "ok"

    assert asyncio.run(attempt(closed_port)) == "connect"
    with _raw_server([b"CLOSE"]) as port:
        assert asyncio.run(attempt(port)) == "reset"
    with _raw_server([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart"]) as port:
        assert asyncio.run(attempt(port, limit_s=0.3)) == "timeout"


# ------------------------------------------------------------------------------------------ the simulator against a real gateway

def _challenge_everything(origin_url: str) -> dict[str, Any]:
    return {
        "backends": {"app": {"servers": [origin_url], "health_check": {"path": "/healthz", "interval_s": 1.0}}},
        "trusted_proxies": ["127.0.0.1/32"],
        "logging": {"level": "warning", "access_log": "off"},
        "rules": {"files": [str(ROOT / "rules" / "default.yaml")], "actions": {"score-everything-else": "challenge"}},
        "challenge": {"keys": [{"id": "t", "secret": "0123456789abcdef0123456789abcdef-test"}], "difficulty": 10},
    }


def _through_gateway(tmp_path: Path, config: Callable[[str], dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """``run`` (a scenario) through a gateway with ``config(origin_url)`` in front of the demo site: the run's result."""
    origin = Origin(tmp_path / "origin", "demo")
    gw = Gateway(tmp_path / "gw", config(origin.url))
    try:
        return run_scenario(scenario.parse(run), "127.0.0.1", gw.port, via_gateway=True)
    finally:
        gw.stop()
        origin.stop()


def test_simulated_people_solve_the_challenge_and_scrapers_do_not(tmp_path: Path) -> None:
    result = _through_gateway(tmp_path, _challenge_everything, {
        "name": "t", "seed": 3, "limits": {"max_requests": 2000, "max_duration_s": 4}, "phases": [{"name": "steady", "duration_s": 3.0}],
        "clients": {"person": {"sessions_per_s": 4, "requests": [2, 3], "gap_s": [0.0, 0.05], "options": {"js_share": 1.0}},
                    "ai_scraper": {"sessions_per_s": 2, "requests": [4, 6], "gap_s": [0.0, 0.01]},
                    "scanner": {"sessions_per_s": 2, "requests": [3, 5], "gap_s": [0.0, 0.01]}}})
    people = result["kinds"]["person"]
    sessions = [s["outcome"] for s in people["sessions"] if s["requests"]]
    assert sessions and set(sessions) <= {"passed_after_challenge"}, sessions
    assert people["outcomes"]["verify_ok"] >= len(sessions)
    assert people["outcomes"]["forwarded"] > people["outcomes"]["challenged"]  # pages, assets and XHRs pass on the cookie
    assert "verify_refused" not in people["outcomes"] and "blocked" not in people["outcomes"]
    scraper = result["kinds"]["ai_scraper"]
    assert scraper["outcomes"].get("challenged", 0) > 0 and "verify_ok" not in scraper["outcomes"]
    assert all(s["first_stop_s"] is not None for s in scraper["sessions"] if s["requests"] > 1)
    assert result["kinds"]["scanner"]["outcomes"].get("blocked", 0) > 0
    assert result["requests"] == sum(sum(c.values()) for c in result["per_second"])
    no_response = sum(sum(k["failures"].values()) for k in result["kinds"].values())
    assert result["latency"]["count"] == result["requests"] - no_response


def test_a_simulated_person_whose_sign_in_is_challenged_solves_it_and_the_form_is_sent_again(tmp_path: Path) -> None:
    """Sign-ins challenged (as during a credential-stuffing wave): a person's browser solves the page, the kept form is
    posted again and reaches the site, and the session ends passed, not stuck."""
    rules = tmp_path / "logins.yaml"
    rules.write_text("rules:\n  - name: challenge-sign-ins\n    description: every sign-in, as in a wave\n    method: POST\n"
                     "    path: /login\n    action: challenge\n    difficulty: 8\n"
                     "  - name: pages\n    description: the rest\n    action: allow\n")
    result = _through_gateway(tmp_path, lambda url: {**_challenge_everything(url), "rules": {"files": [str(rules)]}}, {
        "name": "t", "seed": 11, "limits": {"max_requests": 3000, "max_duration_s": 6}, "phases": [{"name": "steady", "duration_s": 5.0}],
        "clients": {"person": {"sessions_per_s": 6, "requests": [6, 8], "gap_s": [0.0, 0.02], "options": {"js_share": 1.0}}}})
    people = result["kinds"]["person"]
    sessions = [s["outcome"] for s in people["sessions"] if s["requests"]]
    assert "passed_after_challenge" in sessions and "stuck" not in sessions, sessions
    assert people["outcomes"]["verify_ok"] == people["outcomes"]["challenged"]


def test_a_run_says_what_would_end_it() -> None:
    from loadtest.simulator import Recorder

    raw = {"name": "t", "phases": [{"name": "a", "duration_s": 5, "flood": True}], "clients": {"flood": {"concurrency": 1}}}
    assert Recorder(scenario.parse({**raw, "limits": {"max_requests": 100, "max_duration_s": 30}})).stopped_by == "phases"
    assert Recorder(scenario.parse({**raw, "limits": {"max_requests": 100, "max_duration_s": 2}})).stopped_by == "max_duration_s"


def test_runs_stop_at_their_request_budget(tmp_path: Path) -> None:
    origin = Origin(tmp_path / "origin", "demo")
    try:
        sc = scenario.parse({"name": "t", "limits": {"max_requests": 150, "max_duration_s": 30},
                             "phases": [{"name": "flood", "duration_s": 30, "flood": True}],
                             "clients": {"flood": {"concurrency": 4, "requests": [5, 5]}}})
        result = run_scenario(sc, "127.0.0.1", origin.port, via_gateway=False)
    finally:
        origin.stop()
    assert 150 <= result["requests"] < 160
    assert result["stopped_by"] == "max_requests"  # the budget ended it, not the 30 s phase
    assert set(result["kinds"]["flood"]["outcomes"]) == {"forwarded"}


# ------------------------------------------------------------------------------------------ report

def _decision(kind: str, n: int, probs: dict[str, float], source: str = "model") -> dict[str, Any]:
    return {"request_id": f"sim.{kind}.{n}", "source": source, "verdict": "forward", "latency_ms": 0.5,
            "probabilities": {"class": probs}}


def test_calibration_from_a_labelled_decision_log() -> None:
    confident = {"human": 0.9, "good_bot": 0.05, "bad_bot": 0.03, "attack": 0.02}
    lines = [_decision("person", i, confident) for i in range(9)] + [_decision("ai_scraper", 100, confident)]
    lines += [{"request_id": "other-1", "probabilities": {"class": confident}}, {"request_id": "sim.person.5", "source": "rule"}]
    cal = report.calibration(lines)
    assert cal is not None
    assert cal["n"] == 10 and cal["accuracy"] == pytest.approx(0.9)
    assert cal["ece"] == pytest.approx(0.0, abs=1e-9)  # said 0.9, right 9 times in 10
    assert cal["confusion"] == {"human": {"human": 9}, "bad_bot": {"human": 1}}
    wrong = report.calibration([_decision("scanner", i, confident) for i in range(4)])
    assert wrong is not None and wrong["ece"] == pytest.approx(0.9)
    assert report.calibration([{"request_id": "x"}]) is None


def test_first_stop_figures() -> None:
    sessions = [{"first_stop_s": t, "first_stop_request": r, "first_block_s": b} for t, r, b in
                ((0.1, 1, None), (0.3, 3, 0.3), (None, None, None))]
    rows = report.first_stop({"sim": {"kinds": {"ai_scraper": {"sessions": sessions}, "person": {"sessions": sessions}}}})
    assert rows == [{"kind": "ai_scraper", "sessions": 3, "stopped": 2, "median_s": pytest.approx(0.2), "p90_s": 0.3,
                     "median_requests": 2.0, "median_first_block_s": 0.3}]


def test_metric_deltas_from_prometheus_text() -> None:
    before = "# TYPE clefgate_decision_cache_requests_total counter\nclefgate_decision_cache_requests_total{result=\"hit\"} 5\n"
    after = ("# TYPE clefgate_decision_cache_requests_total counter\nclefgate_decision_cache_requests_total{result=\"hit\"} 35\n"
             "clefgate_decision_cache_requests_total{result=\"miss\"} 10\n")
    figures = compare.gateway_figures(before, after)
    assert figures["cache"] == {"hit": 30.0, "miss": 10.0}
    assert figures["cache_hit_ratio"] == pytest.approx(0.75)
    assert compare.gateway_figures("", "") == {}


# ------------------------------------------------------------------------------------------ the commands

def test_bench_dispatch() -> None:
    assert bench.main(["nope"]) == 2
    assert bench.main(["--help"]) == 0
    assert set(bench.COMMANDS) == {"mixed", "proxy", "rules", "model", "flood", "report"}


def test_model_setups_take_a_version_and_policy_from_the_command_line(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A named version and a policy reach the model setups only."""
    args = compare.parser().parse_args(["--model-version", "1.5.0", "--policy", "challenge_risk=0.5", "--policy", "block_risk=null"])
    overrides = compare.model_overrides(args)
    assert overrides == {"model": {"version": "1.5.0"}, "policy": {"challenge_risk": 0.5, "block_risk": None}}
    model = setups.clefgate_config(setups.SETUPS["model"], 8000, tmp_path, model_overrides=overrides)
    rules = setups.clefgate_config(setups.SETUPS["rules"], 8000, tmp_path, model_overrides=overrides)
    assert model["model"] == {"enabled": True, "version": "1.5.0"} and model["policy"]["challenge_risk"] == 0.5
    assert rules["model"] == {"enabled": False} and "policy" not in rules
    for bad, why in ((["--policy", "challenge_risk"], "'challenge_risk': expected KEY=VALUE"),
                     (["--policy", "challenge_risk=["], "'challenge_risk=[': the value is not a number or null"),
                     (["--target", "127.0.0.1:1", "--model-version", "1.5.0"], "--target measures a running gateway")):
        with pytest.raises(SystemExit):
            compare.main(bad)
        assert why in capsys.readouterr().err
    assert compare.model_overrides(compare.parser().parse_args(["--policy", "challenge_risk=1e-1"])) == {"policy": {"challenge_risk": 0.1}}


@pytest.mark.skipif(NGINX is None, reason="nginx is installed by .ci/system-deps")
def test_flood_bench_parts_give_their_references_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """clefgate bench flood --parts times each shortcut beside its plain form; both give the same answer."""
    assert bench.main(["flood", "--parts", "--number", "20"]) == 0
    out = capsys.readouterr().out
    for part in ("X-Forwarded-For entry", "decision-log line", "challenge page", "challenge token and its no-JS twin"):
        assert part in out
    assert "DIFFER" not in out


def test_bench_smoke_runs_every_step_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = subprocess.run([sys.executable, "-m", "gateway", "bench", "mixed", "--scenario", "smoke", "--setups", "origin,nginx,rules",
                           "--seconds", "1.5", "--rounds", "2", "--warmup", "0.2", "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=150)
    assert code.returncode == 0, code.stderr[-3000:]
    assert "| clefgate rules only |" in code.stdout and "| nginx proxy_pass |" in code.stdout
    assert "[rules]" in code.stderr or "== clefgate rules only" in code.stderr  # progress while it runs
    run = json.loads((out / "results.json").read_text())
    by = {r["setup"]: r for r in run["setups"]}
    assert all(by[s]["status"] == "ok" for s in ("origin", "nginx", "rules"))
    assert by["nginx"]["sim"]["errors"] == 0 and by["origin"]["sim"]["errors"] == 0
    kinds = by["rules"]["sim"]["kinds"]
    assert kinds["scanner"]["outcomes"].get("blocked", 0) > 0
    assert kinds["fake_crawler"]["outcomes"].get("blocked", 0) > 0
    assert kinds["person"]["outcomes"].get("forwarded", 0) > 0
    assert by["rules"]["cpu"]["us_per_request"] > 0 and by["rules"]["gateway"]["rule_matches"]
    # two interleaved rounds per setup, merged: requests add up, each round's flood throughput is kept
    assert run["rounds"] == 2 and all(by[s]["sim"]["rounds"] == 2 and len(by[s]["round_figures"]) == 2 for s in by)
    rules = by["rules"]["sim"]
    assert rules["latency"]["count"] == rules["requests"] - sum(sum(k["failures"].values()) for k in rules["kinds"].values())
    assert sorted(p.name for p in out.glob("decisions-rules-r*.jsonl")) == ["decisions-rules-r1.jsonl", "decisions-rules-r2.jsonl"]
    summary = (out / "summary.md").read_text()
    assert "## Comparison" in summary and "clefgate rules only" in summary and "![throughput](throughput.png)" in summary
    for name in ("latency_cdf.png", "throughput.png", "outcomes.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (out / "summary.md").unlink()
    assert bench.main(["report", str(out)]) == 0  # a results folder renders again from results.json
    assert (out / "summary.md").read_text() == summary


def run_model_bench(tmp_path: Path, *options: str) -> dict[str, Any]:
    """``clefgate bench model`` on a toy model, briefly; its JSON results (the run must succeed)."""
    repo = write_toy_model(tmp_path / "repo")
    out = tmp_path / "model.json"
    code = modelbench.main(["--repository", str(repo), "--name", "clef-flash-toy", "--batches", "1,8", "--seconds", "0.6",
                            "--requests", "60", "--cpu", "0", "--json", str(out), *options])
    assert code == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_model_bench_measures_the_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fp32, int8 = run_model_bench(tmp_path, "--providers", "cpu", "--variants", "fp32,int8")["cells"]
    assert fp32["session_provider"] == "CPUExecutionProvider" and fp32["int8_kernel"] is None  # named for int8 files only
    assert fp32["single_decisions_per_s"] > 0 and fp32["batches"]["8"]["infer_decisions_per_s"] > 0
    assert "no int8 file" in int8["error"]
    assert "cpu      fp32" in capsys.readouterr().out
    assert modelbench.main(["--repository", str(tmp_path / "none")]) == 2


def test_model_bench_compares_the_tuned_runtime_with_the_plain_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tuned, plain = run_model_bench(tmp_path, "--variants", "fp32", "--runtimes", "tuned,plain")["cells"]
    assert (tuned["runtime"], plain["runtime"]) == ("tuned", "plain")
    assert plain["batches"]["8"]["tokenize_infer_decisions_per_s"] > 0
    text = capsys.readouterr().out
    assert "cpu      fp32    plain" in text
    assert re.search(r"tuned / plain runtime, cpu fp32: single \d+\.\d\dx, b1 tok\+inf \d+\.\d\dx, b8 tok\+inf \d+\.\d\dx", text)
    with pytest.raises(SystemExit):
        modelbench.main(["--runtimes", "tuned,fast"])
    assert "unknown runtime fast" in capsys.readouterr().err


def test_model_bench_prices_a_client_never_seen_against_a_kept_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept, uncached = run_model_bench(tmp_path, "--variants", "fp32", "--runtimes", "tuned,uncached")["cells"]
    assert (kept["runtime"], uncached["runtime"]) == ("tuned", "uncached") and uncached["single_p50_ms"] > 0
    assert re.search(r"uncached / tuned runtime \(a client never seen / its answer kept\), cpu fp32: single p50 \d+\.\d\dx, "
                     r"b1 tok\+inf \d+\.\d\dx, b8 tok\+inf \d+\.\d\dx", capsys.readouterr().out)


def test_model_rounds_write_one_report_per_version_and_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if "loadtest.modelbench" not in cmd:
            return subprocess.CompletedProcess(cmd, 0, stdout="20000 loops, best of 5: 10.0 usec per loop\n", stderr="")
        version, runtimes = cmd[cmd.index("--version") + 1], cmd[cmd.index("--runtimes") + 1].split(",")
        cells = [{"variant": cmd[cmd.index("--variants") + 1], "runtime": r, "single_p50_ms": 0.25,
                  "batches": {"64": {"tokenize_infer_decisions_per_s": 6000.0}}} for r in runtimes]
        Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps({"model": f"clef-flash@{version}", "cells": cells}))
        return subprocess.CompletedProcess(cmd, 0, stdout=f"table of {version}\n", stderr="")

    (tmp_path / "clef-flash-1.5.0-r3.txt").write_text("an earlier report")
    monkeypatch.setattr(modelrounds.subprocess, "run", fake_run)
    assert modelrounds.main(["--out", str(tmp_path), "--rounds", "2"]) == 0
    versions = list(modelrounds.VERSIONS)
    assert sorted(p.name for p in tmp_path.glob("clef-flash-*")) == sorted(
        f"clef-flash-{v}-r{r}.{ext}" for v in versions for r in (1, 2) for ext in ("json", "txt"))
    assert (tmp_path / f"clef-flash-{versions[0]}-r2.txt").read_text() == f"table of {versions[0]}\n"
    summary = (tmp_path / "summary.txt").read_text()
    assert f"clef-flash@{versions[0]} fp32 uncached: b64 tok+inf 6,000 / 6,000  median 6,000" in summary


def _cuda_device_present() -> bool:
    return gpu_check.cuda_devices()[0] > 0


@pytest.mark.skipif(_cuda_device_present(), reason="this machine has a CUDA device: the check would run for real")
def test_gpu_check_says_cuda_is_unavailable(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loadtest.gpu_check", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == gpu_check.CUDA_UNAVAILABLE
    assert "CUDA is unavailable" in done.stderr
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert result["exit_code"] == 3 and result["cuda_devices"] == 0 and "throughput" not in result


def test_gpu_check_measurements_on_cpu_sessions(tmp_path: Path) -> None:
    from gateway.decider.onnx import OnnxOptions, OnnxScorer

    repo = write_toy_model(tmp_path / "repo")
    scorer = OnnxScorer(OnnxOptions(repository=repo, name="clef-flash-toy", providers=("cpu",), variant="fp32", warmup_runs=1))
    features = [f for _, f in sample_features(64, seed=2)]
    same = gpu_check.parity(scorer, scorer, features, 0.02)
    assert same["passed"] and same["max_abs_diff"] == 0.0 and same["questions"]["class"]["argmax_agreement"] == 1.0
    speed = gpu_check.throughput(scorer, features, [16], 0.2)
    assert speed["16"]["infer_decisions_per_s"] > 0 and speed["16"]["runs"] >= 1


def test_samples_cover_the_mix() -> None:
    kinds = {k for k, _ in sample_features(400, seed=1)}
    assert kinds == {"page", "asset", "xhr", "form", "crawler", "scraper", "feed_api", "stuffing", "scanner", "injection"}

