"""A smoke subset in front of a different origin: Debian's nginx serving static files."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from loadtest.proxybench import SIZES, Service, nginx_binary, start_static_origin
from tests.proxy_support import GatewayThread, RawClient, gateway, get, make_config

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (.ci/system-deps)")


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    origin = start_static_origin(tmp_path_factory.mktemp("nginx"))
    yield origin
    origin.stop()


@pytest.fixture(scope="module")
def gw(nginx: Service, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    with gateway(make_config([nginx.url], tmp_path_factory.mktemp("gw"))) as g:
        yield g


def static(nginx: Service, name: str) -> bytes:
    return (nginx.workdir / "www" / f"{name}.bin").read_bytes()


def test_static_files_over_one_keep_alive_connection(gw: GatewayThread, nginx: Service) -> None:
    with httpx.Client(base_url=gw.url) as client:
        for _ in range(3):
            for name, size in SIZES.items():
                resp = client.get(f"/{name}.bin")
                assert resp.status_code == 200 and resp.content == static(nginx, name)
                assert int(resp.headers["content-length"]) == size
                assert resp.headers["server"].startswith("nginx")
                assert resp.headers["via"] == "1.1 clefgate" and resp.headers["x-request-id"]


def test_conditional_range_head_and_missing(gw: GatewayThread, nginx: Service) -> None:
    with httpx.Client(base_url=gw.url) as client:
        etag = client.get("/1k.bin").headers["etag"]
        assert client.get("/1k.bin", headers={"If-None-Match": etag}).status_code == 304
        part = client.get("/100k.bin", headers={"Range": "bytes=10-19"})
        assert part.status_code == 206 and part.content == static(nginx, "100k")[10:20]
        head = client.head("/100k.bin")
        assert head.status_code == 200 and head.headers["content-length"] == str(100 * 1024) and head.content == b""
        assert client.get("/missing").status_code == 404


def test_pipelined_and_http10(gw: GatewayThread, nginx: Service) -> None:
    with RawClient(gw.port) as c:
        c.send(get("/1k.bin") + b"HEAD /100k.bin HTTP/1.1\r\nHost: x\r\n\r\n" + get("/echo?a=%2F"))
        assert c.response().body == static(nginx, "1k")
        assert c.response(head_request=True).header("content-length") == str(100 * 1024)
        assert c.response().body == b"GET /echo?a=%2F\n"
    with RawClient(gw.port) as c:
        c.send(b"GET /100k.bin HTTP/1.0\r\n\r\n")
        assert c.response().body == static(nginx, "100k")


def test_access_log_names_nginx_as_the_server(gw: GatewayThread, nginx: Service) -> None:
    httpx.get(f"{gw.url}/1k.bin?log=1")
    line = gw.wait_log(lambda r: r["path"] == "/1k.bin?log=1")
    assert line["server"] == nginx.url and line["bytes_out"] == 1024 and line["upstream_us"] is not None
