"""``clefgate demo``: the gateway in front of a bundled demo origin, on the embedded default config.

It writes its config, a generated admin secret and a decision log into a fresh temporary
folder, and prints the console's address with the secret and a ``clefgate replay`` line
for what was served.

The demo origin is a small shop-and-forum site (pages with assets, a search, a login
form, an RSS feed, a JSON API, a git-like path) so that every kind of client the
shipped rules and model know about has something realistic to request.
"""

from __future__ import annotations

import html
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "default.yaml"

_STYLE = b"body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#222}" \
         b"nav a{margin-right:1rem}.item{border-bottom:1px solid #ddd;padding:.5rem 0}"
_SCRIPT = b"document.addEventListener('DOMContentLoaded',function(){fetch('/api/items?limit=3',{headers:{'Accept':'application/json'}})" \
          b".then(function(r){return r.json()}).then(function(d){var e=document.getElementById('n');if(e)e.textContent=d.items.length})})"
_ITEMS = [{"id": i, "name": name, "price": price} for i, (name, price) in enumerate(
    [("Walnut desk", 349.0), ("Oak stool", 79.5), ("Linen lamp", 58.0), ("Cork board", 19.9), ("Brass hook", 7.5)], start=1)]
_POSTS = ["Which finish for an oak table: oil or wax?", "SELECT-ing the right lamp for a reading corner",
          "Review: the walnut desk, <b>two years</b> later", "DROP-shipping delays this month?"]


def _page(title: str, body: str) -> web.Response:
    doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
           "<link rel=stylesheet href=/static/site.css><script src=/static/site.js defer></script></head><body>"
           "<nav><a href=/>Home</a><a href=/shop>Shop</a><a href=/forum>Forum</a><a href=/search?q=lamp>Search</a>"
           "<a href=/login>Log in</a><a href=/feed.xml>RSS</a></nav>"
           f"<h1>{html.escape(title)}</h1>{body}<p><small>API items: <span id=n>…</span></small></p></body></html>")
    return web.Response(text=doc, content_type="text/html")


async def home(_: web.Request) -> web.Response:
    return _page("Demo shop", "<p>This origin sits behind clefgate. Browse around; scripts and scanners get a different view.</p>")


async def shop(_: web.Request) -> web.Response:
    rows = "".join(f"<div class=item><a href=/shop/{i['id']}>{html.escape(str(i['name']))}</a> — {i['price']:.2f} €</div>"
                   for i in _ITEMS)
    return _page("Shop", rows)


async def product(request: web.Request) -> web.Response:
    pid = int(request.match_info["pid"])
    item = next((i for i in _ITEMS if i["id"] == pid), None)
    if item is None:
        raise web.HTTPNotFound(text="no such product")
    return _page(str(item["name"]), f"<p>{item['price']:.2f} €</p><form method=post action=/cart><input type=hidden name=id value={pid}>"
                                    "<button>Add to cart</button></form>")


async def forum(_: web.Request) -> web.Response:
    return _page("Forum", "".join(f"<div class=item>{html.escape(t)}</div>" for t in _POSTS))


async def search(request: web.Request) -> web.Response:
    q = request.query.get("q", "")
    hits = [i for i in _ITEMS if q.lower() in str(i["name"]).lower()]
    return _page(f"Search: {q}", "".join(f"<div class=item>{html.escape(str(i['name']))}</div>" for i in hits) or "<p>No results.</p>")


async def login_form(_: web.Request) -> web.Response:
    return _page("Log in", "<form method=post action=/login><label>User <input name=user></label> "
                           "<label>Password <input type=password name=password></label><button>Log in</button></form>")


async def login(request: web.Request) -> web.Response:
    await request.post()
    return web.json_response({"ok": False, "error": "invalid credentials"}, status=401)


async def cart(request: web.Request) -> web.Response:
    await request.post()
    raise web.HTTPSeeOther("/shop")


async def feed(_: web.Request) -> web.Response:
    items = "".join(f"<item><title>{html.escape(t)}</title><link>http://demo.local/forum</link></item>" for t in _POSTS)
    return web.Response(text=f'<?xml version="1.0"?><rss version="2.0"><channel><title>Demo forum</title>{items}</channel></rss>',
                        content_type="application/rss+xml")


async def api_items(request: web.Request) -> web.Response:
    limit = max(1, min(50, int(request.query.get("limit", "50") or 50)))
    return web.json_response({"items": _ITEMS[:limit]})


