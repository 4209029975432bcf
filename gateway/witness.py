"""The syntax an attack kind cannot do without: what a block on P(attack) alone needs to find.

The model says how likely a request is an attack and of which kind (``attack_kind``:
sqli, xss, traversal, cmdi, probe, other), not where. A person's request that the model
finds suspicious — a JSON value in a shape it never saw, a password like ``Password1!``, a
review, a forum post quoting code, a rich-text comment — holds no breakout: an injection
has to leave the place its value is put and do something in the language there (close the
application's string and go on in SQL, open markup that runs script, end one command and
start another, climb out of a directory), and punctuation that prose and ordinary markup
use does none of that. An apostrophe in ``don't`` or ``O'Reilly's``, ``issue #12``,
``a; b``, ``Q&A``, ``<p>``, ``<b>`` or ``<a href="https://...">`` is not a breakout.
:func:`syntax_witness` looks for breakouts, kind by kind, in every value the client chose,
decoded as the application decodes it; the policy blocks on the model alone only when the
kind the model names finds one somewhere (``policy.block_needs_syntax``), and challenges
otherwise. It is a second witness, weaker than a detector (which needs the attack itself)
and independent of the model: it reads only characters and a few keywords, never the
client's look.

A quote breaks out when it closes the string the application opened: the value's own
strings open and close in pairs, so only an odd quote can (``print('a')`` closes its own),
and an apostrophe inside a word (``don't``, ``rock'n'roll``) or after a plural before a
word (``users' data``) is English unless SQL glues to it (``x'or'1'='1``).

What each kind needs (case-insensitive, per value, in any of its decodings):

* ``sqli``: a closing quote followed by SQL (``' or 1=1``, ``'or'``, ``'--``, ``';``,
  ``')``, ``' union select``, ``'=``, ``'||``, ``'+``); a comment that ends code (``1--``,
  ``1)#``) or sits between tokens (``union/**/select``, ``/*!50000``); a tautology or
  comparison between literals after a logical operator (``1 or 1=1``, ``and 'a'='a'``); a
  subquery; a call of a function only SQL has (``benchmark(``, ``load_file(``), or of a SQL
  function after SQL (``and sleep(5)``, ``or ascii(``); ``union select``; a statement
  stacked after ``;``; ``order by 3``; a hex literal that spells text; ``@@version``;
  ``xp_cmdshell``, ``declare @q``; a value that is a statement ending in ``;``, or punctuation
  with a quote (``'``, ``'))``);
* ``xss``: script-capable markup (``<script``, ``<svg``, ``<iframe``, ``<object``,
  ``<embed``, ``<math``, ``<base``, ``<meta http-equiv``, ``<form action``, ``<link``,
  ``<style`` that imports or computes), any element with an event handler, a handler after a
  closing quote (``" onmouseover=``), a closing quote followed by JavaScript (``';alert(1)//``,
  ``'-alert(1)-'``), the end of an element whose text is raw (``</script``, ``</title``,
  ``</textarea``), a script URL (``javascript:alert(1)``, not the words ``JavaScript: the``),
  a data URL of a document or script, a template expression reaching the page's objects
  (``{{constructor.constructor(``), ``expression(``, ``alert(``, ``document.cookie``; the
  same behind HTML references or JavaScript escapes (``&lt;script``, ``\\x3csvg``);
* ``traversal`` (with file inclusion): a ``..`` segment a path goes on from (``../x``,
  ``..\\x``, ``..%2f``; not ``../ in imports``), a value that is a system path (``/etc/``,
  ``c:\\``, ``file:///``; not the URL path, a page's address however its folders are named),
  a system file the attack reads (``/etc/passwd``, ``/proc/self/``, ``win.ini``,
  ``.htaccess``, ``WEB-INF/``), a UNC start, a stream wrapper (``php://``, ``phar://``);
* ``cmdi``: a separator followed by a command (``;id``, ``| nc 10.0.0.1 4444``,
  ``&& whoami``, ``1;ls -la``, a line break after a value of one word), a substitution
  running one (``$(whoami)``, ``x`id` ``), ``${IFS}``, a redirection to a path (``> /tmp/x``,
  ``2>&1``), a command run whole with the argument it needs (``ping 127.0.0.1``,
  ``cat /etc/passwd``, ``uname -a``) or a diagnostic command alone (``whoami``), except in a
  search box (``q``, ``query``, ``search_term``, ...: a question about one), a call that
  runs one (``system('id')``), PHP's (``${@``, ``$_GET``, ``phpinfo()``), SSI, Shellshock's
  ``() { :;};``. A command word needs what makes it a command: ``a; cat lovers`` and
  ``cats & dogs`` are words, and a command quoted in Markdown (`` `ls -la` ``) is not run;
* ``other`` (template, expression-language, JNDI, deserialization, XXE, CRLF, SSI, NoSQL,
  LDAP, XPath, request forgery, open redirects): a template expression that computes or
  reaches the runtime (``{{7*7}}``, ``${jndi:``, ``{{config``, ``<%= 7*7 %>``, not
  ``{{ user.name }}``), an entity declaration, a header after an encoded or carriage-return
  line break (``%0d%0aSet-Cookie:``), serialized-object markers, ``__proto__``, Mongo
  operators, an LDAP filter, an XPath step, the closing-quote breakouts SQL has, and a value
  that is or starts like a forged URL (``//evil.example``, ``http://127.0.0.1``, ``/\\evil``,
  ``https://good.example@evil.example``), not a plain link to a public host (``https://docs.example/page``), OGNL
  reaching Struts' member access (``#_memberAccess``), a name that reaches Spring's class loader
  (``class.module.classLoader``), a JSON key that is a query operator (``"$ne":``);
* ``probe``: any of the above (a scanner's request carries whatever it tries).

Encodings no client writes for its own values (overlong UTF-8, ``%u`` escapes, a percent
sign encoded again before a syntax character, a NUL byte, UTF-7's ``+ADw-``) witness every kind.

Where values come from: the path; query and form pairs (value and name); JSON string values
and keys; multipart fields and file names; any other body as one text; cookies that are
more than a token, read as the script that wrote them reads them (:func:`cookie_values`);
and header values that ``gateway.carriers`` counts as carriers (not the
ones that only describe the client: a browser's User-Agent holds ``(`` and ``;``, and a
Referer holds ``://``, and neither is a payload). The search stops at the first witness and
runs only for requests the model already puts at or above the block threshold; it reads at most
``SEARCH_BUDGET`` characters per request (each kind named counted, a probe as every kind), and what it leaves unread
witnesses nothing.

:func:`syntax_free` asks the opposite question for ``policy.suspicion_needs_syntax``: is the request known to hold no
attack syntax anywhere? A miss there would forward, not challenge, so it reads more (every cookie, every form name and
JSON key, the raw target and a multipart body as whole texts, what short values carry in numeric contexts) and gives
up on whatever it cannot read as an application might. It runs only for requests whose P(attack), short of a block, would challenge them.
"""

from __future__ import annotations

import functools
import html
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, unquote_plus

from gateway.carriers import DESCRIPTIVE, is_token, suspicious
from gateway.features import Features
from gateway.payload.decoding import fragment, variants
from gateway.payload.locations import JSON_DEPTH, body_values, json_values, pairs

# encodings no client writes for its own values: overlong UTF-8, %u escapes, a percent sign encoded again before a
# syntax character or an evasion (``%252f``, not the ``%2520`` of a link's spaces), hex spelt-out dots, slashes and line
# breaks, a NUL byte, UTF-7's ``<``; every kind hides its syntax behind them
_EVASION = r"""%c[01]|%e0%80|%f[08]%80|%u[0-9a-f]{4}|%%[0-9a-f]|%25(?:27|22|3c|3e|2e|2f|5c|3b|7c|60|24|7b|0a|0d|00|25|c[01]|e0|f[08]|u[0-9a-f]{4})|\b0x(?:2e|2f|5c|0d0x0a)|\x00|%00|\\x00|\+adw[-a]"""

