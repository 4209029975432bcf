#!/usr/bin/env python3
"""Build the clefgate Grafana dashboard (deploy/grafana/clefgate.json) from this file.

The dashboard is generated so that its ~40 panels share one layout, one datasource
variable and one label filter, and so that every query is plain data a test can read:
tests/deploy/test_deploy.py regenerates it and compares, parses every query with promtool,
and checks every metric name against what a running gateway exports.

    python deploy/grafana/dashboard.py > deploy/grafana/clefgate.json

Edit panels here, not in the JSON (an export from the Grafana UI can be turned back
into panels below by hand).
"""

from __future__ import annotations

import json
import sys
from typing import Any

# Every query filters on these template variables (a Prometheus may scrape several
# clefgate deployments: pick one job, some instances).
SEL = 'job=~"$job", instance=~"$instance"'
RI = "$__rate_interval"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

GRID_WIDTH = 24


class Layout:
    """Places panels left to right in rows of 24 columns, and numbers them."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.next_id = 1

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def add(self, panel: dict[str, Any], w: int = 8, h: int = 8) -> None:
        if self.x + w > GRID_WIDTH:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_height = max(self.row_height, h)

    def _newline(self) -> None:
        if self.x:
            self.y += self.row_height
        self.x, self.row_height = 0, 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False, fmt: str = "time_series") -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto", "refId": ref,
                         "range": not instant, "instant": instant, "format": fmt}
    return t


def targets(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [target(expr, legend, ref=chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def timeseries(title: str, description: str, tgts: list[dict[str, Any]], unit: str = "short", stack: bool = False,
               min_zero: bool = True, overrides: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if not stack else 60,
                              "showPoints": "never", "spanNulls": False,
                              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    defaults: dict[str, Any] = {"unit": unit, "custom": custom}
    if min_zero:
        defaults["min"] = 0
    return {"type": "timeseries", "title": title, "description": description, "datasource": DATASOURCE, "targets": tgts,
            "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title: str, description: str, tgts: list[dict[str, Any]], unit: str = "short", thresholds: list[tuple[float | None, str]] | None = None,
         mappings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    steps = [{"color": color, "value": value} for value, color in (thresholds or [(None, "green")])]
    return {"type": "stat", "title": title, "description": description, "datasource": DATASOURCE, "targets": tgts,
            "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps},
                                         "mappings": mappings or []}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "area", "justifyMode": "auto", "textMode": "auto"}}


def state_timeline(title: str, description: str, tgts: list[dict[str, Any]], mappings: list[dict[str, Any]],
                   thresholds: list[tuple[float | None, str]]) -> dict[str, Any]:
    steps = [{"color": color, "value": value} for value, color in thresholds]
    return {"type": "state-timeline", "title": title, "description": description, "datasource": DATASOURCE, "targets": tgts,
            "fieldConfig": {"defaults": {"mappings": mappings, "thresholds": {"mode": "absolute", "steps": steps},
                                         "color": {"mode": "thresholds"}}, "overrides": []},
            "options": {"showValue": "auto", "mergeValues": True, "rowHeight": 0.9,
                        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False}}}


def bar_gauge(title: str, description: str, tgts: list[dict[str, Any]], unit: str = "reqps") -> dict[str, Any]:
    return {"type": "bargauge", "title": title, "description": description, "datasource": DATASOURCE, "targets": tgts,
            "fieldConfig": {"defaults": {"unit": unit, "min": 0, "color": {"mode": "continuous-BlYlRd"}}, "overrides": []},
            "options": {"orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True,
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}}


def value_map(mapping: dict[int, tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"type": "value", "options": {str(k): {"text": text, "color": color, "index": i}
                                          for i, (k, (text, color)) in enumerate(mapping.items())}}]


def quantiles(metric: str, by: str = "", qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> list[tuple[str, str]]:
    """histogram_quantile queries for ``metric`` (a histogram's base name), one per quantile."""
    group = f"{by}, le" if by else "le"
    prefix = "{{" + by + "}} " if by else ""
    return [(f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{{SEL}}}[{RI}])))", f"{prefix}p{round(q * 100):g}")
            for q in qs]


def rate_by(metric: str, by: str, extra: str = "") -> str:
    matchers = f"{SEL}, {extra}" if extra else SEL
    return f"sum by ({by}) (rate({metric}{{{matchers}}}[{RI}]))"


