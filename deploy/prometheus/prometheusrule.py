#!/usr/bin/env python3
"""Print deploy/prometheus/alerts.yaml wrapped as a Prometheus Operator PrometheusRule.

    python deploy/prometheus/prometheusrule.py > deploy/k8s/monitoring/prometheusrule.yaml

alerts.yaml stays the one place where rules are written; tests/deploy/test_deploy.py fails
when the Kubernetes copy no longer matches it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
HEADER = """\
# The alert rules of deploy/prometheus/alerts.yaml for the Prometheus Operator.
# Generated: python deploy/prometheus/prometheusrule.py > deploy/k8s/monitoring/prometheusrule.yaml
# The Prometheus resource must select it (its ruleSelector, often a `release` label).
"""


class _Dumper(yaml.SafeDumper):
    """Block style, list items indented under their key (as yamllint wants), multi-line strings as literal blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def render(alerts_path: Path = HERE / "alerts.yaml") -> str:
    groups = yaml.safe_load(alerts_path.read_text(encoding="utf-8"))["groups"]
    manifest = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "clefgate", "labels": {"app.kubernetes.io/name": "clefgate"}},
        "spec": {"groups": groups},
    }
    return HEADER + yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, width=120, indent=2)


if __name__ == "__main__":
    sys.stdout.write(render())