# SQL. A quote breaks out when it closes the string the application opened (the value's own strings open and close in
# pairs: only an odd quote can) and SQL follows it: a logical operator with an operand, a union, a clause, a comment, a
# statement separator, a parenthesis, a comparison or a concatenation (``' or 1=1``, ``x'or'1'='1``, ``admin'--``,
# ``1') union select``). An apostrophe inside a word is not a quote unless SQL glues to it: ``don't``, ``it's``,
# ``O'Reilly`` and ``users' and`` are English.
_SQL_OPERAND = r"""(?:[\d'"(@`-]|(?:true|false|null)\b|not\s+(?:[\d'"(]|\w+\s*\()|(?:exists|sleep|benchmark|pg_sleep|if|ascii|substr\w*|char|chr)\s*\(|case\s+when\b|select\s|[\w.$]+\s*(?:=|<|>|!=|like\b|rlike\b|regexp\b|is\b|in\b))"""
_SQL_TAIL = (r"""['"]\s*(?:(?:or|and|xor|&&|\|\|)\s*""" + _SQL_OPERAND + r"""|union\s*(?:all\s*|distinct(?:row)?\s*)?(?:\(\s*)?select\b|"""
             r"""(?:having|where)\s+""" + _SQL_OPERAND + r"""|order\s+by\b|group\s+by\b|limit\s+\d|procedure\s+analyse|into\s+(?:out|dump)file|waitfor\s+delay|"""
             r"""(?:r?like|regexp|sounds\s+like)\s+['"(]|is\s+(?:not\s+)?null\b|in\s*\(|between\s+['"\d]|"""
             r"""--(?![a-z])|#\s*$|/\*|;|\)|=|(?:<>|!=|<=|>=|<|>)\s*(?:[\d'"(@-]|\w+\s*\()|\|\||\+|&&|-\s*['"\d(])""")
# outside a quote: a comment that ends code (``1--``, ``1)#``), an empty or versioned comment between tokens
# (``union/**/select``, ``/*!50000select*/``), a tautology or comparison between literals after a logical operator
# (``1 or 1=1``, ``and 'a'='a'``), a literal equal to itself, a subquery, a call of a function only SQL has, a call of a
# SQL function after SQL, ``union select``, stacked statements, ``order by 3``, a hex literal that spells text, ``@@``,
# the keyword shapes that need nothing else, SQL Server's procedures and variables, a value of punctuation with a quote,
# a value that is a statement ending in ``;``
_SQL_LITERAL = r"""(?:-?\d+(?:\.\d+)?|n?'[^']{0,40}'?|"[^"]{0,40}"?|true|false|null)"""
_SQL_FUNC = (r"""(?:benchmark|pg_sleep|load_file|extractvalue|updatexml|group_concat|concat_ws|xp_cmdshell|name_const|"""
             r"""make_set|randomblob|sqlite_version|unhex|db_name|user_name|current_user|system_user|session_user|dbms_\w+|utl_\w+|"""
             r"""sys_context|ctxsys\.\w+|waitfor)""")
_SQL_FUNC_AFTER = r"""(?:sleep|char|chr|concat|substring|substr|mid|ascii|ord|hex|version|database|user|count|cast|convert|if|ifnull|iif|length|len|rand|floor|exp|schema|elt|nchar|unicode)"""
_SQLI = (r"""[\w'")](?<!%[0-9a-f]{2})[ \t]*(?:--[ \t+-]*|/\*[ \t]*)$|[\d'")](?<!%[0-9a-f]{2})[ \t]*#[ \t]*$|\b(?:or|and)\s+\d+\s*(?:--|#|/\*)|[\d'")]\s*--[ +]-|\w\s*/\*!?\d*\s*\w*\s*\*/\s*\w|/\*!\d*|"""
         r"""(?:\b|(?<=\d))(?:or|and|xor|having|where|when|&&|\|\|)\s*(?:\(\s*)?""" + _SQL_LITERAL + r"""\s*(?:\)\s*)?(?:=|<>|!=|<=>|<=|>=|<|>|\blike\b|\bis\b)\s*(?:\(\s*)?""" + _SQL_LITERAL
         + r"""|(?:^|[\s(])(?P<lit>\d+)\s*=\s*(?P=lit)(?![\w.])|\b(?:or|and)\s+(?:\(\s*)?(?P<same>[a-z_]\w*)\s*=\s*(?P=same)\b|\(\s*select\b[^()]{0,100}?\bfrom\b|\(\s*select\s+(?:\d+|null\b|@@|\*|(?:sleep|benchmark|pg_sleep|char|chr|concat|count|ascii|substr\w*|if|case)\b)|(?<![\w.])""" + _SQL_FUNC + r"""\s*\(|"""
         r"""(?:\b(?:or|and|xor|select|union|where|having|when|then|else)|\|\|)\s*(?:\(\s*)?""" + _SQL_FUNC_AFTER + r"""\s*\(|"""
         r"""\bunion\b(?:\s|/\*[^*]{0,40}\*/|\()*(?:all\b|distinct(?:row)?\b)?(?:\s|/\*[^*]{0,40}\*/|\()*select\b|"""
         r"""(?<!&quot)(?<!&amp)(?<!&lt)(?<!&gt)(?<!&apos)(?<!&#39)(?<!&#34);\s*(?:select|insert|update|delete|drop|create|alter|exec|execute|declare|shutdown|waitfor|truncate|grant|revoke|"""
         r"""begin|set\s+@|if\s*\(|--|#)|\border\s+by\s+(?:\d+\s*(?:$|--|#|/\*|,|;)|(?:sleep|benchmark|if)\s*\()|(?:[+=&|]|\bthen|\belse)\s*(?:sleep|benchmark|pg_sleep)\s*\(|\bwaitfor\s+delay\b|\bprocedure\s+analyse\b|"""
         r"""\binto\s+(?:out|dump)file\b|\b0x(?:(?:[2-6][0-9a-f]|7[0-9a-e])(?:00)?){3,}\b|@@[a-z_]|^[^\w\s]*['"][^\w\s]*$|"""
         r"""\bxp_cmdshell\b|\bsp_(?:password|executesql|oacreate|makewebtask|configure|addsrvrolemember)\b|\bexec(?:ute)?\s*\(\s*@|"""
         r"""\bexec\s+(?:master\.|xp_|sp_)|\bdeclare\s+@\w+|\binsert\s+into\s+[\w.]+\s*\([^)]*\)\s*values\s*\(|"""
         r"""^\s*(?:select|insert\s+into|update|delete\s+from|create\s+(?:table|user|database|function)|drop\s+(?:table|database|user)|"""
         r"""alter\s+(?:table|user)|copy|backup\s+database|declare)\b[^\n]*;\s*$|"""
         + _EVASION)

# XSS: markup that runs script (a script-capable element, any element with an event handler, a refresh, a base or a
# form target, a style that runs or imports), an event handler after a closing quote, a script URL, a data URL of a
# document or script, the end of an element whose text is raw, a template expression that reaches the page's objects,
# the dialogs and sinks a proof calls; a closing quote followed by JavaScript is ``_JS_TAIL``. Plain formatting markup
# (``<p>``, ``<b>``, ``<a href="https://...">``, ``<img src=... alt=...>``) is none of these.
_HANDLER = r"""on[a-z]{3,}\s*="""
# a script URL's scheme, with the blanks and NULs a browser skips inside it (``java\tscript:``)
_SCRIPT_SCHEME = (r"""(?:j[\s\x00]*a[\s\x00]*v[\s\x00]*a|v[\s\x00]*b|l[\s\x00]*i[\s\x00]*v[\s\x00]*e)[\s\x00]*s[\s\x00]*c[\s\x00]*r[\s\x00]*i"""
                  r"""[\s\x00]*p[\s\x00]*t[\s\x00]*:""")
