"""The console in real Chromium after mixed traffic through a real gateway and origin, and with two workers over HTTP.

Chromium signs in with the admin secret, sees the Live view with data, filters the
Decisions, looks up a blocked request by the reference its block page showed, and applies
a temporary block that the next request from that address meets. Screenshots go to
results/screenshots/ (gitignored). With ``--workers 2`` the console's answers cover both
workers (the rings are merged) and an override reaches both.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import Gateway, Origin, config_for

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
SHOTS = ROOT / "results" / "screenshots"
TOKEN = "console-e2e-" + "t" * 32
CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
BROWSER = {"User-Agent": CHROME, "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
           "Accept-Language": "en-GB,en;q=0.9", "Accept-Encoding": "gzip, deflate, br", "Sec-Fetch-Site": "none",
           "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Upgrade-Insecure-Requests": "1"}


def _config(origin: Origin, work: Path) -> dict[str, Any]:
    rules = work / "members.yaml"
    rules.write_text("rules:\n  - name: members-area\n    description: the members' pages ask for a check\n    path: /members/**\n"
                     "    action: challenge\n    difficulty: 12\n")
    return config_for(origin.url, rules={"files": [str(rules), str(ROOT / "rules" / "injections.yaml"), str(ROOT / "rules" / "default.yaml")],
                             "default": "allow"},
                      model={"enabled": False}, admin={"token": TOKEN}, challenge={"dev_generate_secret": True},
                      decision_log={"path": str(work / "decisions.jsonl"), "rules": "all"}, jev={"enabled": False})


def mixed_traffic(gw: Gateway) -> str:
    """People, a scanner, an injection and a challenged page, from several addresses; the reference of a block page."""
    reference = ""
    with httpx.Client(base_url=gw.url, timeout=10.0) as c:
        for i in range(12):
            for path in ("/", "/shop", "/shop/2", "/search?q=lamp"):
                assert c.get(path, headers={**BROWSER, "X-Forwarded-For": f"203.0.113.{10 + i}"}).status_code == 200
        for i in range(3):
            assert c.get("/members/home", headers={**BROWSER, "X-Forwarded-For": f"203.0.113.{40 + i}"}).status_code == 403
        for probe in ("/.env", "/.git/config", "/wp-login.php"):
            c.get(probe, headers={"User-Agent": "curl/8.5.0", "Accept": "*/*", "X-Forwarded-For": "198.51.100.66"})
        blocked = c.get("/search?q=1%27%20UNION%20SELECT%20password%20FROM%20users--",
                        headers={**BROWSER, "X-Forwarded-For": "198.51.100.77"})
        assert blocked.status_code == 403, blocked.text[:300]
        found = re.search(r"<code>([^<]+)</code>", blocked.text)
        assert found, blocked.text
        reference = found.group(1)
        assert "looked like an attack" in blocked.text
    return reference


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    o = Origin(tmp_path_factory.mktemp("console-origin"))
    yield o
    o.stop()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/system-deps installs it)")
def test_the_console_in_chromium_after_mixed_traffic(origin: Origin, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    gw = Gateway(tmp_path / "gw", _config(origin, tmp_path))
    try:
        reference = mixed_traffic(gw)
        console = gw.admin_url + "/console/"
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                               "--disable-component-update", "--disable-sync", "--no-first-run"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.goto(console)
                assert page.is_visible("text=Admin secret")
                page.fill("#token", TOKEN)
                page.click("button:has-text('Sign in')")
                page.wait_for_selector(".tile")
                tiles = {page.inner_text(f".tile:nth-child({i}) span"): page.inner_text(f".tile:nth-child({i}) b") for i in range(1, 7)}
                assert int(tiles["Requests, last hour"].replace(",", "")) >= 48 + 3 + 3 + 1
                assert int(tiles["Blocked"]) >= 3 and int(tiles["Challenged"]) >= 4  # /wp-login.php is challenged
                page.wait_for_selector("#chart .uplot canvas")  # the vendored chart drew
                assert "block-sql-injection" in page.inner_text("main") or "sql" in page.inner_text("main").lower()
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "console-live.png"), full_page=True)

                # Decisions, filtered with the form
                page.click("nav >> text=Decisions")
                page.select_option("select[name=verdict]", "block")
                page.click("#filters button")
                page.wait_for_url(re.compile(r"verdict=block"))
                cells = page.locator("table.decisions tbody tr td:nth-child(2)")
                assert cells.count() >= 3  # two probes and the injection
                assert all(t.startswith("block") for t in cells.all_inner_texts())
                page.fill("input[name=client]", "198.51.100.66")
                page.click("#filters button")
                page.wait_for_url(re.compile(r"client=198.51.100.66"))
                assert set(page.locator("table.decisions tbody tr td:nth-child(5)").all_inner_texts()) == {"198.51.100.66"}
                page.screenshot(path=str(SHOTS / "console-decisions.png"), full_page=True)

                # Lookup: the reference the visitor saw
                page.click("nav >> text=Lookup")
                page.fill("#ref", reference)
                page.click("button:has-text('Look up')")
                page.wait_for_selector("dl.facts")
                detail = page.inner_text("main")
                assert reference in detail and "block" in detail and "198.51.100.77" in detail and "attack" in detail
                page.screenshot(path=str(SHOTS / "console-lookup.png"), full_page=True)

                # What if: replay the recent decisions under a policy in shadow mode (rules only: the policy changes nothing)
                page.click("nav >> text=What if")
                page.fill("#count", "100")
                page.click("#replay button")
                page.wait_for_selector("#replay-result p.ok:has-text('decisions replayed')", timeout=60_000)

                # Actions: a temporary block for an address that was being forwarded
                with httpx.Client(base_url=gw.url, timeout=10.0) as c:
                    assert c.get("/shop", headers={**BROWSER, "X-Forwarded-For": "203.0.113.99"}).status_code == 200
                page.click("nav >> text=Actions")
                page.fill("#network", "203.0.113.96/29")
                page.select_option("#action", "block")
                page.fill("#minutes", "10")
                page.fill("#note", "e2e: a scraper on this range")
                page.click("#override button")
                page.wait_for_selector("#action-result p.ok")
                page.wait_for_selector("td:has-text('203.0.113.96/29')")
                page.screenshot(path=str(SHOTS / "console-actions.png"), full_page=True)
            finally:
                browser.close()
        with httpx.Client(base_url=gw.url, timeout=10.0) as c:
            held = c.get("/shop", headers={**BROWSER, "X-Forwarded-For": "203.0.113.99"})
            assert held.status_code == 403 and held.headers.get("x-clefgate-rule") in (None, "console-block")
            assert c.get("/shop", headers={**BROWSER, "X-Forwarded-For": "203.0.113.95"}).status_code == 200
        lines = [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines() if x.strip()] \
            if (tmp_path / "decisions.jsonl").exists() else []
        deadline = time.monotonic() + 10
        while not any("audit" in x for x in lines) and time.monotonic() < deadline:
            time.sleep(0.2)
            lines = [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines() if x.strip()]
        audits = [x["audit"] for x in lines if "audit" in x]
        assert any(a["kind"] == "override" and a["network"] == "203.0.113.96/29" and a["note"] == "e2e: a scraper on this range"
                   for a in audits), audits
    finally:
        gw.stop()


def test_two_workers_answer_as_one(origin: Origin, tmp_path: Path) -> None:
    """With --workers 2 the console merges both workers' rings and pushes an override to both."""
    gw = Gateway(tmp_path / "gw", {**_config(origin, tmp_path), "workers": 2}, ready_timeout=120.0)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        sent = 0
        with httpx.Client(base_url=gw.url, timeout=10.0) as c:
            for i in range(60):  # new connections: the kernel spreads them over both workers' sockets
                with httpx.Client(base_url=gw.url, timeout=10.0) as fresh:
                    fresh.get(f"/shop?n={i}", headers={**BROWSER, "X-Forwarded-For": f"203.0.113.{i % 50 + 1}"})
                sent += 1
            blocked = c.get("/.env", headers={"User-Agent": "curl/8.5.0", "X-Forwarded-For": "198.51.100.5"})
            reference = re.search(r"<code>([^<]+)</code>", blocked.text)
            assert blocked.status_code == 403 and reference
        admin = httpx.Client(base_url=gw.admin_url, timeout=10.0, headers=auth)
        decisions = admin.get("/console/api/decisions", params={"limit": 1000}).json()["decisions"]
        shop = [d for d in decisions if d["path"] == "/shop"]
        assert len(shop) == sent
        workers = {d["worker"] for d in shop}
        print(f"\nconsole: {sent} requests, decided by workers {sorted(workers)}")
        found = admin.get("/console/api/decisions", params={"verdict": "block", "client": "198.51.100.5"}).json()["decisions"]
        assert [d["request_id"] for d in found] == [reference.group(1)]
        resp = admin.post("/console/api/override", json={"network": "203.0.113.0/24", "action": "block", "minutes": 5})
        assert resp.status_code == 200, resp.text
        for i in range(20):
            with httpx.Client(base_url=gw.url, timeout=10.0) as fresh:
                r = fresh.get("/shop", headers={**BROWSER, "X-Forwarded-For": f"203.0.113.{i + 1}"})
                assert r.status_code == 403, (i, r.status_code)
        live = admin.get("/console/api/live").json()
        assert live["workers"] == 2
        assert sum(sum(v) for v in live["series"]["series"].values()) * 60 == pytest.approx(sent + 1 + 20, abs=0.5)
        admin.close()
    finally:
        gw.stop()
