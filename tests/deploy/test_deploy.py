"""deploy/: every artifact checked by the tool that consumes it, plus the promises between them.

Validators (all offline): kubernetes-validate on every rendered Kubernetes object (core
kinds, strict, at pinned Kubernetes versions) and small JSON schemas for the Prometheus
Operator kinds; ``kubectl kustomize`` renders each kustomization; ``promtool`` checks the
Prometheus config and rules and runs the alert unit tests; ``hadolint`` lints the
Dockerfiles; ``yamllint`` every YAML file; ``check-jsonschema`` validates compose.yaml
against the Compose spec schema it ships; ``systemd-analyze`` verifies the unit and
scores its sandboxing; ``clefgate check`` loads every shipped config.

Images are not built here (no Docker engine); the Dockerfiles are linted and their
promises (non-root, health check, stop signal, what is copied) are read from them.
Metric names in the dashboard and alerts are checked against a running gateway in
tests/deploy/test_deploy_metrics.py.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DATA = Path(__file__).resolve().parents[1] / "data" / "deploy"
VENV_BIN = Path(sys.executable).parent

# Kubernetes versions the manifests must be valid for: the oldest we support and the
# newest kubernetes-validate knows. Pinned, so a package upgrade cannot move them.
K8S_VERSIONS = ("1.30.0", "1.37.0")
KUSTOMIZATIONS = ("sidecar", "sidecar-gpu", "gateway-tier", "gateway-tier-gpu", "monitoring")
CRD_SCHEMAS = {("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring-v1.json",
               ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring-v1.json"}
DOCKERFILES = ("Dockerfile", "Dockerfile.cuda")
# Where the images put things (deploy/Dockerfile*) and what stands for it in this checkout.
IMAGE_APP = "/opt/clefgate/app/"
# The systemd unit's layout (deploy/systemd/clefgate.service).
UNIT_VENV = "/opt/clefgate/venv/bin/"


def tool(name: str) -> str:
    """Path of a validator: the virtualenv's (PyPI packages) first, then PATH (Debian packages)."""
    for candidate in (VENV_BIN / name, shutil.which(name)):
        if candidate and Path(candidate).exists():
            return str(candidate)
    pytest.fail(f"{name} is not installed: `make test` installs it (the [test] extra, or .ci/system-deps)")