_XSS = (r"""<\s*(?:/\s*)?(?:script|svg|iframe|frame|frameset|object|embed|applet|math|base|xss|import|portal|isindex|vmlframe|i?layer|bgsound|"""
        r"""handler|listener|animate|set)\b|<\s*[a-z][\w:-]*\b(?:[^<>]|<(?![a-z\s]))*?[\s/"']""" + _HANDLER + r"""|['"]\s*(?:/\s*)?""" + _HANDLER + r"""|"""
        r"""<\s*meta\b[^<>]*(?:http-equiv|charset\s*=\s*(?:['"]\s*)?(?:x-|utf-7))|<\s*(?:xml|link)\b|<\?\s*xml-stylesheet|<\s*xsl:|\bdatasrc\s*=|<\s*form\b[^<>]*\baction\s*=|<\s*link\b[^<>]*\brel\s*=\s*(?:['"]\s*)?import|"""
        r"""<\s*(?:button|input)\b[^<>]*\bformaction\s*=|<\s*style\b[^<>]*>[^<]*(?:@import|expression|javascript|behavior|-moz-binding)|"""
        r"""\b""" + _SCRIPT_SCHEME + r"""(?:\S|\s*[\w$.]+\s*[(`=])|=\s*(?:['"]\s*)?""" + _SCRIPT_SCHEME + r"""|\bmocha:\S|\bdata\s*:\s*(?:text/(?:html|javascript|xml)|application/"""
        r"""(?:x?html|xhtml\+xml|(?:x-)?(?:java|ecma)script|xml))|(?<!=)\bdata\s*:\s*image/svg\+xml|"""
        r"""<\s*/\s*(?:script|style|title|textarea|noscript|iframe|xmp|template|noembed|noframes|plaintext|select|option)\b|"""
        r"""\{\{[^{}]{0,120}?(?:constructor|\$on|\$eval|alert|prompt|confirm|fromcharcode|document|window|__proto__)|"""
        r"""(?::\s*|\b)expression(?:\(|\\0*28)|-moz-binding|\bbehavior\s*:\s*url|\b(?:alert|prompt|confirm)[(`]|\bfromcharcode\s*\(|"""
        r"""\bdocument\s*\.\s*(?:cookie|domain|write)|""" + _EVASION)

# a shell: a separator or a substitution followed by a command (``;id``, ``| nc 10.0.0.1 4444``, ``$(whoami)``,
# ``x`id` ``), a redirection to a path, a variable shells expand in place of a space, a command with the argument it
# needs run as the whole value (``ping 127.0.0.1``, ``cat /etc/passwd``, ``uname -a``), a diagnostic command alone, a
# call that runs one. A command word needs what makes it a command, so ``cats & dogs`` and ``a; cat lovers`` are words.
_COMMAND = (r"""(?:id|whoami|uname|ls|dir|cat|type|ping|curl|wget|nc|ncat|netcat|bash|sh|zsh|ksh|csh|dash|powershell|pwsh|cmd|"""
            r"""nslookup|dig|host|sleep|timeout|echo|rm|del|chmod|chown|python[0-9.]*|perl|php|ruby|node|telnet|tftp|ftp|certutil|"""
            r"""bitsadmin|ifconfig|ipconfig|systeminfo|hostname|pwd|ver|net|netstat|tasklist|env|printenv|set|find|grep|head|"""
            r"""tail|more|less|wc|base64|xxd|awk|sed|touch|mkdir|cp|mv|kill|killall|shutdown|reboot|wmic|reg|start|ps|who|w|"""
            r"""uptime|expr|exec|eval|sysinfo|phpinfo|passwd|su|sudo|crontab|socat|xterm|osascript|busybox|nohup|command|time|nice|"""
            r"""setsid|xargs|openssl|rev|ssh|scp|tar|mshta|rundll32|regsvr32|cscript|wscript|msiexec|tclsh|lua|[a-z]:\\[\w\\.]*|"""
            r"""(?:/usr)?/s?bin/\w+)""")
_COMMAND_END = r"""(?=[\s+]*(?:$|[;&|`)<>\n\r'"\\]|\$\{?ifs)|[\s+]+(?:-{1,2}\w|[/\\~$.%'"]|\d|[a-z]:[\\/]|https?:)|\(\)|\$\(\))"""
# Windows commands whose first argument is a word
_COMMAND_VERB = r"""(?:net\s+(?:user|view|localgroup|share|use|start|stop|session)|netsh\s+\w+|reg\s+(?:add|query|delete|save|export)|wmic\s+\w+)\b"""
_CMDI_BREAKOUT = (r"""(?:[;&|]|^[^\s;&|]{0,100}?(?:[\r\n]|%0[ad])++|\\[nr]|\$\()[\s+]*+(?:[`'"][\s+]*)?(?:\$\(\s*)?(?:""" + _COMMAND + _COMMAND_END + "|" + _COMMAND_VERB + r""")|"""
                  r"""[;&|]\s*\$[a-z_]\w*\s*$|=\$['"]|\(\)\s*\{\s*:\s*;\s*\}|\$\{@|\$_(?:get|post|request|server|cookie|files)\b|"""
                  r"""\bphp(?:info|version)\s*\(\s*\)|<\?php\b|\{\$\{|\$\(\s*""" + _COMMAND + r"""\b|"""
                  r"""[^\s`]`\s*""" + _COMMAND + r"""\b[^`]*`|^\s*`\s*""" + _COMMAND + r"""\b[^`]*`\s*$|"""
                  r"""(?:^|[\s\w])(?:\d?>>?|<)\s*(?:/(?:dev|tmp|etc|var|home|root|proc|usr|bin)\b|&\s*\d|~/)|<!--\s*#\s*(?:exec|include|echo|config|set|printenv|fsize|flastmod)\b|"""
                  r"""\$\{?ifs\b|\$\{\s*(?:path|home|ls_colors|pwd|shell)\s*[:%#]|\w\$(?:@|\(\)|\{\})\w|\bnet\s+(?:user|localgroup)\b|"""
                  r"""\b(?:system|exec|eval|assert|passthru|shell_exec|popen|proc_open|spawn|execsync|spawnsync|execfile)\s*\(\s*[`'"]\s*"""
                  + _COMMAND + r"""\b|\bgetruntime\s*\(\s*\)\s*\.\s*exec\b|""" + _EVASION)
# a value that is a command line run whole (``ping 127.0.0.1``, ``uname -a``, ``whoami``, ``python -c``): what a
# parameter a program hands to a shell holds, and what a question typed into a search box holds too (:data:`QUESTION_NAMES`)
_COMMAND_LINE = (r"""^\s*sleep\s+\d+\s*$|^[\s+]*""" + _COMMAND_VERB + r"""|"""
                 r"""^[\s+]*(?:uname|ping|curl|wget|cat|type|dir|ls|nc|ncat|netcat|bash|sh|zsh|powershell|cmd|nslookup|dig|sleep|echo|rm|chmod|"""
                 r"""telnet|tftp|certutil|bitsadmin)[\s+]+(?:-{1,2}\w|[/\\~]|[a-z]:[\\/]|\d{1,3}\.\d|https?:|\$)|"""
                 r"""^\s*(?:python[0-9.]*\s+-c|perl\s+-e|php\s+-r|ruby\s+-e|node\s+-e)\s|"""
                 r"""^\s*(?:whoami|id|ifconfig|ipconfig|systeminfo|hostname|uname|pwd|ver)\s*$""")
_CMDI = _CMDI_BREAKOUT + "|" + _COMMAND_LINE

