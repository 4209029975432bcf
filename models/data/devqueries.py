"""People asking about code: a grammar of developer search queries, for the training and calibration sides.

A site's search box, a docs search or a forum search receives questions such as
"what does 2>&1 mean" or "onclick vs addEventListener". They carry the same
characters and keywords as injections (angle brackets, quotes, ``--``, ``$()``,
``../``, SQL words), in a short phrase around one or two code fragments. The
hand-written hard-negative pool (``site.HARD_QUERIES``) has a few dozen such items,
split item by item, so each side sees only a handful, and a model that saw too few
learns the fragment, not the phrasing around it.

This grammar writes such questions from question templates and code fragments that
we wrote (HTML, JavaScript, SQL, shell, paths, templates, formats). Fragments are
split item by item between the training and calibration sides (``assign``, whose
held-out share goes to training); the held-out side never draws from the grammar,
so the evaluation split is byte for byte the same with or without it and keeps its
own hard negatives as the test of whether the phrasing generalises. The share of hard-negative searches (people's and bots')
drawn from it is the training config's ``data.dev_questions``, counted among the
searches drawn from the pools (on the training side 35% of texts are real text first);
it is 0 for the versions before it, so their data is unchanged. No fragment is a
near-copy of a held-out hard query (``void 0`` is left out for being one; ``models.gate``
puts it back only to redraw the gate sets drawn with it).

Fragments are what developers look up, never complete payloads: none closes a quote
or a tag it did not open, and none calls ``alert``, ``sleep`` or a remote shell. A
few still match an injection signature on their own (``<iframe>``,
``document.cookie``, ``information_schema.tables``, a ``file:///`` URL, a Windows
system path): for a person asking about those, only a low P(attack) keeps the
signature from corroborating a block, which is what these rows teach.
``tests/models/test_flash_data.py`` checks that no generated question contains a held-out
hard negative.
"""

from __future__ import annotations

import random

from models.data.sources import Split, assign

# Code fragments, by family (the family is only documentation: all are split alike).
FRAGMENTS: tuple[str, ...] = (
    # HTML and the DOM
    "<div>", "<span class>", "<a href>", "<br/>", "<img alt>", "<iframe>", "<script defer>", "<noscript>",
    "<input type=hidden>", "<template>", "<meta charset>", "<!DOCTYPE html>", "<select multiple>", "<label for>",
    "<textarea>", "<svg viewBox>", "<link rel=preload>", "<base href>", "<form method=post>", "<button type=submit>",
    "&nbsp;", "&amp;", "&lt;", "&#39;", "onclick", "onmouseover", "onsubmit", "onerror on img", "oninput",
    "target=_blank", "rel=noopener", "data- attributes", "aria-label", "tabindex=-1", "contenteditable",
    # JavaScript
    "document.getElementById", "querySelectorAll", "addEventListener('click')", "window.location.href",
    "e.preventDefault()", "innerHTML", "textContent", "console.log()", "JSON.parse", "JSON.stringify",
    "fetch().then()", "async/await", "=> arrow function", "!== vs !=", "typeof null", "new Promise()",
    "Array.prototype.map", "Object.keys()", "setTimeout(fn, 0)", "encodeURIComponent", "decodeURI", "localStorage",
    "document.cookie", "window.open", "history.pushState", "import() dynamic", "export default", "this in callbacks",
    "?. optional chaining", "?? nullish", "`${}` template literal", "[...spread]", "for...of", "try/catch/finally",
    # URL schemes and URLs
    "mailto: link", "tel: link", "data: url", "blob: url", "about:blank", "file:/// url", "ws:// websocket",
    "?utm_source=", "#fragment in url", "%20 vs +", "%2F in path", "trailing slash /",
    # SQL
    "SELECT * FROM", "WHERE 1=1", "ORDER BY 1", "GROUP BY HAVING", "LEFT JOIN", "UNION ALL", "INSERT INTO VALUES",
    "DROP TABLE IF EXISTS", "LIKE '%abc%'", "COALESCE()", "NULL vs ''", "COUNT(*)", "-- comment in sql",
    "/* */ comment", "information_schema.tables", "CAST(x AS int)", "CONCAT()", "SUBSTRING()", "IS NOT NULL",
    "ON DUPLICATE KEY UPDATE", "CREATE INDEX", "TRUNCATE vs DELETE", "char(10)", "EXPLAIN ANALYZE",
    # shell
    "rm -rf", "chmod 777", "chmod +x", "sudo !!", "2>&1", "| grep", "&& vs ;", "$(command)", "`backticks`",
    "cat /etc/hosts", "/dev/null", "nohup &", "ls -la", "export PATH", "curl -X POST", "wget -O -", "xargs",
    "find -exec", "ps aux | grep", "kill -9", "crontab -e", "ssh-keygen", "tar -xzf", "$PATH", "~/.bashrc",
    "#!/bin/bash", "set -euo pipefail", "> vs >>", "$?", "$@",
    # paths and files
    "../", "./", "~/.ssh", "C:\\Windows\\System32", "%APPDATA%", "/var/log", "/tmp", "/proc/cpuinfo",
    ".htaccess", ".gitignore", ".env file", "web.config", "robots.txt", "sitemap.xml", "/etc/nginx/nginx.conf",
    "node_modules", "__init__.py", "package-lock.json",
    # templates and formats
    "{{ }}", "{% for %}", "${VAR}", "#{}", "<%= %>", "{% raw %}", "|safe filter", "%s", "f-string {x!r}",
    "\\d+", "[^a-z]", ".*?", "^$", "\\n vs \\r\\n", "utf-8 bom", "base64", "0x41", "NaN", "\\u00e9",
    "<?xml version?>", "CDATA", "&& in yaml", "--- yaml", "key=value", "a=1&b=2",
)

