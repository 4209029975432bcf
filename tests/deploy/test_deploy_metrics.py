"""The dashboard and the alert rules name only metrics (and labels) a running gateway exports.

The primary check starts the real gateway (`clefgate serve`, through tests/harness.py)
with every part enabled whose metrics deploy/ refers to (rules, challenge, decision log,
the shipped model), sends it a little traffic, scrapes its /metrics and compares. Every
metric family is exported with HELP/TYPE before its first sample, so a family that is
declared but never observed still counts. Label names are checked against the
declarations in ``gateway.metrics.REGISTRY`` (the scrape only shows labels of series
that have samples).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.test_deploy import ready_or_exited
from tests.harness import Gateway, config_for, http_get

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

# Series that Prometheus itself adds to every scrape; alerts may use them.
PROMETHEUS_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added",
                               "scrape_samples_post_metric_relabeling"})
# Labels the scrape adds to every series (target labels): job and instance, and
# expected_provider, which GPU deployments set (deploy/k8s/components/gpu) for the
# ClefgateModelNotOnCuda alert.
TARGET_LABELS = frozenset({"job", "instance", "expected_provider"})

_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right",
                       "inf", "nan", "start", "end"})
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_:][\w:]*)?\s*\{([^{}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*\"\"")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_IDENT = re.compile(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)(\s*\()?")


@dataclass
class Query:
    """What a PromQL expression refers to: metric names, labels in matchers (per metric), grouping labels."""

    metrics: set[str] = field(default_factory=set)
    matcher_labels: dict[str, set[str]] = field(default_factory=dict)
    grouping_labels: set[str] = field(default_factory=set)


def parse_promql(expr: str) -> Query:
    """Metric and label names in ``expr`` (string literals, ranges, functions and keywords set aside)."""
    q = Query()
    text = _STRING.sub('""', expr)
    for metric, body in _SELECTOR.findall(text):
        labels = set(_MATCHER.findall(body))
        names = re.findall(r"__name__\s*=\s*\"\"", body)
        assert not names, f"selectors by __name__ cannot be checked: {expr}"
        if metric:
            q.matcher_labels.setdefault(metric, set()).update(labels)
        else:
            q.grouping_labels.update(labels)
    text = _SELECTOR.sub(lambda m: f" {m.group(1) or ''} ", text)
    text = _RANGE.sub(" ", text)
    for _, labels in _GROUPING.findall(text):
        q.grouping_labels.update(label.strip() for label in labels.split(",") if label.strip())
    text = _GROUPING.sub(" ", text)
    for name, call in _IDENT.findall(text):
        if call or name in _KEYWORDS:
            continue
        q.metrics.add(name)
    q.metrics.update(q.matcher_labels)
    return q


def test_parse_promql_finds_names_and_labels() -> None:
    q = parse_promql('histogram_quantile(0.99, sum by (backend, le) (rate(clefgate_upstream_latency_seconds_bucket{job=~"$job", '
                     'instance=~"a{b}"}[5m] offset 30m))) / ignoring(le) group_left() sum(rate(x_total[1m])) > bool 0.5 '
                     'and on(job) label_replace(up, "dst", "$1", "src", "(.*)")')
    assert q.metrics == {"clefgate_upstream_latency_seconds_bucket", "x_total", "up"}
    assert q.matcher_labels["clefgate_upstream_latency_seconds_bucket"] == {"job", "instance"}
    assert q.grouping_labels == {"backend", "le", "job"}
    assert parse_promql("topk(10, sum by (rule) (rate(a[1h]))) * 1e3 - 2").metrics == {"a"}


# ------------------------------------------------------------------------------ what deploy/ refers to

@dataclass(frozen=True)
class Reference:
    where: str
    expr: str
    legend_labels: frozenset[str] = frozenset()


def grafana_to_promql(expr: str) -> str:
    return (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            .replace('"$job"', '".+"').replace('"$instance"', '".+"'))


def dashboard_references() -> Iterator[Reference]:
    dash = json.loads((DEPLOY / "grafana" / "clefgate.json").read_text(encoding="utf-8"))
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            legend = frozenset(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
            yield Reference(f"dashboard panel {panel['title']!r} {t['refId']}", grafana_to_promql(t["expr"]), legend)
    for a in dash["annotations"]["list"]:
        if "expr" in a:
            yield Reference(f"dashboard annotation {a['name']!r}", grafana_to_promql(a["expr"]))
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", var["definition"])
            assert m, f"variable {var['name']}: only label_values(selector, label) queries are checked"
            yield Reference(f"dashboard variable ${var['name']}", grafana_to_promql(m.group(1)), frozenset({m.group(2)}))


def alert_references() -> Iterator[Reference]:
    for path in (DEPLOY / "prometheus" / "alerts.yaml", DEPLOY / "k8s" / "monitoring" / "prometheusrule.yaml"):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        groups = doc["groups"] if "groups" in doc else doc["spec"]["groups"]
        for group in groups:
            for rule in group["rules"]:
                # labels the annotations print must exist in the alert's result
                used = set(re.findall(r"\$labels\.(\w+)", json.dumps(rule.get("annotations", {}))))
                yield Reference(f"{path.relative_to(ROOT)} {rule.get('alert') or rule.get('record')}", rule["expr"], frozenset(used))


def all_references() -> list[Reference]:
    return [*dashboard_references(), *alert_references()]


# ------------------------------------------------------------------------------ what the gateway exports

@dataclass
class Exported:
    series: dict[str, str]        # sample name -> family type
    families: dict[str, str]      # family name -> type


def exported_names(text: str) -> Exported:
    series: dict[str, str] = {}
    families: dict[str, str] = {}
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count"),
                "gauge": ("",), "info": ("_info",), "unknown": ("",)}
    for fam in text_string_to_metric_families(text):
        families[fam.name] = fam.type
        for suffix in suffixes.get(fam.type, ("",)):
            series[fam.name + suffix] = fam.type
        for sample in fam.samples:
            series.setdefault(sample.name, fam.type)
    return Exported(series, families)


ADMIN_TOKEN = "deploy-test-admin-token-" + "0" * 16


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, demo_origin: Any) -> Iterator[Gateway]:
    """A real gateway configured like deploy/'s: rules, challenge, decision log, the shipped model, an admin token from a file."""
    work = tmp_path_factory.mktemp("deploy-metrics")
    (work / "challenge-key").write_text("0123456789abcdef" * 4 + "\n")
    (work / "admin-token").write_text(ADMIN_TOKEN + "\n")
    config = config_for(demo_origin.url,
                        admin={"token": f"file:{work / 'admin-token'}"},
                        rules={"files": [str(ROOT / "rules" / "default.yaml")]},
                        challenge={"keys": [{"id": "k1", "secret": f"file:{work / 'challenge-key'}"}]},
                        decision_log={"path": str(work / "decisions.jsonl")},
                        model={"enabled": True, "providers": ["cpu"]},
                        logging={"level": "info", "access_log": str(work / "access.log")})
    gw = Gateway(work / "gateway", config, wait_ready=False)
    try:
        if not ready_or_exited(gw.proc, gw.admin_url + "/readyz", 60.0):
            pytest.fail(f"the gateway did not become ready (exit {gw.proc.poll()}):\n{gw.stderr()}")
        yield gw
    finally:
        gw.stop()