# file paths: a ``..`` segment a path goes on from (``../ relative imports`` and ``..\ in Windows`` are words about one),
# or one hidden behind an encoding, a system file the attack reads anywhere, a UNC start, a stream wrapper
_TRAVERSAL_ANYWHERE = (r"""(?:\.|%2e){2}(?:[/\\]|%2f|%5c|2f|5c|%(?![0-9a-f]{2})[0-9a-z]{2})(?![\s+]|%20)|(?:[/\\]|%2f|%5c)(?:\.|%2e){2}(?:$|[/\\?;#]|%2f|%5c)|"""
                       r"""%2e%2e|(?:^|=)\s*/?[a-z]:[\\/]|/etc/(?:passwd|shadow|group|hosts|issue|motd|hostname|crontab|sudoers|apache\w*|httpd|"""
                       r"""nginx|mysql|ssh)|/proc/(?:self|\d+)/|\b(?:win|boot|php|system)\.ini\b|\bsystem32\b|"""
                       r"""\.(?:htpasswd|htaccess|bash_history)\b|\.ssh[/\\](?:id_|authorized)|\b(?:access|error)[._]log\b|/var/log/|"""
                       r"""\b(?:web|meta)-inf[/\\]|^\s*\\\\|\b(?:file|php|zip|phar|expect|jar|glob|data|compress\.\w+)://|""" + _EVASION)
# a value that is a system path (not one that words follow: ``/var/log examples`` is a search): what a file parameter
# holds, never what a URL path is (``/dev/search/`` is a page)
_SYSTEM_PATH = r"""^\s*(?:file:/*)?/?(?:etc|proc|var|opt|usr|root|tmp|srv|home|boot|sys|dev|windows|winnt|inetpub)/(?!\S*\s+[a-z]{2,}\b[^/\\]*$)"""
_TRAVERSAL = _TRAVERSAL_ANYWHERE + "|" + _SYSTEM_PATH

# what makes a web URL a forgery rather than a link (a person pastes ``https://docs.example/page``): an address the
# server reaches and the client cannot (loopback, private and link-local ranges, cloud metadata, internal names), a
# host written as one number or in hex or octal, an IPv6 literal, a name that resolves to loopback, an out-of-band
# testing service, credentials, a backslash or a character no host name holds before the host
# (``https://good.example@evil.example``), slashes no link has (``https:///evil.example``), a parent directory, a NUL, a
# URL inside it that points inwards, and a URL left open with a ``?`` so the application's own suffix becomes its query (remote file inclusion)
_HOST_END = r"""(?=[:/?#\\]|\s*$)"""
# characters a URL parser folds to ASCII (IDNA's mapping, NFKC): circled and full-width digits and letters, roman numerals,
# letter-like and mathematical letters, super- and subscripts, the ideographic full stops (``http://①②⑦.⓪.⓪.①``)
_FOLDING = "\u00b2\u00b3\u00b9\u2070-\u209f\u2100-\u218f\u2460-\u24ff\u3002\uff01-\uff65\U0001d400-\U0001d7ff"
# a URL inside a web URL's path or query that points inwards (``https://redirector.example/?to=http://localhost``)
_INNER_FORGED = r"""localhost|127\.|0+\.|\[|\d+(?=[:/?#]|$)|10\.|192\.168\.|169\.254\."""
_FORGED_HOST = (r"""[^\s/\\?#]*?[@\\%&;,'"<>{}|^`$\t""" + _FOLDING + r"""]|[^\s/]*[?#]@|localhost|127\.|0+(?:\.|""" + _HOST_END + r""")|0x[0-9a-f]|0\d|\d+""" + _HOST_END + r"""|"""
                r"""\d{1,3}(?:\.\d{1,3}){1,3}""" + _HOST_END + r"""|\[|[\w.-]*(?:\.(?:internal|local|localdomain|localhost|intranet|lan|corp|"""
                r"""home\.arpa|svc|consul)|\bmetadata|\binstance-data|\.oast\.(?:pro|live|site|online|fun|me)|\.oastify\.com|\binteract\.sh|"""
                r"""\.burpcollaborator\.net|\.dnslog\.cn|\.ceye\.io|\brequestbin\.\w+|\bwebhook\.site|\.pipedream\.net|\.canarytokens\.com|"""
                r"""\.nip\.io|\.sslip\.io|\.xip\.io|\blocaltest\.me|\blvh\.me|\.rbndr\.us)""" + _HOST_END + r"""|"""
                r"""\S*?(?:%00|\x00|\?\s*$|169\.254\.169\.254|\bmetadata\.google\.internal\b|100\.100\.100\.200|%2e%2e|%2f\.\.|/\.\.(?:[/\\]|$)|"""
                r"""[/=?&](?:https?:)?//(?:""" + _INNER_FORGED + r"""))""")

# the rest: template and expression languages (an expression that computes or reaches the runtime), JNDI lookups,
# serialized objects, XXE, response splitting, SSI, NoSQL operators, LDAP and XPath filters, a value that is a forged
# URL or starts like one (request forgery, redirects, remote inclusion: _FORGED_HOST), and the quote breakouts SQL has (XPath and NoSQL
# take them too)
_OTHER = (r"""\{\{\s*-?\d+\s*[*+/%-]|\{\{\s*\[|\{\{[^{}]{0,120}?(?:\.\s*\w+\s*\(|\b(?:passthru|shell_exec|call_user_func|system|include|dump)\b|(?<![=!<>])=(?!=)|#with\b|__\w+__|subclasses|\bmro\b|\.class\b|\bdump\s*\(|\b_self\b|\bapp\.|\bconfig\b|\bself\b|\brequest\b|\bcycler\b|\bjoiner\b|\bnamespace\b|"""
          r"""\blipsum\b|constructor|getclass|getruntime|\bsystem\b|\bpopen\b|\bimport\b|\|\s*attr\b|\[\s*['"]_)|"""
          r"""\{%[^%{}]{0,120}?(?:__\w+__|\bdump\s*\(|_context\b|\bconfig\b|subclasses|\bimport\b|popen|\bsystem\b|\bexec\b|\bdebug\b)|"""
          r"""[$#*@~]\{\s*-?\d+\s*[*+/%-]|[$#*@~]\{[^{}]{0,160}?(?:\w\s*\(|jndi|getclass|getruntime|forname|\.exec\s*\(|\bt\s*\(|"""
          r"""\bnew\s*\(|\bnew\s+[\w.]+\s*\(|\.execute\s*\(|getresource|getattribute|\brequest\.|\bsession\.|\(\s*char\s*\)|"""
          r"""tostring\s*\(|newinstance|mainmodule|\brequire\s*\(|child_process|\bclass\.|\bprocess\.|__\w+__|\bsystem\s*\(|\bself\.|applicationscope|pagecontext|\bparam\.|\bheader\.|\bcookie\.|"""
          r"""\b(?:env|sys|lower|upper|date|base64|ctx|main|spring|k8s|docker|bundle|java|jvmrunargs|hostname)\s*:|::-|\$\{)|"""
          r"""<%=?\s*-?\d+\s*[*+/-]|<%[^%<]{0,120}?(?:\w\s*\(|\bimport\b|system|exec|runtime|popen|`|%x|file\.|io\.)|\[\[\s*\d+\s*[*+]|@\(\s*\d+\s*[*+]|\?new\s*\(|freemarker\.template|"""
          r"""\$\{\s*\d|#set\s*\(|\bjndi\s*:|\bro0ab|\bo:\d+:"|\ba:\d+:\{|aced0005|!!python/|!!java|!!javax|"""
          r"""["'][@$]type["']\s*:|_\$\$nd_func\$\$_|__proto__|__reduce(?:_ex)?__|\baaeaaad/////|objectdataprovider|xamlreader|constructor\s*(?:\.\s*prototype|\.\s*constructor|\[)|"""
          r"""<!entity|<!doctype\s+\w+\s*(?:\[|\bsystem\b|\bpublic\b)|<\s*xi:include|\bxmlns:xi\b|<!--\s*#\s*(?:exec|include|echo|config|set|printenv|fsize|flastmod)\b|"""
          r"""(?<![\r\n])(?<!%0[ad])(?<!\\[rn])(?:[\r\n]|%0[ad]|\\[rn]|嘊|嘍)++\s*+(?:set-cookie|content-(?:type|length|disposition)|contenttype|x-xss-protection|"""
          r"""access-control-allow-[\w-]+|location\s*:\s*(?:https?:|//)|http/\d)\s*:?|(?<![\r\n])(?<!%0[ad])(?<!\\[rn])(?:[\r\n]|%0[ad]|\\[rn]){2,}+\s*+<\s*(?:script|svg|html)|"""
          r"""\[\s*\$\w+\s*\]|[{,]\s*['"]?\$(?:ne|gt|gte|lt|lte|eq|regex|where|exists|in|nin|or|and|not|nor|expr|function|accumulator|comment)\b|"""
          r"""#_memberaccess|@ognl\.ognlcontext\b|\bognlutil\b|@java\.lang\.\w+@|\bclass\.module\.classloader\b|^class\.classloader\b|"""
          r"""\$where\b|\bdb\.\w+\.\w+\s*\(|\bthis\.\w+\.match\s*\(|['"]\s*;\s*(?:return|sleep|while)\b|;\s*return\s+(?:true|1)\b|"""
          r"""\*\s*\)\s*\(|\)\s*\(\s*[|&!]?\s*[\w-]+\s*[=~<>]|\(\s*[|&!]\s*\(|^\s*\*\s*\(\s*[|&]|\*\s*\)+\s*(?:%00|\x00|$)|"""
          r"""\]\s*\|\s*//|//\s*\*|\b(?:count|name|string-length|substring)\s*\(\s*/|"""
          r"""^\s*(?:['"]\s*)?(?:(?!https?:)[a-z][a-z0-9+.-]{1,15}:(?:/|\\)|[a-z][a-z0-9+.-]{1,15}:[^\s/\\]*@|https?:(?:/{3,}|/{0,2}\\|/(?!/))|https?://(?:"""
          + _FORGED_HOST + r"""))|^\s*(?:https?|ftp):[^\s/\\]|"""
          r"""^\s*[/\\]{2}[/\\\t]*(?:[^\s/\\]+[.。．｡][a-z]|localhost|javascript\s*:)|^\s*[/\\]+\s*javascript\s*:|^\s*/\\|^\s*/+(?:https?|ftp):|[?=&]\s*[/\\]{2,}|"""
          r"""^\s*/*\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/|$)|[\w\]](?:https?|ftp)://|""" + _EVASION)