def build() -> dict[str, Any]:
    L = Layout()

    # ------------------------------------------------------------------ overview
    L.row("Overview")
    L.add(stat("Requests/s", "All requests answered by the gateway, any status.",
               [target(f"sum(rate(clefgate_requests_total{{{SEL}}}[{RI}]))")], unit="reqps"), w=3, h=5)
    L.add(stat("Blocked", "Share of requests answered with a block page (rules, model or fallback).",
               [target(f'sum(rate(clefgate_requests_total{{{SEL}, verdict="block"}}[{RI}])) / sum(rate(clefgate_requests_total{{{SEL}}}[{RI}]))')],
               unit="percentunit"), w=3, h=5)
    L.add(stat("Challenged", "Share of requests answered with a proof-of-work challenge.",
               [target(f'sum(rate(clefgate_requests_total{{{SEL}, verdict="challenge"}}[{RI}])) / sum(rate(clefgate_requests_total{{{SEL}}}[{RI}]))')],
               unit="percentunit"), w=3, h=5)
    L.add(stat("Added latency p99", "99th percentile of the time the gateway adds to a request.",
               [target(f"histogram_quantile(0.99, sum by (le) (rate(clefgate_added_latency_seconds_bucket{{{SEL}}}[{RI}])))")],
               unit="s", thresholds=[(None, "green"), (0.01, "orange"), (0.05, "red")]), w=3, h=5)
    L.add(stat("Ready", "Gateways ready for traffic / gateways scraped.",
               [target(f"sum(clefgate_ready{{{SEL}}})", "ready"), target(f"count(clefgate_ready{{{SEL}}})", "scraped", ref="B")]),
          w=3, h=5)
    L.add(stat("Shadow mode", "1 when a policy only logs what it would do (shadow); rollout below 100% enforces for part of the clients.",
               [target(f"max by (policy) (clefgate_policy_shadow{{{SEL}}})", "{{policy}}")],
               mappings=value_map({0: ("enforcing", "green"), 1: ("shadow", "blue")})), w=3, h=5)
    L.add(stat("Rollout", "Share of clients for which each policy's model decisions are enforced (the rest run in shadow).",
               [target(f"min by (policy) (clefgate_policy_rollout_percent{{{SEL}}})", "{{policy}}")], unit="percent",
               thresholds=[(None, "blue"), (100, "green")]), w=3, h=5)
    L.add(stat("Version", "Gateway versions running (instances per version).",
               [target(f"count by (version) (clefgate_build_info{{{SEL}}})", "{{version}}")]), w=3, h=5)

    # ------------------------------------------------------------------ traffic
    L.row("Traffic and verdicts")
    L.add(timeseries("Requests by verdict", "Requests/s by the action taken: forward, challenge or block.",
                     targets((rate_by("clefgate_requests_total", "verdict"), "{{verdict}}")), unit="reqps", stack=True))
    L.add(timeseries("Requests by decision source", "Who decided: rule, model, cache, fallback (model unavailable), shadow or default.",
                     targets((rate_by("clefgate_requests_total", "source"), "{{source}}")), unit="reqps", stack=True))
    L.add(timeseries("Responses by status", "Status codes sent to clients, the backends' and the gateway's own.",
                     targets((rate_by("clefgate_requests_total", "status"), "{{status}}")), unit="reqps", stack=True))
    L.add(timeseries("Requests by route and backend", "Where forwarded traffic went.",
                     targets((rate_by("clefgate_requests_total", "route, backend", 'verdict="forward"'), "{{route}} -> {{backend}}")),
                     unit="reqps"))
    L.add(timeseries("Refused before deciding", "Requests the gateway refused as malformed, too large or too slow (400/408/413/431), by reason.",
                     targets((rate_by("clefgate_client_errors_total", "reason"), "{{reason}}")), unit="reqps"))
    L.add(timeseries("Policy decisions", "Model and fallback decisions by action and whether they were enforced, shadowed or outside the rollout; "
                     "corroborated: model verdicts short of a block that a fallback rule turned into one (policy.block_attack_corroborated); "
                     "challenged, not blocked: blocks on P(attack) alone the model abstained from (an unfamiliar payload, "
                     "policy.abstain_unfamiliar) or that no value's syntax witnessed (policy.block_needs_syntax).",
                     targets((rate_by("clefgate_policy_decisions_total", "action, mode"), "{{action}} ({{mode}})"),
                             (rate_by("clefgate_corroborated_blocks_total", "rule, mode"), "corroborated by {{rule}} ({{mode}})"),
                             (rate_by("clefgate_model_abstained_total", "policy"), "challenged, unfamiliar ({{policy}})"),
                             (rate_by("clefgate_model_unwitnessed_total", "kind"), "challenged, no {{kind}} syntax")), unit="reqps"))

    # ------------------------------------------------------------------ latency
    L.row("Latency")
    L.add(timeseries("Gateway-added latency", "Time the gateway adds: request head to upstream write, plus upstream head to client write.",
                     targets(*quantiles("clefgate_added_latency_seconds")), unit="s"), w=12)
    L.add(timeseries("Upstream latency", "Time from sending a request upstream to its response head, by backend.",
                     targets(*quantiles("clefgate_upstream_latency_seconds", by="backend", qs=(0.5, 0.99))), unit="s"), w=12)

    # ------------------------------------------------------------------ model
    L.row("Model (Clef-flash)")
    L.add(timeseries("Model latency", "Time a request waits for the model (queue + batch run), by model.",
                     targets(*quantiles("clefgate_model_latency_seconds", by="model", qs=(0.5, 0.99))), unit="s"))
    L.add(timeseries("Batch run time", "Time of one ONNX run (a whole batch) in its worker thread.",
                     targets(*quantiles("clefgate_model_inference_seconds", by="model", qs=(0.5, 0.99))), unit="s"))
    L.add(timeseries("Batch size", "Requests per model run: mean and 99th percentile.",
                     targets((f"sum by (model) (rate(clefgate_model_batch_size_sum{{{SEL}}}[{RI}])) / "
                              f"sum by (model) (rate(clefgate_model_batch_size_count{{{SEL}}}[{RI}]))", "{{model}} mean"),
                             (f"histogram_quantile(0.99, sum by (model, le) (rate(clefgate_model_batch_size_bucket{{{SEL}}}[{RI}])))",
                              "{{model}} p99"))))
    L.add(timeseries("Decision cache hit ratio", "Share of model lookups answered by the TTL cache (coalesced: waited for an identical request in flight).",
                     targets((f'sum(rate(clefgate_decision_cache_requests_total{{{SEL}, result="hit"}}[{RI}])) / '
                              f"sum(rate(clefgate_decision_cache_requests_total{{{SEL}}}[{RI}]))", "hit"),
                             (f'sum(rate(clefgate_decision_cache_requests_total{{{SEL}, result="coalesced"}}[{RI}])) / '
                              f"sum(rate(clefgate_decision_cache_requests_total{{{SEL}}}[{RI}]))", "coalesced")),
                     unit="percentunit"))
    L.add(state_timeline("Circuit breaker", "Model circuit breaker per instance: closed (model in use), half-open (trial calls), open (skipped).",
                         targets((f"max by (instance, model) (clefgate_breaker_state{{{SEL}}})", "{{instance}} {{model}}")),
                         mappings=value_map({0: ("closed", "green"), 1: ("half-open", "orange"), 2: ("open", "red")}),
                         thresholds=[(None, "green"), (1, "orange"), (2, "red")]))
    L.add(timeseries("Fallback rate", "Share of model-bound requests decided by the configured fallback, and the causes.",
                     targets((f"sum(rate(clefgate_model_fallbacks_total{{{SEL}}}[{RI}])) / (sum(rate(clefgate_model_fallbacks_total{{{SEL}}}[{RI}])) + "
                              f"sum(rate(clefgate_model_decisions_total{{{SEL}}}[{RI}])))", "fallback share"),
                             (rate_by("clefgate_model_fallbacks_total", "mode, cause") + " / ignoring(mode, cause) group_left() "
                              f"(sum(rate(clefgate_model_fallbacks_total{{{SEL}}}[{RI}])) + sum(rate(clefgate_model_decisions_total{{{SEL}}}[{RI}])))",
                              "{{mode}}: {{cause}}")),
                     unit="percentunit"))
    L.add(timeseries("Model failures", "Failed model calls by kind: timeout, error, invalid output, overload (queue full), breaker open.",
                     targets((rate_by("clefgate_model_failures_total", "model, kind"), "{{model}} {{kind}}")), unit="reqps"))
    L.add(timeseries("Model queue", "Requests waiting for or inside a model run.",
                     targets((f"sum by (model) (clefgate_model_queue{{{SEL}}})", "{{model}}"))))
    L.add(timeseries("Decisions from the model", "Requests decided from model probabilities, by source (model run or cache).",
                     targets((rate_by("clefgate_model_decisions_total", "source"), "{{source}}")), unit="reqps", stack=True))
    L.add(stat("Model loaded", "Model versions loaded, with the provider they really run on (cuda, cpu) and the precision; "
               "a CUDA deployment showing cpu has fallen back (alert ClefgateModelNotOnCuda).",
               [target(f"count by (model, provider, precision) (clefgate_model_loaded_info{{{SEL}}})",
                       "{{model}} on {{provider}} ({{precision}})")],
               thresholds=[(None, "blue")]), w=12, h=5)
    L.add(stat("Model load time", "Seconds the last load of each model took, warm-up included (per instance, the slowest).",
               [target(f"max by (model) (clefgate_model_load_seconds{{{SEL}}})", "{{model}}")], unit="s"), w=12, h=5)

    # ------------------------------------------------------------------ challenges
    L.row("Challenges")
    L.add(timeseries("Challenges", "Proof-of-work pages served, answers verified (a pass cookie issued), and answers refused.",
                     targets((f"sum(rate(clefgate_challenges_issued_total{{{SEL}}}[{RI}]))", "issued"),
                             (f"sum(rate(clefgate_challenges_passed_total{{{SEL}}}[{RI}]))", "passed"),
                             (f"sum(rate(clefgate_challenges_failed_total{{{SEL}}}[{RI}]))", "failed")), unit="reqps"))
    L.add(timeseries("Challenge pass rate", "Verified answers per challenge served. A collapse means a broken page (or a solver farm "
                     "giving up); a jump to 100% on a route people rarely use can mean a solver farm.",
                     targets((f"sum(rate(clefgate_challenges_passed_total{{{SEL}}}[{RI}])) / sum(rate(clefgate_challenges_issued_total{{{SEL}}}[{RI}]))",
                              "pass rate")), unit="percentunit"))
    L.add(timeseries("Solve time", "Time from serving a challenge to its verified answer (people on slow phones are the long tail).",
                     targets(*quantiles("clefgate_challenge_solve_seconds")), unit="s"))
    L.add(timeseries("Refused answers", "Challenge answers refused, by reason (bad solution, expired, replayed, wrong client...).",
                     targets((rate_by("clefgate_challenges_failed_total", "reason"), "{{reason}}")), unit="reqps"))
    L.add(timeseries("Pass cookies", "Pass cookies presented: accepted, re-challenged (behaviour drifted), or refused and why.",
                     targets((rate_by("clefgate_pass_cookies_total", "result"), "{{result}}")), unit="reqps"))
    L.add(timeseries("Block pages", "Block pages served, by status (403, 429...).",
                     targets((rate_by("clefgate_block_pages_total", "status"), "{{status}}")), unit="reqps"))

    # ------------------------------------------------------------------ rules
    L.row("Rules")
    L.add(bar_gauge("Top rules", "The ten rules deciding the most requests, over the selected range.",
                    [target(f"topk(10, sum by (rule, action) (rate(clefgate_rule_matches_total{{{SEL}}}[$__range])))",
                            "{{rule}} ({{action}})", instant=True)]), w=12, h=10)
    L.add(timeseries("Rule matches", "Requests/s decided by each rule.",
                     targets((rate_by("clefgate_rule_matches_total", "rule"), "{{rule}}")), unit="reqps"), w=12, h=10)
    L.add(timeseries("Rate-limited", "Requests over a rule's rate limit, by rule.",
                     targets((rate_by("clefgate_rate_limited_total", "rule"), "{{rule}}")), unit="reqps"), w=8)
    L.add(timeseries("Routed by rules", "Requests sent to a backend by 'route' rules.",
                     targets((rate_by("clefgate_rule_routes_total", "rule"), "{{rule}}")), unit="reqps"), w=8)
    L.add(timeseries("No rule matched", "Requests that reached the end of the rule table, by what rules.default did with them.",
                     targets((rate_by("clefgate_rule_defaults_total", "outcome"), "{{outcome}}")), unit="reqps"), w=8)

    # ------------------------------------------------------------------ upstreams
    L.row("Upstreams")
    L.add(state_timeline("Backend servers up", "1 when a server takes traffic (health checks pass, not ejected), per instance of the gateway.",
                         targets((f"min by (backend, server) (clefgate_backend_up{{{SEL}}})", "{{backend}} {{server}}")),
                         mappings=value_map({0: ("down", "red"), 1: ("up", "green")}),
                         thresholds=[(None, "red"), (1, "green")]), w=12)
    L.add(timeseries("Upstream errors", "Failures talking to backends, by kind (connect, timeout, reset, protocol).",
                     targets((rate_by("clefgate_upstream_errors_total", "backend, kind"), "{{backend}} {{kind}}")), unit="reqps"), w=12)
    L.add(timeseries("Health checks failing", "Failed active health probes per second, and passive ejections.",
                     targets((rate_by("clefgate_health_checks_total", "backend, server", 'result="fail"'), "{{backend}} {{server}} probe failed"),
                             (f"sum by (backend, server) (increase(clefgate_backend_ejections_total{{{SEL}}}[{RI}]))",
                              "{{backend}} {{server}} ejected")), unit="short"))
    L.add(timeseries("Outstanding upstream requests", "Requests in flight to each server.",
                     targets((f"sum by (backend, server) (clefgate_backend_outstanding_requests{{{SEL}}})", "{{backend}} {{server}}"))))
    L.add(timeseries("Connections", "Open client, upstream and tunnel connections, and idle pooled upstream connections.",
                     targets((f"sum by (side) (clefgate_open_connections{{{SEL}}})", "{{side}} open"),
                             (f"sum(clefgate_upstream_idle_connections{{{SEL}}})", "upstream idle"))))

    # ------------------------------------------------------------------ process
    L.row("Process and state")
    L.add(timeseries("Memory per worker", "Resident memory of each worker process.",
                     targets((f"max by (instance, worker) (clefgate_worker_rss_bytes{{{SEL}}})", "{{instance}} worker {{worker}}")),
                     unit="bytes"))
    L.add(timeseries("Per-client state", "Estimated memory of the per-client windows and rate-limit buckets.",
                     targets((f"sum by (instance, table) (clefgate_client_state_bytes{{{SEL}}})", "{{instance}} {{table}}")),
                     unit="bytes"))
    L.add(timeseries("Logs dropped", "Decision-log and access-log lines dropped because the writer fell behind (requests never wait).",
                     targets((rate_by("clefgate_decision_log_drops_total", "reason"), "decision log: {{reason}}"),
                             (f"sum(rate(clefgate_access_log_dropped_total{{{SEL}}}[{RI}]))", "access log")), unit="short"))
    L.add(timeseries("Reloads and restarts", "Config reloads by result, and worker processes restarted after dying.",
                     targets((f"sum by (result) (increase(clefgate_config_reloads_total{{{SEL}}}[{RI}]))", "reload {{result}}"),
                             (f"sum(increase(clefgate_worker_restarts_total{{{SEL}}}[{RI}]))", "worker restarts"))))
    L.add(timeseries("Shared state (Redis)", "0 while Redis fails and local state decides; fallbacks and errors per second.",
                     targets((f"min(clefgate_shared_state_up{{{SEL}}})", "up"),
                             (rate_by("clefgate_shared_state_fallback_total", "kind"), "fallback {{kind}}"),
                             (rate_by("clefgate_redis_errors_total", "op"), "error {{op}}"))))
    L.add(timeseries("Evictions from bounded tables", "Entries dropped because a bounded table was full: per-client windows and "
                     "rate buckets, decision cache (size; expiry is normal), challenge nonces. Sustained evictions mean the bound is too small.",
                     targets((rate_by("clefgate_client_state_evictions_total", "table"), "clients: {{table}}"),
                             (rate_by("clefgate_decision_cache_evictions_total", "reason"), "decision cache: {{reason}}"),
                             (f"sum(rate(clefgate_challenge_nonces_evicted_total{{{SEL}}}[{RI}]))", "challenge nonces")), unit="short"))

    return {
        "uid": "clefgate",
        "title": "clefgate",
        "description": "clefgate edge gateway: verdicts, latency, the Clef-flash model, challenges, rules, upstreams, processes.",
        "tags": ["clefgate", "gateway"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-3h", "to": "now"},
        "timezone": "",
        "links": [],
        "annotations": {"list": [
            {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
             "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"},
            {"datasource": DATASOURCE, "enable": True, "iconColor": "orange", "name": "Config reloads",
             "expr": f"changes(clefgate_config_generation{{{SEL}}}[1m]) > 0", "step": "1m", "titleFormat": "config reloaded"},
        ]},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {}, "hide": 0,
             "refresh": 1, "regex": "", "options": []},
            {"name": "job", "label": "Job", "type": "query", "datasource": DATASOURCE, "query": {"query": "label_values(clefgate_build_info, job)",
             "refId": "job"}, "definition": "label_values(clefgate_build_info, job)", "refresh": 2, "includeAll": True, "multi": True,
             "allValue": ".+", "current": {}, "hide": 0, "sort": 1, "options": [], "regex": ""},
            {"name": "instance", "label": "Instance", "type": "query", "datasource": DATASOURCE,
             "query": {"query": 'label_values(clefgate_build_info{job=~"$job"}, instance)', "refId": "instance"},
             "definition": 'label_values(clefgate_build_info{job=~"$job"}, instance)', "refresh": 2, "includeAll": True, "multi": True,
             "allValue": ".+", "current": {}, "hide": 0, "sort": 1, "options": [], "regex": ""},
        ]},
        "panels": L.panels,
    }


def render() -> str:
    """The dashboard as the JSON text committed in deploy/grafana/clefgate.json."""
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