async def robots(_: web.Request) -> web.Response:
    return web.Response(text="User-agent: *\nDisallow: /login\n", content_type="text/plain")


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name == "site.css":
        return web.Response(body=_STYLE, content_type="text/css", headers={"Cache-Control": "max-age=3600"})
    if name == "site.js":
        return web.Response(body=_SCRIPT, content_type="application/javascript", headers={"Cache-Control": "max-age=3600"})
    raise web.HTTPNotFound()


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def origin_app() -> web.Application:
    """The demo origin site."""
    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/shop", shop)
    app.router.add_get("/shop/{pid:\\d+}", product)
    app.router.add_get("/forum", forum)
    app.router.add_get("/search", search)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/cart", cart)
    app.router.add_get("/feed.xml", feed)
    app.router.add_get("/api/items", api_items)
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/healthz", healthz)
    return app


def default_config(upstream: str, listen: str, admin: str) -> dict[str, Any]:
    """The embedded default config, pointed at ``upstream``."""
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    raw["listen"] = listen
    raw.setdefault("admin", {})["listen"] = admin
    raw["backends"] = {"origin": {"servers": [upstream], "health_check": {"path": "/healthz"}}}
    raw["default_backend"] = "origin"
    # rule paths in the embedded config are relative to the package folder: make them absolute, every list of them
    rules = raw.setdefault("rules", {})
    for key in ("files", "fallback_files"):
        if key in rules:
            rules[key] = [str((DEFAULT_CONFIG.parent / f).resolve()) for f in rules[key]]
    return raw


def _wait_http(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1.0):
                return True
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return False


def prepare(workdir: Path, upstream: str, listen: str, admin: str) -> tuple[Path, str, Path]:
    """The demo's files in ``workdir``: its config, a generated admin secret (file, 0600) and where the decision log goes.

    Returns (config path, admin secret, decision log path).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(24)
    token_file = workdir / "admin-token"
    token_file.touch(mode=0o600)
    token_file.write_text(secret + "\n", encoding="utf-8")
    decisions = workdir / "decisions.jsonl"
    raw = default_config(upstream, listen, admin)
    raw["admin"] = {**raw.get("admin", {}), "token": f"file:{token_file}"}
    # every decision, rules' included: the console's lookup and `clefgate replay` see all that was served
    raw["decision_log"] = {"path": str(decisions), "rules": "all"}
    cfg_path = workdir / "clefgate.yaml"
    cfg_path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return cfg_path, secret, decisions


def banner(listen: str, admin: str, upstream: str, cfg_path: Path, secret: str, decisions: Path) -> str:
    """What the demo prints at start: where everything is, the console's secret, and what to try."""
    return (f"clefgate demo\n"
            f"  site (through the gateway): http://{listen}/\n"
            f"  demo origin (direct):       {upstream}/\n"
            f"  console:                    http://{admin}/console/\n"
            f"  console admin secret:       {secret}\n"
            f"  metrics:                    http://{admin}/metrics\n"
            f"  readiness:                  http://{admin}/readyz\n"
            f"  effective config:           {cfg_path}\n"
            f"  decision log:               {decisions}\n"
            f"  try: curl -s http://{listen}/.env   (a scanner probe: blocked; its page shows a reference to look up in the console)\n"
            f"  then: clefgate replay --config {cfg_path} {decisions}\n"
            f"        (what the rules, model and policy decide again on what was just served; edit the config's policy and run it again)\n"
            f"  files stay in {cfg_path.parent} after the demo stops. Stop with Ctrl-C.")


def run_demo(listen: str = "127.0.0.1:8080", admin: str = "127.0.0.1:9090", origin_port: int = 8000) -> int:
    """Start the demo origin (a child process) and serve the gateway in front of it, with the console and a decision log."""
    from gateway.runtime import ConfigSource
    from gateway.server import serve

    upstream = f"http://127.0.0.1:{origin_port}"
    origin = subprocess.Popen([sys.executable, "-m", "gateway.tools.demo", "--port", str(origin_port)])
    try:
        if not _wait_http(upstream + "/healthz", 15.0):
            print(f"demo origin did not start on {upstream}", file=sys.stderr)
            return 1
        workdir = Path(tempfile.mkdtemp(prefix="clefgate-demo-", dir=os.environ.get("TMPDIR") or None))
        cfg_path, secret, decisions = prepare(workdir, upstream, listen, admin)
        print(banner(listen, admin, upstream, cfg_path, secret, decisions), flush=True)
        return serve(ConfigSource(str(cfg_path)))
    finally:
        origin.send_signal(signal.SIGTERM)
        try:
            origin.wait(5)
        except subprocess.TimeoutExpired:
            origin.kill()


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m gateway.tools.demo", description="run the demo origin alone")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    args = p.parse_args(argv)
    web.run_app(origin_app(), host=args.host, port=args.port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