# JavaScript after a closing quote: a statement or an operator and a call (``';alert(1)//``, ``'-alert(1)-'``)
_JS_TAIL = r"""['"]\s*(?:[)}\]]+\s*)?(?:;|[-+*|&^,]{1,2})\s*[\w$.]+\s*[(`=]"""


class _Syntax:
    """A kind's syntax: a pattern; for the kinds a quote breaks out of, what must follow a quote that closes the
    application's string (:func:`_breakout`); for markup, the pattern again in the text with its HTML references and
    JavaScript escapes undone (``&lt;script``, ``alert&lpar;1&rpar;``, ``\\x3csvg``), which hide it from the
    application's filter and not from the browser."""

    __slots__ = ("_escapes", "_pattern", "_tail")

    def __init__(self, pattern: str, tail: str | None = None, *, escapes: bool = False) -> None:
        self._pattern = re.compile(pattern, re.IGNORECASE)
        self._tail = re.compile(tail, re.IGNORECASE) if tail else None
        self._escapes = escapes

    def search(self, text: str) -> re.Match[str] | None:
        """The first place ``text`` holds the syntax (the match's ``string`` is the text it was found in), or None."""
        m = self._find(text)
        if m is None and self._escapes and ("&" in text or "\\" in text):
            plain = html.unescape(_JS_ESCAPE.sub(lambda e: chr(int(e.group(1) or e.group(2), 16)), text))
            if plain != text:
                m = self._find(plain)
        return m

    def _find(self, text: str) -> re.Match[str] | None:
        return self._pattern.search(text) or (_breakout(text, self._tail) if self._tail is not None else None)


_JS_ESCAPE = re.compile(r"""\\(?:x([0-9a-f]{2})|u([0-9a-f]{4}))""", re.IGNORECASE)
_QUOTE = re.compile(r"""['"]""")
# an apostrophe inside a word is English (``don't``, ``O'Reilly``) unless SQL glues to it (``x'or'1``, ``a'union``)
_GLUED = re.compile(r"""'(?:or|and|xor|union|having|like|rlike|regexp|div)\b""", re.IGNORECASE)
# so is a plural's apostrophe before a word (``users' data``), unless what follows is the tail
_PLURAL = re.compile(r"""s'(?=\s+[a-z])""", re.IGNORECASE)


def _breakout(text: str, tail: re.Pattern[str]) -> re.Match[str] | None:
    """The first quote that closes a string the value did not open (the value's own strings open and close in pairs:
    only an odd quote can), with ``tail`` following it."""
    if "'" not in text and '"' not in text:
        return None
    odd = {"'": False, '"': False}
    for m in _QUOTE.finditer(text):
        i, q = m.start(), m.group()
        if q == "'" and 0 < i < len(text) - 1 and text[i - 1].isalpha():
            if text[i + 1].isalpha() and not _GLUED.match(text, i):
                continue
            if text[i - 1] in "sS" and _PLURAL.match(text, i - 1):
                found = tail.match(text, i)
                if found is not None:
                    return found
                continue
        odd[q] = not odd[q]
        if odd[q]:
            found = tail.match(text, i)
            if found is not None:
                return found
    return None


_KINDS = {"sqli": _SQLI, "xss": _XSS, "traversal": _TRAVERSAL, "cmdi": _CMDI, "other": _OTHER}
_SHARED = {"sqli": _Syntax(_SQLI, _SQL_TAIL, escapes=True), "xss": _Syntax(_XSS, _JS_TAIL, escapes=True), "other": _Syntax(_OTHER, _SQL_TAIL)}


def _syntax(traversal: str, cmdi: str) -> Mapping[str, _Syntax]:
    """Each kind's syntax, with these patterns for traversal and command injection."""
    return {**_SHARED, "traversal": _Syntax(traversal), "cmdi": _Syntax(cmdi),
            # a scanner's probe carries whatever it tries: any kind's syntax witnesses it
            "probe": _Syntax("|".join(f"(?:{pattern})" for pattern in (_SQLI, _XSS, traversal, cmdi, _OTHER)),
                             f"{_SQL_TAIL}|{_JS_TAIL}", escapes=True)}


SYNTAX = _syntax(_TRAVERSAL, _CMDI)


@functools.cache
def _placed(place: str) -> Mapping[str, _Syntax]:
    """The syntax of a value in a ``route`` (a URL path is absolute by nature: a system path's shape there is a page's
    address, ``/dev/search/``, ``/home``) or a ``question`` (a search box's value: a command line typed there is one asked
    about, ``nc -l port``, not one a program runs; the breakouts that would run one from there still witness it). Compiled
    on first use: a process that never asks pays nothing at start."""
    return _syntax(_TRAVERSAL_ANYWHERE, _CMDI) if place == "route" else _syntax(_TRAVERSAL, _CMDI_BREAKOUT)


# the names search boxes and query languages give their value (``q``, ``query``, ``search_term``, ``cql``, ...), compared
# with ``-`` and ``_`` left out and in lower case; in a query, a form or a JSON body
QUESTION_NAMES = frozenset({"q", "qs", "qry", "query", "search", "s", "term", "terms", "keyword", "keywords", "kw", "k", "find",
                            "phrase", "cql", "jql", "searchterm", "searchquery", "searchtext", "searchstring", "querystring"})
_LEAF_NAME = re.compile(r"[A-Za-z_][\w-]*")