# Question shapes; {f} and {g} are fragments, {lang} a language or tool.
TEMPLATES: tuple[str, ...] = (
    "{f} meaning", "what is {f}", "what does {f} mean", "what does {f} do", "{f} example", "{f} examples",
    "how to use {f}", "{f} not working", "why is {f} not working", "{f} vs {g}", "difference between {f} and {g}",
    "is {f} safe", "{f} in {lang}", "{lang} {f}", "{f} {lang}", "{f} tutorial", "{f} syntax", "{f} syntax error",
    "{f} cheat sheet", "how to escape {f}", "{f} explained", "avoid {f}", "{f} alternative", "replace {f} with {g}",
    "{f} best practice", "when to use {f}", "{lang} {f} example", "{f} returns null", "{f} deprecated",
    "how do i {verb} {f}", "{f} and {g} together", "{f} {lang} docs", "{f} stack trace", "{f} security",
)
LANGS = ("javascript", "js", "python", "php", "bash", "sql", "mysql", "postgres", "html", "css", "react", "java",
         "go", "rust", "excel", "powershell", "node", "django", "laravel", "jquery", "typescript", "sqlite", "nginx")
VERBS = ("debug", "remove", "disable", "test", "write", "fix", "read", "print", "parse", "quote")

_SIDES: dict[Split, tuple[str, ...]] = {}


def fragments(split: Split) -> tuple[str, ...]:
    """This side's fragments; the held-out side has none (it never draws from the grammar)."""
    if split == "eval":
        return ()
    if not _SIDES:
        sides = assign(list(FRAGMENTS), "devquery", str)
        # the hash's held-out share goes to training: nothing held out draws from the grammar
        _SIDES["train"], _SIDES["calib"] = tuple(sides["train"] + sides["eval"]), tuple(sides["calib"])
    return _SIDES[split]


def query(rng: random.Random, split: Split) -> str:
    """One developer question from ``split``'s fragments (train or calib)."""
    pool = fragments(split)
    if not pool:
        raise ValueError(f"the {split} side does not draw developer questions")
    template = rng.choice(TEMPLATES)
    out = template.replace("{lang}", rng.choice(LANGS)).replace("{verb}", rng.choice(VERBS))
    out = out.replace("{f}", rng.choice(pool), 1)
    if "{g}" in out:
        out = out.replace("{g}", rng.choice(pool), 1)
    return out