def run(*cmd: str, cwd: Path = ROOT, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# ============================================================================ YAML and Dockerfiles

def test_yamllint_passes_on_every_yaml_file_in_deploy() -> None:
    result = run(sys.executable, "-m", "yamllint", "--strict", "-c", str(DEPLOY / ".yamllint"), str(DEPLOY))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_hadolint_passes(dockerfile: str) -> None:
    result = run(tool("hadolint"), "--no-color", "--config", str(DEPLOY / ".hadolint.yaml"), str(DEPLOY / dockerfile))
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_config_still_catches_problems(tmp_path: Path) -> None:
    """The settings that pass our Dockerfiles must not pass a careless one."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install flask\nCMD python app.py\n")
    result = run(tool("hadolint"), "--no-color", "--config", str(DEPLOY / ".hadolint.yaml"), str(bad))
    assert result.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3042", "DL3025"):
        assert rule in result.stdout, result.stdout


class Dockerfile:
    """The instructions of a Dockerfile, with line continuations joined and ARG defaults known."""

    def __init__(self, path: Path) -> None:
        self.path = path
        text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
        self.instructions: list[tuple[str, str]] = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            keyword, _, rest = line.partition(" ")
            self.instructions.append((keyword.upper(), rest.strip()))
        self.args = {}
        for kw, rest in self.instructions:
            if kw == "ARG" and "=" in rest:
                name, _, value = rest.partition("=")
                self.args[name] = value

    def expand(self, value: str) -> str:
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: self.args.get(m.group(1) or m.group(2), m.group(0)), value)

    def final_stage(self) -> list[tuple[str, str]]:
        starts = [i for i, (kw, _) in enumerate(self.instructions) if kw == "FROM"]
        return self.instructions[starts[-1]:]

    def all(self, keyword: str, stage: list[tuple[str, str]] | None = None) -> list[str]:
        return [rest for kw, rest in (stage if stage is not None else self.instructions) if kw == keyword]


@pytest.fixture(params=DOCKERFILES)
def dockerfile(request: pytest.FixtureRequest) -> Dockerfile:
    return Dockerfile(DEPLOY / request.param)


def test_image_is_multi_stage_and_runs_as_a_fixed_non_root_user(dockerfile: Dockerfile) -> None:
    assert len(dockerfile.all("FROM")) >= 2, "multi-stage: build tools stay out of the runtime image"
    users = dockerfile.all("USER", dockerfile.final_stage())
    assert users, "the runtime stage must switch to a non-root USER"
    uid, _, gid = dockerfile.expand(users[-1]).partition(":")
    assert uid.isdigit() and int(uid) > 0, f"USER must be numeric (runAsNonRoot verifies it): {users[-1]}"
    assert not gid or (gid.isdigit() and int(gid) > 0)


def test_image_health_check_stop_signal_and_entrypoint(dockerfile: Dockerfile) -> None:
    final = dockerfile.final_stage()
    (healthcheck,) = dockerfile.all("HEALTHCHECK", final)
    assert "/opt/clefgate/healthcheck.py" in healthcheck and "/readyz" in healthcheck
    assert "curl" not in healthcheck and "wget" not in healthcheck
    assert dockerfile.all("STOPSIGNAL", final) == ["SIGTERM"]
    assert json.loads(dockerfile.all("ENTRYPOINT", final)[-1]) == ["python", "-m", "gateway"]
    cmd = json.loads(dockerfile.all("CMD", final)[-1])
    assert cmd[:3] == ["serve", "--config", "/etc/clefgate/clefgate.yaml"]
    env = " ".join(dockerfile.all("ENV", final))
    admin_url = re.search(r"CLEFGATE_ADMIN_URL=(\S+)", env)
    assert admin_url, "the health check needs CLEFGATE_ADMIN_URL"
    cfg = load_yaml(DEPLOY / "config" / "clefgate.yaml")
    assert admin_url.group(1).rsplit(":", 1)[1] == cfg["admin"]["listen"].rsplit(":", 1)[1]
    exposed = {int(p) for line in dockerfile.all("EXPOSE", final) for p in line.split()}
    assert exposed == {int(cfg["listen"].rsplit(":", 1)[1]), int(cfg["admin"]["listen"].rsplit(":", 1)[1])}


def test_image_writes_only_to_its_declared_volume(dockerfile: Dockerfile) -> None:
    final = dockerfile.final_stage()
    volumes = [v for line in dockerfile.all("VOLUME", final) for v in json.loads(line)]
    assert volumes == ["/var/lib/clefgate"]
    env = " ".join(dockerfile.all("ENV", final))
    assert "PYTHONDONTWRITEBYTECODE=1" in env, "a read-only root filesystem cannot take .pyc files"
    assert any("compileall" in r for r in dockerfile.all("RUN")), "byte-compile at build time instead"
    cfg = load_yaml(DEPLOY / "config" / "clefgate.yaml")
    assert cfg["decision_log"]["path"].startswith("/var/lib/clefgate/")


def test_image_bakes_model_and_rules_but_never_secrets(dockerfile: Dockerfile) -> None:
    copies = [dockerfile.expand(c).split() for c in dockerfile.all("COPY")]
    local = [c for c in copies if not c[0].startswith("--from")]
    sources = {src.rstrip("/") for c in local for src in c[:-1]}
    assert {"gateway", "rules", "models/repository", "deploy/config/clefgate.yaml"} <= sources
    for src in sources:
        assert not re.search(r"secret|credential|token|\.env$|\.pem$|\.key$", src, re.I), f"{src} looks like a secret"
        assert (ROOT / src).exists(), f"COPY {src}: not in the repository, the build would fail"
    # secrets only ever come from files or the environment at run time
    for kw in ("ENV", "ARG", "LABEL"):
        for line in dockerfile.all(kw):
            assert not re.search(r"(SECRET|TOKEN|PASSWORD|_KEY)\w*=\S", line, re.I), f"{kw} {line}"
    # the throwaway secrets made for the build-time `clefgate check` do not outlive it
    check_runs = [r for r in dockerfile.all("RUN") if "gateway check" in r]
    assert check_runs and all("rm -rf /run/secrets/clefgate" in r for r in check_runs)


def test_dockerignore_lets_in_exactly_what_the_image_copies(dockerfile: Dockerfile) -> None:
    ignore = (DEPLOY / f"{dockerfile.path.name}.dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [p.strip() for p in ignore if p.strip() and not p.startswith("#")]
    assert patterns[0] == "*", "start from nothing and let in what the image needs"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = {src.rstrip("/") for c in dockerfile.all("COPY") if not c.startswith("--from")
              for src in dockerfile.expand(c).split()[:-1]}
    assert copied == allowed


@pytest.mark.parametrize(("variant", "distribution"), [("cpu", "onnxruntime"), ("gpu", "onnxruntime-gpu")])
def test_image_requirements_are_the_serving_dependencies(variant: str, distribution: str) -> None:
    result = run(sys.executable, str(DEPLOY / "image" / "requirements.py"), "--onnxruntime", variant,
                 "--onnxruntime-version", "1.31.1", str(ROOT / "pyproject.toml"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    deps = pyproject["project"]["dependencies"]
    assert f"{distribution}==1.31.1" in lines
    assert len(lines) == len(deps)
    assert [line for line in lines if not line.startswith("onnxruntime")] == [d for d in deps if not d.startswith("onnxruntime")]
    training = {re.split(r"[<>=\[ ;]", d)[0].lower() for d in pyproject["project"]["optional-dependencies"]["train"]}
    assert not training & {re.split(r"[<>=\[ ;]", line)[0].lower() for line in lines}, "no training packages (torch) in an image"


def test_image_requirements_refuse_a_project_without_onnxruntime(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy"]\n')
    result = run(sys.executable, str(DEPLOY / "image" / "requirements.py"), str(tmp_path / "pyproject.toml"))
    assert result.returncode == 1 and "no onnxruntime" in result.stderr


def test_cuda_image_pins_onnxruntime_gpu_and_checks_the_cuda_major_version() -> None:
    cuda = Dockerfile(DEPLOY / "Dockerfile.cuda")
    assert cuda.args["CUDA_IMAGE"].startswith("nvidia/cuda:") and "cudnn-runtime" in cuda.args["CUDA_IMAGE"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", cuda.args["ONNXRUNTIME_VERSION"])
    assert any("--onnxruntime gpu" in r for r in cuda.all("RUN"))
    assert any("build_and_package_info" in r and "CUDA_VERSION" in r for r in cuda.all("RUN")), "the CUDA major version check"
    cpu = Dockerfile(DEPLOY / "Dockerfile")
    assert any("--onnxruntime cpu" in r for r in cpu.all("RUN"))
    assert cpu.args["ONNXRUNTIME_VERSION"] == cuda.args["ONNXRUNTIME_VERSION"], "one onnxruntime version for both images"


# ============================================================================ health-check script

class _Admin:
    """A throwaway HTTP server answering /healthz 200 and /readyz 503 (a draining gateway)."""

    def __enter__(self) -> str:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200 if self.path == "/healthz" else 503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _healthcheck(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, str(DEPLOY / "image" / "healthcheck.py"), *args], capture_output=True, text=True,
                          env={**os.environ, "CLEFGATE_ADMIN_URL": url}, timeout=30, check=False)


def test_healthcheck_script_follows_the_status_code() -> None:
    with _Admin() as url:
        assert _healthcheck(url, "/healthz").returncode == 0
        draining = _healthcheck(url)  # /readyz by default
        assert draining.returncode == 1 and "503" in draining.stderr


def test_healthcheck_script_fails_when_nothing_listens() -> None:
    with _Admin() as url:
        pass  # the port is closed again
    result = _healthcheck(url, "--timeout", "1")
    assert result.returncode == 1 and url in result.stderr


# ============================================================================ configs: every shipped config loads

def _secrets(tmp: Path) -> Path:
    folder = tmp / "secrets"
    folder.mkdir()
    for name in ("challenge-key", "admin-token"):
        (folder / name).write_text("0123456789abcdef" * 4 + "\n")
    return folder


def check_config(text: str, etc: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``clefgate check`` on a config written for the image or the unit, with its paths mapped to this checkout.

    A config without backends is checked the way it is run: with ``--upstream`` (the
    image's default config and compose's); one with backends exactly as it is.
    """
    secrets = _secrets(tmp)
    state = tmp / "state"
    state.mkdir()
    mapped = (text.replace(IMAGE_APP, f"{ROOT}/").replace("/etc/clefgate/", f"{etc}/")
              .replace("/run/secrets/clefgate/", f"{secrets}/").replace("/run/credentials/clefgate.service/", f"{secrets}/")
              .replace("/var/lib/clefgate/", f"{state}/"))
    assert "/opt/clefgate" not in mapped and "/run/" not in mapped, "a path this test does not know how to map"
    path = tmp / "clefgate.yaml"
    path.write_text(mapped, encoding="utf-8")
    upstream = [] if (yaml.safe_load(text) or {}).get("backends") else ["--upstream", "http://127.0.0.1:8000"]
    return run(sys.executable, "-m", "gateway", "check", "--config", str(path), *upstream, timeout=120)


SHIPPED_CONFIGS = {
    "image": DEPLOY / "config" / "clefgate.yaml",
    "compose": DEPLOY / "compose" / "clefgate.yaml",
    "systemd": DEPLOY / "systemd" / "clefgate.yaml",
}


@pytest.mark.parametrize("name", sorted(SHIPPED_CONFIGS))
def test_shipped_config_passes_clefgate_check(name: str, tmp_path: Path) -> None:
    path = SHIPPED_CONFIGS[name]
    result = check_config(path.read_text(encoding="utf-8"), path.parent, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no model" not in result.stdout, "the check must have loaded the model"


GATEWAY_CONFIGS = sorted([*SHIPPED_CONFIGS.values(), *K8S.glob("*/clefgate.yaml")])


@pytest.mark.parametrize("path", GATEWAY_CONFIGS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_deploy_config_uses_the_baked_model_rules_and_state_folder(path: Path) -> None:
    cfg = load_yaml(path)
    assert cfg["model"]["enabled"] is True, "model.enabled is off by default; a deployment scores with the shipped model"
    assert cfg["model"]["repository"] == IMAGE_APP + "models/repository"
    assert IMAGE_APP + "rules/default.yaml" in cfg["rules"]["files"]
    assert cfg["rules"]["fallback_files"] == [IMAGE_APP + "rules/injections.yaml"], "degraded mode keeps the injection signatures"
    assert cfg["rules"]["lists_dir"] == IMAGE_APP + "rules/lists"
    assert cfg["decision_log"]["path"].startswith("/var/lib/clefgate/")
    assert cfg["timeouts"]["drain_s"] > 0


# ============================================================================ docker compose

def test_compose_file_matches_the_compose_spec_schema() -> None:
    result = run(sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(DEPLOY / "compose.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_schema_check_rejects_a_misspelt_key(tmp_path: Path) -> None:
    broken = (DEPLOY / "compose.yaml").read_text(encoding="utf-8").replace("stop_grace_period:", "stop_grace:")
    (tmp_path / "compose.yaml").write_text(broken)
    result = run(sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(tmp_path / "compose.yaml"))
    assert result.returncode != 0 and "stop_grace" in result.stdout


def _duration_s(value: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", value)
    assert parts and "".join(n + u for n, u in parts) == value, f"not a duration: {value}"
    return sum(float(n) * units[u] for n, u in parts)


def test_compose_stack_is_wired_together() -> None:
    compose = load_yaml(DEPLOY / "compose.yaml")
    services = compose["services"]
    gw = services["clefgate"]
    # the config the gateway gets is the folder mounted at /etc/clefgate
    mounts = {m.split(":")[1]: m.split(":")[0] for m in gw["volumes"]}
    config_dir = (DEPLOY / mounts["/etc/clefgate"]).resolve()
    cfg = load_yaml(config_dir / "clefgate.yaml")
    assert gw["command"][:3] == ["serve", "--config", "/etc/clefgate/clefgate.yaml"]
    upstream = gw["command"][gw["command"].index("--upstream") + 1]
    origin_port = services["origin"]["command"][services["origin"]["command"].index("--port") + 1]
    assert upstream == f"http://origin:{origin_port}"
    assert _duration_s(gw["stop_grace_period"]) > cfg["timeouts"]["drain_s"], "compose must wait longer than the drain"
    assert gw["read_only"] is True and "/var/lib/clefgate" in mounts and cfg["decision_log"]["path"].startswith("/var/lib/clefgate/")
    # Prometheus scrapes the gateway's admin port, by service name
    prom = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    (job,) = prom["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"clefgate:{cfg['admin']['listen'].rsplit(':', 1)[1]}"]
    # Grafana loads the dashboard from where the provisioning file looks
    provider = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "clefgate.yaml")["providers"][0]
    graf = {m.split(":")[1]: m.split(":")[0] for m in services["grafana"]["volumes"]}
    dashboards = [target for target in graf if target.startswith(provider["options"]["path"] + "/")]
    assert dashboards and all((DEPLOY / graf[d]).is_file() for d in dashboards)
    datasource = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"compose mounts {source}, which does not exist"


# ============================================================================ Prometheus

def test_promtool_checks_the_compose_prometheus_config(tmp_path: Path) -> None:
    # promtool resolves rule_files relative to the config; check the folder as mounted
    folder = tmp_path / "prometheus"
    shutil.copytree(DEPLOY / "prometheus", folder)
    result = run(tool("promtool"), "check", "config", str(folder / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_checks_the_alert_rules() -> None:
    result = run(tool("promtool"), "check", "rules", str(DEPLOY / "prometheus" / "alerts.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_unit_tests_pass() -> None:
    result = run(tool("promtool"), "test", "rules", "alerts_test.yaml", cwd=DEPLOY / "prometheus")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_and_the_annotations_operators_need() -> None:
    alerts = [r for g in load_yaml(DEPLOY / "prometheus" / "alerts.yaml")["groups"] for r in g["rules"]]
    tested = {t["alertname"] for case in load_yaml(DEPLOY / "prometheus" / "alerts_test.yaml")["tests"]
              for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    for rule in alerts:
        assert rule["alert"] in tested, f"{rule['alert']} has no promtool test that makes it fire"
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_prometheusrule_for_kubernetes_is_alerts_yaml() -> None:
    result = run(sys.executable, str(DEPLOY / "prometheus" / "prometheusrule.py"))
    assert result.returncode == 0, result.stderr
    committed = (K8S / "monitoring" / "prometheusrule.yaml").read_text(encoding="utf-8")
    assert committed == result.stdout, "regenerate: python deploy/prometheus/prometheusrule.py > deploy/k8s/monitoring/prometheusrule.yaml"
    assert yaml.safe_load(committed)["spec"]["groups"] == load_yaml(DEPLOY / "prometheus" / "alerts.yaml")["groups"]


# ============================================================================ Grafana

def test_dashboard_json_is_what_the_generator_builds() -> None:
    result = run(sys.executable, str(DEPLOY / "grafana" / "dashboard.py"))
    assert result.returncode == 0, result.stderr
    assert (DEPLOY / "grafana" / "clefgate.json").read_text(encoding="utf-8") == result.stdout, \
        "regenerate: python deploy/grafana/dashboard.py > deploy/grafana/clefgate.json"


def _rects_overlap(a: dict[str, int], b: dict[str, int]) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_dashboard_layout_and_datasources_are_sound() -> None:
    dash = json.loads((DEPLOY / "grafana" / "clefgate.json").read_text(encoding="utf-8"))
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "job", "instance"} <= variables
    for i, p in enumerate(panels):
        pos = p["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24 and pos["h"] > 0, p["title"]
        for q in panels[:i]:
            assert not _rects_overlap(pos, q["gridPos"]), f"{p['title']!r} overlaps {q['title']!r}"
        if p["type"] == "row":
            continue
        assert p["title"] and p["description"], f"panel {p['id']} needs a title and a description"
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert 'job=~"$job"' in t["expr"] and 'instance=~"$instance"' in t["expr"], f"{p['title']}: filter by $job and $instance"


def dashboard_exprs() -> list[str]:
    dash = json.loads((DEPLOY / "grafana" / "clefgate.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in dash["annotations"]["list"] if "expr" in a]
    return exprs


def grafana_to_promql(expr: str) -> str:
    """Replace Grafana's variables with values Prometheus would see."""
    return (expr.replace("$__rate_interval", "1m").replace("$__range", "1h")
            .replace('"$job"', '".+"').replace('"$instance"', '".+"'))


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    exprs = dashboard_exprs()
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}", "expr": grafana_to_promql(e)}
                                                         for i, e in enumerate(exprs)]}]}
    assert all("$" not in r["expr"] for r in rules["groups"][0]["rules"]), "a Grafana variable this test does not replace"
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = run(tool("promtool"), "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(exprs)} rules found" in result.stdout


# ============================================================================ Kubernetes

def render(kustomization: str) -> list[dict[str, Any]]:
    result = run(tool("kubectl"), "kustomize", str(K8S / kustomization))
    assert result.returncode == 0, f"kubectl kustomize {kustomization}:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(name) for name in KUSTOMIZATIONS}


def test_every_manifest_file_belongs_to_a_kustomization_or_is_the_secret_template() -> None:
    used: set[Path] = set()
    for kfile in K8S.rglob("kustomization.yaml"):
        k = load_yaml(kfile)
        used.add(kfile)
        for entry in k.get("resources", []) + k.get("components", []):
            used.add((kfile.parent / entry).resolve())
        for patch in k.get("patches", []):
            used.add((kfile.parent / patch["path"]).resolve())
        for gen in k.get("configMapGenerator", []):
            used.update((kfile.parent / f.split("=")[-1]).resolve() for f in gen.get("files", []))
    orphans = [p.relative_to(K8S) for p in K8S.rglob("*.yaml")
               if p.resolve() not in used and p.parent.resolve() not in used and p.name != "secret.example.yaml"]
    assert not orphans, f"YAML files no kustomization uses: {orphans}"
    assert sorted(p.parent.name for p in K8S.rglob("kustomization.yaml") if p.parent.parent == K8S) == sorted(KUSTOMIZATIONS)


def _validate_object(doc: dict[str, Any], version: str) -> None:
    import kubernetes_validate

    key = (doc["apiVersion"], doc["kind"])
    if key in CRD_SCHEMAS:
        schema = json.loads((DATA / CRD_SCHEMAS[key]).read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator(schema).validate(doc)
        return
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        pytest.fail(f"{doc['kind']} {doc['apiVersion']} is neither a Kubernetes {version} kind nor a CRD with a schema in {DATA}")
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} is invalid for Kubernetes {version}: {path}: {exc.message}")


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_validate_every_rendered_object(rendered: dict[str, list[dict[str, Any]]], version: str) -> None:
    kinds = set()
    for docs in rendered.values():
        for doc in docs:
            _validate_object(doc, version)
            kinds.add(doc["kind"])
    _validate_object(load_yaml(K8S / "secret.example.yaml"), version)
    expected = {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor",
                "PrometheusRule", "Namespace"}
    assert expected <= kinds, f"missing kinds: {expected - kinds}"


def test_validation_rejects_what_it_should() -> None:
    """A misspelt field in a core kind and a CRD without endpoints are both caught."""
    import kubernetes_validate

    deployment = load_yaml(K8S / "sidecar" / "deployment.yaml")
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 60
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)
    monitor = load_yaml(K8S / "sidecar" / "servicemonitor.yaml")
    monitor["spec"]["endpoints"] = []
    schema = json.loads((DATA / CRD_SCHEMAS[("monitoring.coreos.com/v1", "ServiceMonitor")]).read_text(encoding="utf-8"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(monitor)


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _containers(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}


def _prestop_s(container: dict[str, Any]) -> float:
    hook = container.get("lifecycle", {}).get("preStop", {})
    if "sleep" in hook:
        return float(hook["sleep"]["seconds"])
    command = hook.get("exec", {}).get("command", [])
    assert command[:1] == ["sleep"], f"{container['name']}: preStop must be a sleep ({hook})"
    return float(command[1])


def _gateway_config(docs: list[dict[str, Any]], deployment: dict[str, Any]) -> dict[str, Any]:
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mount = next(m for m in _containers(deployment)["clefgate"]["volumeMounts"] if m["mountPath"] == "/etc/clefgate")
    cm_name = volumes[mount["name"]]["configMap"]["name"]
    (cm,) = [c for c in _by_kind(docs, "ConfigMap") if c["metadata"]["name"] == cm_name]
    return {"configmap": cm, "config": yaml.safe_load(cm["data"]["clefgate.yaml"])}


def _deployments(rendered: dict[str, list[dict[str, Any]]]) -> Iterator[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    for name, docs in rendered.items():
        for d in _by_kind(docs, "Deployment"):
            yield name, docs, d


def test_drain_fits_in_the_grace_period(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs, deployment in _deployments(rendered):
        spec = deployment["spec"]["template"]["spec"]
        grace = spec["terminationGracePeriodSeconds"]
        cfg = _gateway_config(docs, deployment)["config"]
        containers = _containers(deployment)
        gateway_done = _prestop_s(containers["clefgate"]) + cfg["timeouts"]["drain_s"]
        assert gateway_done < grace, f"{name}: preStop + drain_s ({gateway_done}s) must end before the grace period ({grace}s)"
        for other in containers.values():
            if other["name"] == "clefgate":
                continue
            # the application must keep serving while the gateway drains requests to it
            assert _prestop_s(other) >= gateway_done, f"{name}: {other['name']} stops before clefgate has drained"
            assert _prestop_s(other) < grace


def test_probes_and_ports_of_every_gateway_container(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs, deployment in _deployments(rendered):
        gw = _containers(deployment)["clefgate"]
        cfg = _gateway_config(docs, deployment)["config"]
        ports = {p["name"]: p["containerPort"] for p in gw["ports"]}
        assert ports["http"] == int(cfg["listen"].rsplit(":", 1)[1]), name
        assert ports["admin"] == int(cfg["admin"]["listen"].rsplit(":", 1)[1]), name
        assert cfg["admin"]["listen"].startswith("0.0.0.0:"), f"{name}: the kubelet probes the pod IP"
        assert gw["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}, name
        assert gw["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}, name
        assert gw["startupProbe"]["httpGet"]["path"] == "/healthz", name
        assert gw["args"] == ["serve", "--config", "/etc/clefgate/clefgate.yaml"], name


_QUANTITY = re.compile(r"^(\d+(\.\d+)?)(m|k|Ki|Mi|Gi|Ti|M|G|T)?$")
_FACTORS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}


def _quantity(value: str | int) -> float:
    m = _QUANTITY.match(str(value))
    assert m, f"{value!r} is not a Kubernetes quantity"
    return float(m.group(1)) * _FACTORS[m.group(3)]


def test_pods_are_restricted_and_sized(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The Pod Security Standard "restricted" profile, and requests <= limits."""
    for name, docs, deployment in _deployments(rendered):
        spec = deployment["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] > 0
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert spec["automountServiceAccountToken"] is False
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, f"{name}/{c['name']}"
            assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add"), f"{name}/{c['name']}"
            requests, limits = c["resources"]["requests"], c["resources"].get("limits", {})
            assert "memory" in limits, f"{name}/{c['name']}: a memory limit bounds a leak to one pod"
            for res, amount in requests.items():
                if res in limits:
                    assert _quantity(amount) <= _quantity(limits[res]), f"{name}/{c['name']}: {res} request > limit"
        gw = _containers(deployment)["clefgate"]
        cfg = _gateway_config(docs, deployment)["config"]
        assert cfg["workers"] <= _quantity(gw["resources"]["limits"]["cpu"]), f"{name}: more workers than CPUs"
        # every writable path of the gateway is a volume, never the image
        mounts = {m["mountPath"]: m for m in gw["volumeMounts"]}
        assert "/tmp" in mounts and "/var/lib/clefgate" in mounts and mounts["/etc/clefgate"]["readOnly"] is True
        assert mounts["/run/secrets/clefgate"]["readOnly"] is True


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_services_pdbs_monitors_and_hpa_point_at_real_things(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in rendered.items():
        deployments = _by_kind(docs, "Deployment")
        services = _by_kind(docs, "Service")
        for svc in services:
            pods = [d for d in deployments if _selects(svc["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]
            assert pods, f"{name}: Service {svc['metadata']['name']} selects no pods"
            port_names = {p["name"] for d in pods for c in _containers(d).values() for p in c.get("ports", [])}
            for port in svc["spec"]["ports"]:
                assert port["targetPort"] in port_names, f"{name}: {svc['metadata']['name']} targets a port no container has"
        for pdb in _by_kind(docs, "PodDisruptionBudget"):
            assert any(_selects(pdb["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"]) for d in deployments)
        for monitor in _by_kind(docs, "ServiceMonitor"):
            targets = [s for s in services if _selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
            assert len(targets) == 1, f"{name}: ServiceMonitor must select exactly the admin Service"
            assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in targets[0]["spec"]["ports"]}
            assert all(p["port"] == 9090 for p in targets[0]["spec"]["ports"]), "only the admin port is scraped"
        for hpa in _by_kind(docs, "HorizontalPodAutoscaler"):
            ref = hpa["spec"]["scaleTargetRef"]
            assert ref["kind"] == "Deployment" and ref["name"] in {d["metadata"]["name"] for d in deployments}
            assert hpa["spec"]["minReplicas"] >= 2, "one replica cannot drain without dropping capacity to zero"
        for deployment in deployments:
            volumes = deployment["spec"]["template"]["spec"]["volumes"]
            secret_names = {v["secret"]["secretName"] for v in volumes if "secret" in v}
            assert secret_names <= {load_yaml(K8S / "secret.example.yaml")["metadata"]["name"]}


def test_public_services_never_expose_the_admin_port(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in rendered.items():
        for svc in _by_kind(docs, "Service"):
            ports = {p["targetPort"] for p in svc["spec"]["ports"]}
            assert not ({"http", "admin"} <= ports), f"{name}: {svc['metadata']['name']} mixes traffic and the admin port"
            if "admin" in ports:
                assert svc["spec"].get("clusterIP") == "None" and svc["spec"].get("type", "ClusterIP") == "ClusterIP"


def test_gpu_variants_request_a_gpu_for_the_gateway_only(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for gpu, cpu in (("sidecar-gpu", "sidecar"), ("gateway-tier-gpu", "gateway-tier")):
        (dep,) = _by_kind(rendered[gpu], "Deployment")
        (base,) = _by_kind(rendered[cpu], "Deployment")
        containers, base_containers = _containers(dep), _containers(base)
        assert containers["clefgate"]["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert containers["clefgate"]["image"].endswith("-cuda")
        assert "nvidia.com/gpu" not in base_containers["clefgate"]["resources"]["limits"]
        assert not base_containers["clefgate"]["image"].endswith("-cuda")
        for cname, c in containers.items():
            if cname != "clefgate":
                assert c == base_containers[cname], f"{gpu}: the GPU patch must not touch {cname}"
        tolerations = dep["spec"]["template"]["spec"]["tolerations"]
        assert any(t["key"] == "nvidia.com/gpu" for t in tolerations)
        # GPU targets are labelled for the alert that notices a fall-back to the CPU
        (monitor,) = _by_kind(rendered[gpu], "ServiceMonitor")
        (base_monitor,) = _by_kind(rendered[cpu], "ServiceMonitor")
        relabel = monitor["spec"]["endpoints"][0]["relabelings"]
        assert {"action": "replace", "targetLabel": "expected_provider", "replacement": "cuda"} in relabel
        assert "relabelings" not in base_monitor["spec"]["endpoints"][0]
        gpu_cfg = _gateway_config(rendered[gpu], dep)
        cpu_cfg = _gateway_config(rendered[cpu], base)
        assert gpu_cfg["config"]["model"]["providers"] == ["cuda", "cpu"]
        assert cpu_cfg["config"]["model"]["providers"] == ["cpu"]
        # apart from the providers, the GPU config is the CPU one (kept in step)
        a, b = copy.deepcopy(gpu_cfg["config"]), copy.deepcopy(cpu_cfg["config"])
        a["model"].pop("providers"), b["model"].pop("providers")
        assert a == b, f"deploy/k8s/{gpu}/clefgate.yaml drifted from deploy/k8s/{cpu}/clefgate.yaml"
        # other files of the ConfigMap (site rules) are the base's
        others = {k: v for k, v in gpu_cfg["configmap"]["data"].items() if k != "clefgate.yaml"}
        assert others == {k: v for k, v in cpu_cfg["configmap"]["data"].items() if k != "clefgate.yaml"}


@pytest.mark.parametrize("kustomization", ["sidecar", "gateway-tier", "gateway-tier-gpu"])
def test_kubernetes_gateway_config_passes_clefgate_check(rendered: dict[str, list[dict[str, Any]]], kustomization: str,
                                                        tmp_path: Path) -> None:
    docs = rendered[kustomization]
    (deployment,) = _by_kind(docs, "Deployment")
    cm = _gateway_config(docs, deployment)["configmap"]
    etc = tmp_path / "etc"
    etc.mkdir()
    for key, text in cm["data"].items():  # the ConfigMap as the pod sees it under /etc/clefgate
        (etc / key).write_text(text, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    result = check_config(cm["data"]["clefgate.yaml"], etc, work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no model" not in result.stdout, "the check must have loaded the model"


# ============================================================================ systemd

UNIT = DEPLOY / "systemd" / "clefgate.service"


def _unit() -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = ""
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections[current] = {}
            continue
        key, _, value = line.partition("=")
        sections[current].setdefault(key, []).append(value)
    return sections


def _unit_for_this_machine(tmp_path: Path) -> Path:
    """The unit with its executables pointing at this checkout's virtualenv, which verify requires to exist."""
    text = UNIT.read_text(encoding="utf-8").replace(UNIT_VENV, f"{VENV_BIN}/")
    path = tmp_path / "clefgate.service"
    path.write_text(text, encoding="utf-8")
    return path


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    assert (VENV_BIN / "clefgate").exists(), "the console script `clefgate` is missing from the virtualenv"
    result = run(tool("systemd-analyze"), "verify", str(_unit_for_this_machine(tmp_path)))
    # verify exits 0 on unknown keys and bad values but prints them: any output is a problem
    assert result.returncode == 0 and not result.stderr.strip() and not result.stdout.strip(), result.stdout + result.stderr


def test_systemd_analyze_verify_reports_mistakes(tmp_path: Path) -> None:
    path = _unit_for_this_machine(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace("ProtectSystem=strict", "ProtectSystm=strict"), encoding="utf-8")
    result = run(tool("systemd-analyze"), "verify", str(path))
    assert "Unknown key 'ProtectSystm'" in result.stderr


def test_systemd_sandbox_exposure_is_low(tmp_path: Path) -> None:
    result = run(tool("systemd-analyze"), "security", "--offline=true", "--no-pager", str(_unit_for_this_machine(tmp_path)))
    assert result.returncode == 0, result.stderr
    m = re.search(r"Overall exposure level for clefgate\.service: (\d+\.\d+)", result.stdout)
    assert m, result.stdout
    assert float(m.group(1)) <= 2.0, f"exposure {m.group(1)} (systemd-analyze security): the unit lost hardening\n{result.stdout}"


def ready_or_exited(proc: subprocess.Popen[bytes], readyz: str, timeout: float) -> bool:
    """Wait until ``readyz`` answers 200 (True), or the process exits or time runs out (False)."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(readyz, timeout=2.0) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    return False


_MDWE_WRAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# PR_SET_MDWE(PR_MDWE_REFUSE_EXEC_GAIN): what MemoryDenyWriteExecute=yes enforces, kept across execve
if libc.prctl(65, 1, 0, 0, 0) != 0:
    sys.exit(77)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def test_gateway_serves_under_memory_deny_write_execute(tmp_path: Path, demo_origin: Any) -> None:
    """The unit sets MemoryDenyWriteExecute=yes: the gateway (uvloop, httptools, onnxruntime) must run without W+X memory."""
    import os
    import signal

    from tests.harness import config_for, free_port, http_get

    assert "MemoryDenyWriteExecute" in _unit()["Service"]
    wrapper = tmp_path / "mdwe.py"
    wrapper.write_text(_MDWE_WRAPPER, encoding="utf-8")
    probe = run(sys.executable, str(wrapper), "-c", "import ctypes; print(ctypes.CDLL(None).prctl(66, 0, 0, 0, 0))")
    if probe.returncode == 77:
        pytest.skip("this kernel has no PR_SET_MDWE (Linux >= 6.3)")
    assert probe.stdout.strip() == "1", probe.stdout + probe.stderr
    key = tmp_path / "challenge-key"
    key.write_text("0123456789abcdef" * 4)
    port, admin = free_port(), free_port()
    config = config_for(demo_origin.url, listen=f"127.0.0.1:{port}", admin={"listen": f"127.0.0.1:{admin}"},
                        rules={"files": [str(ROOT / "rules" / "default.yaml")]},
                        challenge={"keys": [{"id": "k1", "secret": f"file:{key}"}]},
                        model={"enabled": True, "providers": ["cpu"]}, logging={"level": "info", "access_log": "off"})
    (tmp_path / "clefgate.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(wrapper), "-m", "gateway", "serve", "--config", str(tmp_path / "clefgate.yaml")],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            if not ready_or_exited(proc, f"http://127.0.0.1:{admin}/readyz", 60.0):
                pytest.fail(f"not ready under MDWE (exit {proc.poll()}):\n{(tmp_path / 'stderr').read_text(errors='replace')}")
            browser = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
                       "Accept": "text/html", "Accept-Language": "en"}
            for path in ("/", "/shop", "/robots.txt", "/.env"):
                status, _ = http_get(f"http://127.0.0.1:{port}{path}", timeout=10.0, headers=browser)
                assert status < 500, f"{path}: {status}\n{(tmp_path / 'stderr').read_text(errors='replace')}"
            assert proc.poll() is None
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_systemd_unit_reloads_drains_and_restarts() -> None:
    unit = _unit()
    service = unit["Service"]
    cfg = load_yaml(DEPLOY / "systemd" / "clefgate.yaml")
    assert service["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert service["KillSignal"] == ["SIGTERM"] and service["KillMode"] == ["mixed"]
    stop = service["TimeoutStopSec"][0]
    assert _duration_s(stop + "s" if stop.isdigit() else stop) > cfg["timeouts"]["drain_s"], "TimeoutStopSec must exceed drain_s"
    assert service["Restart"] == ["on-failure"] and service["RestartPreventExitStatus"] == ["2"]
    assert service["ExecStart"][0].startswith(UNIT_VENV + "clefgate serve --config /etc/clefgate/clefgate.yaml")
    for key, value in {"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "PrivateTmp": "yes",
                       "ProtectHome": "yes", "CapabilityBoundingSet": "", "StateDirectory": "clefgate"}.items():
        assert service.get(key) == [value], f"{key}={value}"
    # every credential the config reads is one the unit loads, and the reverse
    loaded = {c.split(":", 1)[0] for c in service["LoadCredential"]}
    text = (DEPLOY / "systemd" / "clefgate.yaml").read_text(encoding="utf-8")
    used = set(re.findall(r"file:/run/credentials/clefgate\.service/([\w.-]+)", text))
    assert used and used == loaded
    assert cfg["decision_log"]["path"].startswith("/var/lib/clefgate/"), "StateDirectory is the only writable path"
