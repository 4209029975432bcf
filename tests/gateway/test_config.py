"""Config: every good file loads, every bad file reports exactly its expected problems."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway import config as configmod
from gateway.config import ConfigError

HERE = Path(__file__).resolve().parents[1] / "config"
GOOD = sorted((HERE / "good").glob("*.yaml"))
BAD = sorted((HERE / "bad").glob("*.yaml"))


def expected_problems(path: Path) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^# expect: (.*)$", path.read_text(), re.M)]


@pytest.mark.parametrize("path", GOOD, ids=[p.name for p in GOOD])
def test_good_configs_load(path: Path) -> None:
    cfg = configmod.load(str(path))
    assert cfg.backends
    assert cfg.default_backend in cfg.backends


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_bad_configs_list_every_problem(path: Path) -> None:
    expected = expected_problems(path)
    assert expected, f"{path.name} has no '# expect:' lines"
    with pytest.raises(ConfigError) as info:
        configmod.load(str(path))
    assert info.value.source == str(path)
    assert sorted(info.value.problems) == sorted(expected)


def test_full_config_values() -> None:
    cfg = configmod.load(str(HERE / "good" / "full.yaml"))
    assert cfg.limits.max_body_bytes == 10 * 1024 * 1024
    assert cfg.limits.max_header_bytes == 32 * 1024
    assert [s.weight for s in cfg.backends["web"].servers] == [3, 1]
    assert cfg.backends["web"].health_check.expect_status == "200,204"
    assert cfg.trusted_proxies == ["10.0.0.0/8", "fd00::/8"]


def test_flags_override_the_file() -> None:
    cfg = configmod.load(str(HERE / "good" / "full.yaml"), listen="127.0.0.1:18080", admin="", workers=1,
                         trusted_proxies="192.168.0.0/16, 127.0.0.1")
    assert cfg.listen == "127.0.0.1:18080"
    assert cfg.admin.listen == ""
    assert cfg.workers == 1
    assert cfg.trusted_proxies == ["192.168.0.0/16", "127.0.0.1"]


def test_upstream_flag_needs_no_file() -> None:
    cfg = configmod.load(None, upstream="http://127.0.0.1:9000")
    assert cfg.backends["default"].servers[0].url == "http://127.0.0.1:9000"
    assert cfg.default_backend == "default"


def test_bad_flag_is_reported_with_its_path() -> None:
    with pytest.raises(ConfigError) as info:
        configmod.load(None, upstream="ftp://x", listen="nope")
    assert "backends.default.servers[0].url: 'ftp://x' is not an http(s) URL (for example http://127.0.0.1:8000)" in info.value.problems
    assert "listen: 'nope' is not HOST:PORT (for example 127.0.0.1:8080)" in info.value.problems


def test_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = configmod.validate({"backends": {"a": {"servers": ["http://h:1"]}}, "admin": {"token": "s3cret"}})
    assert configmod.redacted(cfg)["admin"]["token"] == "***"
    monkeypatch.setenv("CG_TOKEN", "from-env")
    assert configmod.resolve_secret("env:CG_TOKEN") == "from-env"


@pytest.mark.parametrize("raw,expected", [("10MiB", 10 << 20), ("1GB", 10**9), ("512", 512), ("2 KiB", 2048), (4096, 4096),
                                          ("1.5MiB", int(1.5 * (1 << 20)))])
def test_sizes(raw: object, expected: int) -> None:
    assert configmod.parse_size(raw) == expected


def test_reference_covers_every_field() -> None:
    rows = configmod.reference()
    paths = {r[0] for r in rows}
    assert {"listen", "backends.<name>.servers[].url", "limits.max_body_bytes", "timeouts.drain_s"} <= paths
    missing_docs = [r[0] for r in rows if not r[3]]
    assert not missing_docs, f"config fields without a doc string: {missing_docs}"


def test_config_reference_page_is_current() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text()
    m = re.search(r"<!-- config-reference:start -->\n(.*?)<!-- config-reference:end -->", page, re.S)
    assert m, "docs/config.md lacks the config reference markers"
    assert m.group(1) == configmod.reference_markdown(), \
        "docs/config.md is stale: regenerate it with `make docs` (clefgate config-reference)"


def test_readme_documents_every_serve_flag() -> None:
    from gateway.cli import build_parser

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    parser = build_parser()
    serve = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "serve")[1]  # type: ignore[union-attr]
    flags = [opt for action in serve._actions for opt in action.option_strings if opt.startswith("--") and opt != "--help"]
    assert flags
    for flag in flags:
        assert f"`{flag}" in readme, f"README does not document clefgate serve {flag}"