def _syntax_at(location: str) -> Mapping[str, _Syntax]:
    """The syntax a value at ``location`` (:func:`values`) is searched for."""
    if location == "path":
        return _placed("route")
    where, _, name = location.partition(":")
    if where in ("query", "form", "json"):
        leaf = _LEAF_NAME.findall(name)
        if leaf and leaf[-1].replace("-", "").replace("_", "").lower() in QUESTION_NAMES:
            return _placed("question")
    return SYNTAX
# a cookie written by a script: a JavaScript object literal of simple keys and values, and ``a=1&b=2`` pairs
_LITERAL_ENTRY = r"""\s*[\w$]+\s*:\s*(?:'[^'\\]*'|"[^"\\]*"|[\w.+-]*)\s*"""
_OBJECT_LITERAL = re.compile(rf"\{{(?:{_LITERAL_ENTRY}(?:,{_LITERAL_ENTRY})*)?\}}")
_LITERAL_VALUE = re.compile(r"""[\w$]+\s*:\s*(?:'([^'\\]*)'|"([^"\\]*)"|([\w.+-]*))""")
_PAIRS = re.compile(r"[\w.%-]+=[^&=\s]*(?:&[\w.%-]+=[^&=\s]*)+")
# a kind the model gives at least this share of its attack_kind answer is one it names (the top kind always is)
KIND_SHARE = 0.2
# the values read, and each value's first characters (as the payload detectors bound their work)
MAX_VALUES = 256
MAX_CHARS = 4096
# and the characters searched per request, each kind's pattern counted: a pattern costs microseconds per character, and
# a request the model scores as an attack chooses how much text it sends; past this, what is unread witnesses nothing
# (the request is challenged, not forwarded)
SEARCH_BUDGET = 32768
# :func:`syntax_free` searches every kind at once (about 5 us a character): about 3,300 characters, some 16 ms at most
FREE_BUDGET = SEARCH_BUDGET // 2
_BODY_CHARS = 65536

# what :func:`syntax_free` adds to the block witness's syntax: code short values and names carry (numeric-context SQL,
# calls of SQL's functions, JavaScript's globals), NoSQL operators, prototype pollution, and schemes of request forgery
# and inclusion anywhere
SHORT_VALUE = 64
SHORT_WORDS = 6  # a short value of more words is a phrase (``positions 7 and 8``), not an operand
_SHORT_CODE = re.compile(r"""\|\||&&|^\s*\*\s*$|^\s*-{1,2}[a-z][\w-]*(?:[=\s]|$)|\b(?:location|document|window|top|parent)\s*\.|"""
                         r"""(?:^|/)\.env\b|database\.yml|wp-config|id_rsa|\.git/|web\.config|appsettings\.json|\.aws/|\.ssh/|^\s*[\w.-]+\s*[;|&\n]|^\s*(?:constructor|prototype|__proto__)\s*$|"""
                         r"""^\s*-?\d+\s*[-+;,)]\s*[\w$.]+\s*[=(`]|(?:[\r\n]|%0[ad]|\\[rn])[\t ]*[a-z][\w-]{1,40}\s*:|\b0x[0-9a-f]{2,}\b|\b(?:char|chr|sleep|pg_sleep|benchmark|waitfor|concat|substr\w*|mid|ascii|ord|unhex|hex|"""
                         r"""if|iif|case|extractvalue|updatexml|version|database|user)\s*\(|\b(?:or|and|xor|not|div|like|rlike|regexp)\s+"""
                         r"""(?:true|false|null|not|\d|['"]|\w+\s*(?:[=<>(]|\b(?:like|in|is)\b))|\b(?:alert|prompt|confirm|eval)\b|\bdelay\s+'""",
                         re.IGNORECASE)
_ARITHMETIC = re.compile(r"\s*-?\d+\s*[-+*/%^|&]\s*-?\d+\s*")
_LOOSE = re.compile(r"""\$(?:ne|eq|gt|gte|lt|lte|in|nin|regex|where|exists|expr|or|and|nor|not|elemmatch|size|type|mod|all|function)\b|"""
                    # shell: substitution, quotes and escapes inside a word, brace expansion, globbed paths
                    r"""\$\(|\w(?:''|"")\w|\$'\\|\{\w+,[^}\s]*\}|/\w*\?[\w?]*/|"""
                    # a quote closing into a framework's directive or any attribute, a template literal that assigns or calls
                    r"""['"]\s+(?:[a-z][\w:.@-]*\s+){0,4}(?:ng-|x-|v-|hx-|@|:)?[a-z][\w:.@-]*\s*=|\$\{[^{}]*[=(`]|"""
                    # OGNL (Struts), and a union whose separators are not spaces (MySQL reads %A0 as one)
                    r"""%\{|\bunion\W{1,8}(?:(?:all|distinct(?:row)?)\W{1,8})?select\b|"""
                    # characters written as CSS escapes (\0075\0072\006c: url)
                    r"""(?:\\0{0,4}[0-9a-f]{2}\s?){3}|"""
                    # an open redirect through a control character
                    r"""^\s*[/\\][\t\r\n]+[/\\]|"""
                    r"""__proto__|constructor\W{1,4}prototype|\b(?:gopher|dict|file|ftp|ldap|ldaps|rmi|jar|netdoc|phar|expect|glob|zip|"""
                    r"""php|sftp|tftp|smb)://|^\s*(?:['"]\s*)?https?:[/\\]|\bjndi\s*:|[\w'")]--[=&]|\bdata:[\w.+-]+/[\w.+-]+[;,]|[?&;]\s*[\w.\[\]-]*(?:=\s*)?(?:https?:)?//""", re.IGNORECASE)
_BLOBS = re.compile(r"""\bAAEAAAD|\bgASV[\w+/]{8}|\bBAh[\w+/]{8}|\bY29z[\w+/]{4}|c(?:os|posix|nt|subprocess|builtins|__builtin__)\n"""
                    r"""(?:system|popen|check_output|getoutput|eval|exec)\b|\x80[\x02-\x05]""")
# code of the languages an application hands a value to besides SQL, shell and markup, which the block witness leaves to
# the model (a pattern, scanned together with _LOOSE): a template or expression delimiter around more than a name
# (``{{ range }}`` asked about in a search is free, ``{{7*7}}`` and ``{% load log %}`` are not), edge and server-side
# includes, a terminal escape, a spreadsheet formula at the start of a value or a cell (a capitalised function's call, a
# DDE link, a quoted sheet reference), GraphQL's introspection and a selection nested past what a page asks (a store's
# Relay query nests five or six deep), a search engine's query object or local parameters, MongoDB's aggregation stages
# as keys, a graph database's clauses, a substring of a Windows variable, and a backquoted command glued to a word
# (quoted code in prose is free)
_AGGREGATION = r"""\$(?:match|lookup|graphlookup|out|merge|group|project|unionwith|unwind|facet|addfields|replaceroot|function|accumulator)"""
_CODE = (r"""(?:\{\{|\{%|<%|[$#*@~]\{)(?:[^{}%]{0,80}?[^\w\s{}%]|\s*\w+\s+\w)|\{!\w|<\s*(?:/\s*)?esi:|<!--\s*(?:esi|#)|\x1b|"""
         r"""(?:^|[,;\t])[ \t]{0,8}['"]?[=@+-][^\n]{0,40}?(?:(?-i:\b[A-Z][A-Z0-9.]{1,30})\(|\w\|\s*'|'![a-z]{1,3}\$?\d)|"""
         r"""\b__(?:schema|type)\b|\{(?:[^{}]*\{){7}|\*:\*|"""
         r"""["'](?:query|bool|match_all|query_string|simple_query_string|wildcard|regexp|script|aggs|aggregations)["']\s*:\s*[\[{]|"""
         r"""["']""" + _AGGREGATION + r"""["']\s*:|"""
         r"""(?-i:\b(?:OPTIONAL\s+MATCH|MATCH|MERGE)\s*\()|\bdetach\s+delete\b|\bcall\s+(?:db|dbms|apoc)\.\w|"""
         r"""\bmatch\s*\(\s*\w*\s*(?::\s*\w+\s*)?\)\s*(?:-|<|,|where\b|return\b|delete\b|set\b|with\b)|"""
         r"""[%!]\w+:~-?\d|[\w;|&]`[a-z/$][^`\n]{0,199}`(?=$|[\s'";|&)}\]])""")