@pytest.fixture(scope="module")
def scrape(gateway: Gateway) -> str:
    """/metrics after a little traffic of each kind, so that labelled series have samples too."""
    browser = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
               "Accept": "text/html", "Accept-Language": "en"}
    for path, headers in (("/", browser), ("/robots.txt", {}), ("/.env", {"User-Agent": "python-requests/2.31"}),
                          ("/shop", {"User-Agent": "curl/8.5"})):
        http_get(gateway.url + path, timeout=10.0, headers=headers)
    return gateway.metrics()


def test_admin_port_serves_probes_and_metrics_openly_but_admin_only_with_the_token(gateway: Gateway) -> None:
    """What the deployments rely on: probes and Prometheus need no token, /admin/* does."""
    for path in ("/healthz", "/readyz", "/metrics"):
        assert http_get(gateway.admin_url + path)[0] == 200, path
    assert http_get(gateway.admin_url + "/admin/config")[0] == 401
    assert http_get(gateway.admin_url + "/admin/config", headers={"Authorization": "Bearer wrong"})[0] == 401
    status, body = http_get(gateway.admin_url + "/admin/config", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert status == 200 and ADMIN_TOKEN not in body.decode(), "the token must be redacted from /admin/config"


def declared_labels() -> dict[str, tuple[set[str], str]]:
    """Series name -> (label names, kind) for every instrument declared by any gateway module."""
    import gateway
    from gateway import metrics

    for module in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)
    out: dict[str, tuple[set[str], str]] = {}
    for name, inst in metrics.REGISTRY.instruments.items():
        labels = set(inst.labels) | TARGET_LABELS
        if isinstance(inst, metrics.Gauge) and inst.merge_mode == "worker":
            labels.add("worker")
        if isinstance(inst, metrics.Histogram):
            for suffix in ("_bucket", "_sum", "_count"):
                out[name + suffix] = (labels | ({"le"} if suffix == "_bucket" else set()), inst.kind)
        else:
            out[name] = (labels, inst.kind)
    return out


# ------------------------------------------------------------------------------ the checks

Declared = dict[str, tuple[set[str], str]]


def name_problems(refs: list[Reference], exported: Exported, declared: Declared) -> list[str]:
    problems = []
    for ref in refs:
        for name in sorted(parse_promql(ref.expr).metrics):
            if name in exported.series or name in PROMETHEUS_SERIES:
                continue
            hint = ("declared in the code but not exported by the running gateway: enable that part in this test's config, "
                    "or wire its module into the server") if name in declared else "not declared anywhere in gateway/"
            problems.append(f"{ref.where}: {name}: {hint}")
    return problems