# what syntax_free searches each text for besides the probe's syntax and the blobs, in one scan
_LOOSE_OR_CODE = re.compile(f"(?:{_LOOSE.pattern})|(?:{_CODE})", re.IGNORECASE)
# ... and the names among them that are keys of a JSON body (a search engine's query object, an aggregation pipeline)
_CODE_NAME = re.compile(_AGGREGATION + r"""|query_string|simple_query_string|match_all|script_fields|__schema|__type""", re.IGNORECASE)
# names and keys that address an object's prototype
_PROTOTYPE = re.compile(r"__proto__|\bconstructor\b|\bprototype\b", re.IGNORECASE)
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_CHARSET = re.compile(r"charset\s*=\s*(\"?[\w.:-]+\"?)", re.IGNORECASE)
_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin1", "latin-1"})
# a key that is a name in a program's sense holds no syntax (``id`` is a key here, not the command)
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$-]{0,63}")
_MULTIPART_BOUNDARY = re.compile(r'boundary=("[^"]*"|[^\s;,]+)', re.IGNORECASE)
# header values as browsers and fronts write them: no quote that closes, markup, template, pipe, backslash, escape or
# control character, nor a parent directory
_HEADER_VALUE = re.compile(r"""(?:(?!\.\.)[^'<>`{}$|\\%\x00-\x1f])*""")
_SAME_AS_HOST = re.compile("")
# headers whose free-form value is searched as a value (not the user agent, whose parentheses and semicolons are a
# browser's, nor client hints, whose quotes are)
_SEARCHED_HEADERS = frozenset({"if-none-match", "if-modified-since", "if-range", "range", "traceparent", "tracestate", "baggage",
                               "x-requested-with", "via", "x-request-id", "x-amzn-trace-id", "last-event-id", "cdn-loop"})
_TOKENS = re.compile(r"[\w.\-=:;,+/ ]*")
_ADDRESS = re.compile(r"[0-9a-f.:\[\]]*", re.IGNORECASE)
_HEADER_SHAPES: Mapping[str, re.Pattern[str]] = {
    **dict.fromkeys(("accept", "accept-encoding", "cache-control", "pragma", "priority", "dnt", "te", "connection", "keep-alive",
                     "upgrade-insecure-requests", "if-none-match", "if-modified-since", "range", "if-range", "x-requested-with",
                     "sec-gpc", "save-data", "downlink", "ect", "rtt", "device-memory", "viewport-width", "dpr", "purpose",
                     "x-purpose", "x-moz", "sec-purpose", "traceparent", "tracestate", "baggage"), _HEADER_VALUE),
    "accept-language": re.compile(r"[\w\-,;=.* ]*"),
    "host": re.compile(r"[\w.\-]+(?::\d{1,5})?|\[[0-9a-f:.]+\](?::\d{1,5})?", re.IGNORECASE),
    "content-length": re.compile(r"\d{1,12}"),
    "content-type": re.compile(r"""[\w.+-]+/[\w.+-]+(?:\s*;\s*[\w-]+=(?:"[\w.+\- ]*"|[\w.+-]+))*\s*"""),
    "user-agent": re.compile(r"""[^'"<>`{}$|\\%\x00-\x1f]*"""),
    "referer": re.compile(r"""[a-z][\w+.-]*://[^\s'"<>`{}$|\\\x00-\x1f]*""", re.IGNORECASE),
    "alt-used": re.compile(r"[\w.\-]+(?::\d{1,5})?", re.IGNORECASE),
    "access-control-request-method": re.compile(r"[A-Z]{3,10}"),
    "access-control-request-headers": re.compile(r"[\w\-, ]*"),
    "last-event-id": _TOKENS, "cdn-loop": _TOKENS, "x-cloud-trace-context": re.compile(r"[\w/;=]*"),
    "fastly-client-ip": _ADDRESS, "x-azure-clientip": _ADDRESS,
    "service-worker-navigation-preload": _HEADER_VALUE,
    "origin": re.compile(r"https?://[\w.\-]+(?::\d{1,5})?|null", re.IGNORECASE),
    "cookie": re.compile(r"[^\x00-\x1f]*"),
    "x-forwarded-for": re.compile(r"[0-9a-f.:\[\], ]*|unknown", re.IGNORECASE),
    "x-real-ip": _ADDRESS,
    "true-client-ip": _ADDRESS,
    "cf-connecting-ip": _ADDRESS,
    "x-forwarded-proto": re.compile(r"https?|wss?", re.IGNORECASE),
    "x-forwarded-port": re.compile(r"\d{1,5}"),
    "x-forwarded-host": _SAME_AS_HOST,
    "forwarded": re.compile(r"""(?:[\w-]+=(?:[\w.:\-\[\]]+|"[\w.:\-\[\]]*")\s*[;,]?\s*)*"""),
    "via": re.compile(r"[\w./ ,:()\-]*"),
    "x-request-id": _TOKENS, "x-amzn-trace-id": _TOKENS, "cf-ray": _TOKENS, "cf-ipcountry": _TOKENS,
    "cf-visitor": re.compile(r"""\{"scheme":"https?"\}"""), "x-csrftoken": _TOKENS, "x-csrf-token": _TOKENS, "x-xsrf-token": _TOKENS,
}


@dataclass(frozen=True, slots=True)
class Witness:
    """Where the syntax of a named kind was found: ``kind``, ``location`` (``query:id``, ``json:$.a``), a ``fragment`` around it."""

    kind: str
    location: str
    fragment: str

    def describe(self) -> str:
        return f"{self.kind} syntax in {self.location} ({self.fragment!r})"


def named_kinds(attack_kind: Mapping[str, float] | None) -> tuple[str, ...]:
    """The kinds the model names: its top kind and every kind with at least KIND_SHARE; every kind when it names none."""
    if not attack_kind:
        return ("probe",)
    top = max(attack_kind, key=lambda k: attack_kind[k])
    named = [top, *(k for k, p in attack_kind.items() if k != top and p >= KIND_SHARE)]
    return tuple(k if k in SYNTAX else "probe" for k in named)


def values(features: Features) -> Iterator[tuple[str, str, bool]]:
    """``(location, value, form-encoded)`` for every value the client chose that can carry an injection (module docstring)."""
    if features.path and features.path != "/":
        yield "path", features.path, False
    if features.query:
        for location, value, plus, _, _ in pairs(features.query, "query", True):
            yield location, value, plus
    body = features.body_prefix[:_BODY_CHARS]
    if body:
        for location, value, plus, _, _ in body_values(features.header_map.get("content-type", ""), body, whole=True):
            yield location, value, plus
    cookie = features.header_map.get("cookie")
    if cookie:
        for part in cookie.split(";"):
            name, eq, value = part.strip().partition("=")
            if eq and not is_token(value):
                for leaf in cookie_values(value):
                    yield f"cookie:{name}", leaf, False
    for name, value in features.header_map.items():
        if name not in DESCRIPTIVE and suspicious(value):  # the cookie header is descriptive: read above, value by value
            yield f"header:{name}", value, False


def cookie_values(value: str) -> list[str]:
    """A cookie's values as the script that wrote it reads them back: the string values of a JSON document, the values
    of ``a=1&b=2`` pairs, or the values of a JavaScript object literal (``{stamp:'x',necessary:true}``); any other
    value, or one whose structure does not hold to the end (a quote closed early, a pair with a space), whole.

    Consent managers keep their state so (OneTrust ``OptanonConsent`` as pairs, Cookiebot ``CookieConsent`` as an
    object literal): their quotes, braces and ``&`` are the serialization a script wrote, on every request of a person
    who clicked the banner, not syntax a value breaks out with."""
    text = unquote(value) if "%" in value else value
    if text[:1] in ("{", "["):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict | list):
            return [leaf for _, leaf, _, _, _ in json_values(text.encode())]
        if _OBJECT_LITERAL.fullmatch(text):
            return [leaf for m in _LITERAL_VALUE.finditer(text[1:-1]) if (leaf := next((g for g in m.groups() if g), ""))]
    if "&" in value and _PAIRS.fullmatch(value):
        return [unquote_plus(v) for _, _, v in (pair.partition("=") for pair in value.split("&")) if v]
    return [value]


def syntax_witness(features: Features, kinds: Iterable[str]) -> Witness | None:
    """The first value holding the syntax of one of ``kinds`` (:func:`named_kinds`), or None when no value does."""
    named = [kind for kind in dict.fromkeys(kinds) if kind in SYNTAX]
    budget = SEARCH_BUDGET
    cost = sum(len(_KINDS) if kind == "probe" else 1 for kind in named)  # a probe's pattern is every kind's
    for i, (location, value, plus) in enumerate(values(features) if named else ()):
        if i >= MAX_VALUES:
            break
        syntax = _syntax_at(location)
        for text, _ in variants(value[:MAX_CHARS], plus=plus):
            budget -= len(text) * cost
            if budget < 0:
                return None
            for kind in named:
                m = syntax[kind].search(text)
                if m is not None:
                    return Witness(kind, location, fragment(m.string, m.start(), m.end()))
    return None


def syntax_free(features: Features) -> bool:
    """True only when the request is known to hold no syntax of any attack: every place an application reads a value
    from was read whole, and none holds a breakout (:data:`SYNTAX`), nor what short values and names carry in attacks
    the block witness leaves to the model (``1 or true``, ``sleep(5)``, ``0x27``, ``$ne``, ``__proto__``, a scheme).

    A miss of :func:`syntax_witness` turns a block into a challenge; a miss here would forward an attack, so it reads
    more and gives up sooner: the raw target as a whole text besides its values (names, path parameters), every cookie,
    every name of a form and key of a JSON body, a multipart body whole; and it answers False
    for what it cannot read as an application might: a body longer than what the gateway keeps (or sent chunked, whose
    length nothing states), compressed or in
    another charset, with NUL bytes or a byte-order mark, a JSON body that does not parse, nests deeper than the values
    are read or repeats a key, a multipart body with encoded parts or without its boundary, a header outside those browsers and
    fronts send or shaped unlike them, and a search past ``FREE_BUDGET``."""
    body = features.body_prefix
    n = len(body)
    if n > _BODY_CHARS or (features.content_length or 0) > n or (features.chunked and n):
        return False
    if b"\x00" in body or body.startswith(_BOMS):
        return False
    ctype = features.header_map.get("content-type", "")
    charset = _CHARSET.search(ctype)
    if charset is not None and charset.group(1).strip('"').lower() not in _CHARSETS:
        return False
    if not _headers_plain(features):
        return False
    texts = _whole_texts(features, ctype)
    if texts is None:
        return False
    budget = FREE_BUDGET
    probe = SYNTAX["probe"]
    for text, plus, short in texts:
        if len(text) > MAX_CHARS and not short:
            return False
        for variant, _ in variants(text, plus=plus):
            if not variant.isascii():
                variant = unicodedata.normalize("NFKC", variant)
            # every kind at once, and twice where references or escapes may hide markup (_Syntax.search)
            budget -= len(variant) * len(_KINDS) * (2 if "&" in variant or "\\" in variant else 1)
            if budget < 0:
                return False
            if probe.search(variant) is not None or _LOOSE_OR_CODE.search(variant) is not None or _BLOBS.search(variant) is not None:
                return False
            if short and len(variant) <= SHORT_VALUE and len(variant.split()) <= SHORT_WORDS \
                    and (_SHORT_CODE.search(variant) or _ARITHMETIC.fullmatch(variant)):
                return False
    return True


def _whole_texts(features: Features, ctype: str) -> list[tuple[str, bool, bool]] | None:
    """``(text, form-encoded, a value)`` for what :func:`syntax_free` searches besides each value, or None when part of
    the request cannot be read: the raw target (names, path parameters), every cookie, a form's names, a JSON body's
    keys (a body that does not parse as JSON under its type is unread), a multipart body whole."""
    out: list[tuple[str, bool, bool]] = []
    for i, (_, value, plus) in enumerate(values(features)):
        if i >= MAX_VALUES:
            return None
        out.append((value, plus, True))
    out.append((features.path + ("?" + features.query if features.query else ""), True, False))
    headers = features.header_map
    out += [(headers[name], False, True) for name in _SEARCHED_HEADERS.intersection(headers)]
    cookie = headers.get("cookie")
    if cookie:
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if not _name_read(name, out, True):
                return None
            if value and is_token(value):  # the others are among the values, read as the script that wrote them reads them
                out.append((value, True, True))
    body = features.body_prefix
    if not body:
        return out
    low = ctype.lower()
    form, multipart = "x-www-form-urlencoded" in low, "multipart/" in low
    if "json" in low or (not form and not multipart and body.lstrip()[:1] in (b"{", b"[")):
        keys = _json_keys(body)
        if keys is None:
            return None
        # every key and string at every depth is read decoded: the raw text's own quotes and escapes are JSON's; a key
        # that is an identifier is read for what a key itself does (``__proto__``, ``$ne``), not as a command (``id``)
        if not all(_name_read(key, out, False) for key in keys):
            return None
    elif multipart:
        boundary = _MULTIPART_BOUNDARY.findall(ctype)
        if len(boundary) != 1 or b"--" + boundary[0].strip('"').encode("latin-1") not in body \
                or b"content-transfer-encoding" in body.lower():
            return None
        out.append((body.decode("latin-1"), False, False))
    elif form or (not low and b"=" in body):
        if not all(_name_read(pair.partition("=")[0], out, True) for pair in body.decode("latin-1").split("&")):
            return None
    return out


def _name_read(name: str, out: list[tuple[str, bool, bool]], plus: bool) -> bool:
    """A form, cookie or JSON name to search, added to ``out``; False when it addresses an object's prototype. A name
    that is an identifier is read for what a name itself does (``__proto__``, ``$ne``), not as a value (``id`` is a
    key here, not the command)."""
    if _PROTOTYPE.search(name):
        return False
    if _IDENTIFIER.fullmatch(name):
        return _LOOSE.search(name) is None and _CODE_NAME.fullmatch(name) is None
    if name:
        out.append((name, plus, True))
    return True


def _json_keys(body: bytes) -> list[str] | None:
    """Every key of a JSON body at any depth, or None when it repeats a key in an object or nests deeper than its
    values are read (an application's parser may keep what the search does not see)."""
    repeated = False

    def pairs_hook(items: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal repeated
        keys.extend(k for k, _ in items)
        repeated = repeated or len({k for k, _ in items}) != len(items)
        return dict(items)

    keys: list[str] = []
    try:
        doc = json.loads(body.decode("utf-8", "replace"), object_pairs_hook=pairs_hook)
    except (ValueError, RecursionError):
        return None
    if repeated or _depth(doc) > JSON_DEPTH:
        return None
    return keys


def _depth(node: object) -> int:
    deepest, stack = 0, [(node, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _headers_plain(features: Features) -> bool:
    """Every header one browsers or the fronts in front of a gateway send, with a value of the shape they send."""
    host = features.header_map.get("host", "")
    for name, value in features.header_map.items():
        shape = _HEADER_SHAPES.get(name)
        if shape is None:
            if name.startswith(("sec-", "x-envoy-")) and _HEADER_VALUE.fullmatch(value):
                continue
            return False
        if shape is _SAME_AS_HOST:
            if value.strip().lower() != host.strip().lower():
                return False
        elif shape.fullmatch(value) is None:
            return False
    return True