def label_problems(refs: list[Reference], declared: Declared) -> list[str]:
    problems = []
    for ref in refs:
        q = parse_promql(ref.expr)
        known = set(TARGET_LABELS)
        for name in q.metrics:
            known |= declared.get(name, (set(), ""))[0]
        for name, labels in q.matcher_labels.items():
            if name in declared and labels - declared[name][0]:
                problems.append(f"{ref.where}: {name} has no label(s) {sorted(labels - declared[name][0])}")
        unknown = (q.grouping_labels | ref.legend_labels) - known
        if unknown:
            problems.append(f"{ref.where}: label(s) {sorted(unknown)} belong to none of {sorted(q.metrics)}")
    return problems


def test_deploy_refers_only_to_metrics_the_gateway_exports(scrape: str) -> None:
    exported = exported_names(scrape)
    assert "clefgate_requests" in exported.families, "the scrape is not a clefgate /metrics page"
    problems = name_problems(all_references(), exported, declared_labels())
    assert not problems, "\n".join(problems)


def test_deploy_uses_only_declared_label_names() -> None:
    problems = label_problems(all_references(), declared_labels())
    assert not problems, "\n".join(problems)


def test_the_checks_catch_a_wrong_name_and_wrong_labels() -> None:
    scrape = ("# HELP clefgate_requests_total r\n# TYPE clefgate_requests_total counter\n"
              "# HELP clefgate_added_latency_seconds a\n# TYPE clefgate_added_latency_seconds histogram\n")
    exported = exported_names(scrape)
    declared: Declared = {"clefgate_requests_total": ({"verdict", "job", "instance"}, "counter")}
    good = Reference("good", 'sum by (verdict) (rate(clefgate_requests_total{job=~".+"}[1m])) + '
                     "histogram_quantile(0.5, sum by (le) (rate(clefgate_added_latency_seconds_bucket[1m])))", frozenset({"verdict"}))
    assert name_problems([good], exported, declared) == []
    typo = Reference("typo", "rate(clefgate_request_total[1m])")
    assert name_problems([typo], exported, declared) == ["typo: clefgate_request_total: not declared anywhere in gateway/"]
    assert name_problems([Reference("raw", "clefgate_added_latency_seconds")], exported, declared)  # a histogram has no bare series
    wrong = Reference("wrong", 'sum by (verdicts) (rate(clefgate_requests_total{status="200"}[1m]))', frozenset({"rule"}))
    assert label_problems([wrong], declared) == ["wrong: clefgate_requests_total has no label(s) ['status']",
                                                 "wrong: label(s) ['rule', 'verdicts'] belong to none of ['clefgate_requests_total']"]


# The families issue 8 asks the dashboard to show; the check above keeps each one real.
DASHBOARD_TOPICS = {
    "request rate by verdict and source": "clefgate_requests_total",
    "gateway-added latency": "clefgate_added_latency_seconds_bucket",
    "upstream latency": "clefgate_upstream_latency_seconds_bucket",
    "model latency": "clefgate_model_latency_seconds_bucket",
    "batch size": "clefgate_model_batch_size_bucket",
    "cache hit ratio": "clefgate_decision_cache_requests_total",
    "breaker state": "clefgate_breaker_state",
    "fallback rate": "clefgate_model_fallbacks_total",
    "challenges issued": "clefgate_challenges_issued_total",
    "challenges passed": "clefgate_challenges_passed_total",
    "challenges failed": "clefgate_challenges_failed_total",
    "solve time": "clefgate_challenge_solve_seconds_bucket",
    "top rules": "clefgate_rule_matches_total",
    "upstream health": "clefgate_backend_up",
    "per-worker memory": "clefgate_worker_rss_bytes",
}

ALERT_TOPICS = {
    "breaker open": "clefgate_breaker_state",
    "model provider fell back from CUDA to CPU": "clefgate_model_loaded_info",
    "fallback rate": "clefgate_model_fallbacks_total",
    "challenge pass rate": "clefgate_challenges_passed_total",
    "p99 added latency": "clefgate_added_latency_seconds_bucket",
    "no healthy backend": "clefgate_backend_up",
    "decision-log drops": "clefgate_decision_log_drops_total",
}


def test_dashboard_and_alerts_cover_what_operators_need() -> None:
    in_dashboard = set().union(*(parse_promql(r.expr).metrics for r in dashboard_references()))
    in_alerts = set().union(*(parse_promql(r.expr).metrics for r in alert_references()))
    assert not {t for t, m in DASHBOARD_TOPICS.items() if m not in in_dashboard}, "dashboard topics without a panel"
    assert not {t for t, m in ALERT_TOPICS.items() if m not in in_alerts}, "alert topics without a rule"
