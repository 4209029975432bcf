"""Rule conditions: validate each one and compile it into a Python expression, in one pass.

The table (``gateway.rules.table``) turns every rule's expressions into one generated
function, so evaluating a rule costs a few attribute reads and C-level string tests
instead of a chain of Python calls. Expressions only ever name values through
:class:`Emitter` constants (``_c12``), never by pasting rule text into source, so a rule
file cannot inject code. The generated function's locals are:

``f`` the Features, ``p`` the normalised path, ``h`` the lower-case host without port,
``ip`` the parsed client address, ``ua`` the lower-case user agent, ``hm`` the header map,
``inp`` the decoded request inputs (``gateway.rules.inputs``; built on first use, else None).

Every problem is reported as ``key: message`` (the loader prefixes ``file:rule:``), and
compilation goes on, so a file with five mistakes gets five messages.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.clients import ClientState, RateLimit, address_key, network_of, rate_key
from gateway.config import ClientsConfig, parse_cidr
from gateway.features import ClientStats
from gateway.rules.inputs import InputsScan, compile_inputs
from gateway.rules.inputs import PatternError as InputsPatternError
from gateway.rules.iplist import AgentSet, NamedLists, PrefixSet
from gateway.rules.patterns import PatternError, classify_path_globs, compile_globs, compile_regexes, parse_comparison, parse_rate

# condition key -> cost rank: cheap and selective conditions run first, rate always last
# (it takes a token, which only a request that met every other condition should spend)
COSTS = {"method": 0, "body_size": 0, "host": 1, "path": 2, "query": 3, "headers": 3, "path_regex": 4, "user_agent": 4,
         "ip": 5, "reverse_dns": 6, "reverse_dns_unanswered": 6, "client": 6, "login_surge": 6, "any": 7, "not": 7, "inputs": 8, "rate": 9}
CONDITION_KEYS = tuple(COSTS)
STATS = tuple(ClientStats.__slots__)  # requests, rate_per_min, error_ratio, ...
_LITERAL = re.compile(r"^[A-Za-z0-9 _./;:,=@-]+$")
_META = frozenset(".^$*+?{}[]()|")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_OPERATORS = {">=", "<=", ">", "<", "==", "!="}


@dataclass
class Emitter:
    """Collects the constants generated code refers to, and which per-request values it reads."""

    namespace: dict[str, Any] = field(default_factory=dict)
    uses: set[str] = field(default_factory=set)
    scan: InputsScan | None = None  # every ``inputs`` pattern, tried once before any rule's own
    # the ReverseNames that reverse_dns conditions read (the table checks claimants' addresses with it: ReverseNames.check)
    names: Any = None
    _n: int = 0

    def const(self, value: Any) -> str:
        name = f"_c{self._n}"
        self._n += 1
        self.namespace[name] = value
        return name

    def temp(self) -> str:
        self._n += 1
        return f"_t{self._n}"


@dataclass
class Context:
    """What compiling conditions needs from the outside."""

    lists: NamedLists
    state: ClientState
    clients: ClientsConfig
    rule_id: str  # stable id of the rule (its name, or file#n): the rate-limit bucket family
    emit: Emitter
    rate_conditions: int = 0  # rate conditions of this rule compiled so far (each has its own buckets)


def _strings(value: Any, key: str, problems: list[str]) -> list[str] | None:
    items = value if isinstance(value, list) else [value]
    if not items:
        problems.append(f"{key}: empty list")
        return None
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            problems.append(f"{key}: expected a string or a list of strings, got {type(item).__name__}")
            return None
        out.append(str(item))
    return out


def literal_alternatives(patterns: list[str]) -> list[str] | None:
    """``["(?i)googlebot|bingbot"]`` -> ["googlebot", "bingbot"]: only for case-insensitive pure literals."""
    out: list[str] = []
    for p in patterns:
        if not p.startswith("(?i)"):
            return None
        for alt in p[4:].split("|"):
            text = _unescape_literal(alt)
            if not text:
                return None
            out.append(text.lower())
    return out


_ESCAPE = re.compile(r"\\.", re.DOTALL)


def _case_folded(patterns: list[str]) -> list[str] | None:
    """``["(?i)\\b(?:sqlmap|nikto)\\b"]`` -> ``["\\b(?:sqlmap|nikto)\\b"]``, to search the lower-cased text: only when every
    pattern is case-insensitive as a whole and names no upper-case letter (``[A-Z]``) or other flag, outside escapes
    (``\\S``, ``\\W``, ``\\B`` mean what they mean in either case; ``\\N{...}`` is left as it is)."""
    out = []
    for p in patterns:
        if not p.startswith("(?i)"):
            return None
        rest = p[4:]
        bare = _ESCAPE.sub("", rest)
        if "\\N" in rest or "(?" in bare.replace("(?:", "").replace("(?=", "").replace("(?!", "").replace("(?<", "") \
                or any("A" <= c <= "Z" for c in bare):
            return None
        out.append(rest)
    return out


def _unescape_literal(alt: str) -> str | None:
    """The literal text a regex alternative stands for, or None when it uses any regex syntax."""
    chars: list[str] = []
    i = 0
    while i < len(alt):
        c = alt[i]
        if c == "\\":
            if i + 1 >= len(alt) or alt[i + 1].isalnum():
                return None  # \d, \b, ...: a class or an assertion, not a literal
            chars.append(alt[i + 1])
            i += 2
            continue
        if c in _META:
            return None
        chars.append(c)
        i += 1
    text = "".join(chars)
    return text if text and _LITERAL.match(text) else None


def _regex_expr(patterns: list[str], subject: str, lowered: bool, ctx: Context, problems: list[str], key: str) -> str | None:
    """An expression searching ``subject`` for any of ``patterns``.

    A case-insensitive alternation of plain words (``(?i)gptbot|ccbot``) becomes
    substring tests on the lower-cased subject: an IGNORECASE regex scans every
    character in Python's engine and costs ~10x more.
    """
    try:
        rx = compile_regexes(patterns)
    except PatternError as exc:
        problems.append(f"{key}: {exc}")
        return None
    literals = literal_alternatives(patterns)
    emit = ctx.emit
    if literals is None:
        return f"{emit.const(rx.search)}({subject}) is not None"
    if not lowered:
        tmp = emit.temp()
        tests = " or ".join(f"{emit.const(lit)} in {tmp}" for lit in literals)
        return f"(({tmp} := {subject}.lower()) and ({tests}))"
    return "(" + " or ".join(f"{emit.const(lit)} in {subject}" for lit in literals) + ")"


def compile_conditions(raw: Mapping[str, Any], ctx: Context, problems: list[str], prefix: str = "") -> list[str]:
    """Validate and compile a condition map; returns the expressions in evaluation order (all must hold)."""
    compiled: list[tuple[int, int, str]] = []
    for order, (key, value) in enumerate(raw.items()):
        expr = _compile_one(str(key), value, ctx, problems, prefix + str(key))
        if expr is not None:
            compiled.append((COSTS.get(str(key), 5), order, expr))
    compiled.sort(key=lambda t: (t[0], t[1]))
    return [e for _, _, e in compiled]


def conjunction(exprs: list[str]) -> str:
    return " and ".join(f"({e})" for e in exprs) if exprs else "True"


def _compile_one(key: str, value: Any, ctx: Context, problems: list[str], where: str) -> str | None:
    emit = ctx.emit
    if key == "method":
        methods = _strings(value, where, problems)
        return f"f.method in {emit.const(frozenset(m.upper() for m in methods))}" if methods else None

    if key == "host":
        hosts = _strings(value, where, problems)
        if hosts is None:
            return None
        emit.uses.add("host")
        try:
            match = compile_globs([h.lower() for h in hosts], ignore_case=True).fullmatch
        except PatternError as exc:
            problems.append(f"{where}: {exc}")
            return None
        return f"{emit.const(match)}(h) is not None"

    if key == "path":
        globs = _strings(value, where, problems)
        if globs is None:
            return None
        bad = [g for g in globs if not g.startswith(("/", "*", "{"))]
        if bad:
            problems.append(f"{where}: {bad[0]!r} must start with '/' (globs: * within a segment, ** across segments)")
            return None
        params = [g for g in globs if ";" in g]
        if params:
            problems.append(f"{where}: {params[0]!r} can never match: rules read the path with segment parameters "
                            "dropped (';' to the end of a segment, as servlet containers do)")
            return None
        try:
            shapes = classify_path_globs(globs)
        except PatternError as exc:
            problems.append(f"{where}: {exc}")
            return None
        emit.uses.add("path")
        tests = []
        if shapes.exact:
            tests.append(f"p in {emit.const(frozenset(shapes.exact))}")
        if shapes.suffixes:
            tests.append(f"p.endswith({emit.const(tuple(shapes.suffixes))})")
        if shapes.prefixes:
            tests.append(f"p.startswith({emit.const(tuple(shapes.prefixes))})")
        tests.extend(f"{emit.const(part)} in p" for part in shapes.contains)
        if shapes.rest:
            try:
                rest = compile_globs(shapes.rest)
            except PatternError as exc:
                problems.append(f"{where}: {exc}")
                return None
            tests.append(f"{emit.const(rest.fullmatch)}(p) is not None")
        return "(" + " or ".join(tests) + ")"

    if key in ("path_regex", "query", "user_agent"):
        patterns = _strings(value, where, problems)
        if patterns is None:
            return None
        if key == "path_regex":
            emit.uses.add("path")
            return _regex_expr(patterns, "p", False, ctx, problems, where)
        if key == "query":
            return _regex_expr(patterns, "f.query", False, ctx, problems, where)
        if any(p.startswith("list:") for p in patterns):
            return _agent_lists(patterns, ctx, problems, where)
        if literal_alternatives(patterns) is not None:
            emit.uses.add("ua")  # the table lower-cases the user agent once per request
            return _regex_expr(patterns, "ua", True, ctx, problems, where)
        folded = _case_folded(patterns)
        if folded is None:
            return _regex_expr(patterns, "f.user_agent", False, ctx, problems, where)
        # a case-insensitive regex written in lower case searches the lower-cased user agent without IGNORECASE, which
        # Python's engine pays for at every character (a scanner-name alternation: 12.6 -> 3.2 us on a browser's)
        try:
            compile_regexes(patterns)  # the patterns as written: their errors name them
            rx = compile_regexes(folded)
        except PatternError as exc:
            problems.append(f"{where}: {exc}")
            return None
        emit.uses.add("ua")
        return f"{emit.const(rx.search)}(ua) is not None"

    if key == "headers":
        return _headers(value, ctx, problems, where)

    if key == "inputs":
        return _inputs(value, ctx, problems, where)

    if key == "ip":
        return _ip(value, ctx, problems, where)

    if key == "reverse_dns":
        return _reverse_dns(value, ctx, problems, where)
    if key == "reverse_dns_unanswered":
        if not isinstance(value, bool):
            problems.append(f"{where}: expected true or false, got {value!r}")
            return None
        ctx.emit.names = ctx.state.names
        answered = f"{ctx.emit.const(ctx.state.names.unanswered)}(f.client_ip)"
        return answered if value else f"not {answered}"

    if key == "login_surge":
        if not isinstance(value, bool):
            problems.append(f"{where}: expected true or false, got {value!r}")
            return None
        surging = f"{emit.const(ctx.state.logins.surging)}(f)"
        return surging if value else f"not {surging}"

    if key == "body_size":
        items = value if isinstance(value, list) else [value]
        if not items:
            problems.append(f"{where}: an empty list: give one or more comparisons such as '> 1MiB'")
            return None
        tests = []
        for item in items:
            try:
                _, limit, text = parse_comparison(item, sizes=True)
            except PatternError as exc:
                problems.append(f"{where}: {exc}")
                return None
            op = text.split()[0]
            assert op in _OPERATORS
            tests.append(f"f.content_length {op} {emit.const(limit)}")
        # an unknown length (chunked, not yet read) never matches a size condition
        return "(f.content_length is not None and " + " and ".join(tests) + ")"

    if key == "client":
        check = _client(value, ctx, problems, where)
        return f"{emit.const(check)}({emit.const(ctx.state.key)}(f))" if check else None

    if key == "rate":
        return _rate(value, ctx, problems, where)

    if key == "not":
        if not isinstance(value, Mapping) or not value:
            problems.append(f"{where}: expected a map of conditions")
            return None
        if not _known_keys(value, problems, where + "."):
            return None
        inner = compile_conditions(value, ctx, problems, where + ".")
        return f"not ({conjunction(inner)})" if len(inner) == len(value) else None

    if key == "any":
        if not isinstance(value, list) or not value:
            problems.append(f"{where}: expected a list of condition maps")
            return None
        groups = []
        for i, group in enumerate(value):
            if not isinstance(group, Mapping) or not group:
                problems.append(f"{where}[{i}]: expected a map of conditions")
                return None
            if not _known_keys(group, problems, f"{where}[{i}]."):
                return None
            inner = compile_conditions(group, ctx, problems, f"{where}[{i}].")
            if len(inner) != len(group):
                return None
            groups.append(conjunction(inner))
        return " or ".join(f"({g})" for g in groups)

    return None  # unknown keys are reported by the loader


def _known_keys(raw: Mapping[str, Any], problems: list[str], prefix: str) -> bool:
    ok = True
    for key in raw:
        if key not in COSTS:
            problems.append(f"{prefix}{key}: unknown condition{did_you_mean(str(key), CONDITION_KEYS)}")
            ok = False
    return ok


def did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _headers(value: Any, ctx: Context, problems: list[str], where: str) -> str | None:
    if not isinstance(value, Mapping) or not value:
        problems.append(f"{where}: expected a map of header name -> true (present), false (absent) or a regex")
        return None
    emit = ctx.emit
    tests = []
    for name, spec in value.items():
        hname = str(name).lower()
        if not _HEADER_NAME.fullmatch(hname):
            problems.append(f"{where}.{name}: not a header name")
            continue
        n = emit.const(hname)
        if spec is True:
            tests.append(f"{n} in hm")
        elif spec is False:
            tests.append(f"{n} not in hm")
        else:
            patterns = _strings(spec, f"{where}.{name}", problems)
            expr = _regex_expr(patterns, f"hm[{n}]", False, ctx, problems, f"{where}.{name}") if patterns else None
            if expr is not None:
                tests.append(f"({n} in hm and {expr})")  # an absent header never matches a pattern
    if len(tests) != len(value):
        return None
    return " and ".join(tests)


_ESCAPES_AND_FLAGS = re.compile(r"\\.|\(\?P?[<=!]?|\(\?[a-zA-Z]+[):]")


def _inputs(value: Any, ctx: Context, problems: list[str], where: str) -> str | None:
    """RE2 search over the request's decoded, lower-cased inputs (``gateway.rules.inputs``)."""
    patterns = _strings(value, where, problems)
    if patterns is None:
        return None
    upper = [p for p in patterns if any(c.isupper() for c in _ESCAPES_AND_FLAGS.sub("", p))]
    if upper:
        problems.append(f"{where}: {upper[0]!r} has upper-case letters, but inputs are lower-cased before matching; write it in lower case")
        return None
    try:
        rx = compile_inputs(patterns)
    except InputsPatternError as exc:
        problems.append(f"{where}: {exc}")
        return None
    emit = ctx.emit
    if emit.scan is None:
        emit.scan = InputsScan()
    emit.scan.add(patterns)
    scan = emit.const(emit.scan)
    # inp: the decoded text, inh: whether any inputs pattern of the table matches it (both per request, on first use)
    text = "(inp := _inputs(f) if inp is None else inp)"
    expr = f"(inh if inh is not None else (inh := {scan}.hit({text}))) and {emit.const(rx.search)}(inp) is not None"
    return expr


def _ip(value: Any, ctx: Context, problems: list[str], where: str) -> str | None:
    items = _strings(value, where, problems)
    if items is None:
        return None
    nets = []
    ok = True
    for item in items:
        if item.startswith("list:"):
            name = item[5:]
            got = ctx.lists.get(name)
            if got is None:
                problems.append(_unknown_list(name, ctx, where))
                ok = False
                continue
            list_nets, list_problems = got
            problems.extend(f"{where}: list {name!r}: {p}" for p in list_problems)
            ok = ok and not list_problems
            nets.extend(list_nets)
        else:
            try:
                nets.append(parse_cidr(item))
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
                ok = False
    if not ok:
        return None
    ctx.emit.uses.add("ip")
    return f"{ctx.emit.const(PrefixSet(nets).contains)}(ip)"


_DOMAIN = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]")


def _reverse_dns(value: Any, ctx: Context, problems: list[str], where: str) -> str | None:
    """``reverse_dns: [googlebot.com, ...]``: a forward-confirmed name of the client's address is one of these domains or under
    one (:mod:`gateway.rdns`). The rule's ``user_agent`` condition is its claim (``CompiledRule.claim``): right before the
    rule, the table raises ``LookupNeeded`` for a claimant from an address without an answer, and the pipeline looks the
    address up and resumes the table there."""
    items = _strings(value, where, problems)
    if items is None:
        return None
    domains = []
    for item in items:
        domain = item.strip().lower().strip(".")
        if not _DOMAIN.fullmatch(domain) or len(domain) > 253:
            problems.append(f"{where}: {item!r} is not a domain name of two labels or more (such as googlebot.com)")
            return None
        domains.append(domain)
    ctx.emit.names = ctx.state.names
    return f"{ctx.emit.const(ctx.state.names.confirmed)}(f.client_ip, {ctx.emit.const(tuple(domains))})"


def uses_reverse_dns(raw: Any) -> str:
    """The first of ``reverse_dns`` and ``reverse_dns_unanswered`` (both read the address's looked-up names) that a rule's
    conditions ask for, its ``any`` and ``not`` groups included, or ``""``."""
    if isinstance(raw, Mapping):
        for k, v in raw.items():
            if k in ("reverse_dns", "reverse_dns_unanswered"):
                return str(k)
            if k in CONDITION_KEYS and (found := uses_reverse_dns(v)):
                return found
    elif isinstance(raw, list):
        for item in raw:
            if found := uses_reverse_dns(item):
                return found
    return ""


def _unknown_list(name: str, ctx: Context, where: str) -> str:
    known = ctx.lists.available()
    return f"{where}: unknown list {name!r}{did_you_mean(name, known)} (lists in {ctx.lists.folder}: {', '.join(known) or 'none'})"


def _agent_lists(patterns: list[str], ctx: Context, problems: list[str], where: str) -> str | None:
    """``user_agent: [list:NAME, ...]``: any token of the named lists (one set), or any other pattern."""
    tokens: list[str] = []
    ok = True
    for name in (p[5:] for p in patterns if p.startswith("list:")):
        got = ctx.lists.agents(name)
        if got is None:
            problems.append(_unknown_list(name, ctx, where))
            ok = False
            continue
        problems.extend(f"{where}: list {name!r}: {p}" for p in got.problems)
        ok = ok and not got.problems
        tokens.extend(got.tokens)
    others = [p for p in patterns if not p.startswith("list:")]
    other = None
    if others:
        other = (_regex_expr(others, "ua", True, ctx, problems, where) if literal_alternatives(others) is not None
                 else _regex_expr(others, "f.user_agent", False, ctx, problems, where))
        ok = ok and other is not None
    if not ok:
        return None
    ctx.emit.uses.add("ua")  # the table lower-cases the user agent once per request
    expr = f"{ctx.emit.const(AgentSet(tokens).matches)}(ua)"
    return f"({expr} or {other})" if other else expr


def _client(value: Any, ctx: Context, problems: list[str], where: str) -> Callable[[str], bool] | None:
    if not isinstance(value, Mapping) or not value:
        problems.append(f"{where}: expected a map of statistic -> comparison, e.g. {{error_ratio: '> 0.5', requests: '>= 20'}}")
        return None
    checks = []
    for stat, cmp in value.items():
        if stat not in STATS:
            problems.append(f"{where}.{stat}: unknown statistic{did_you_mean(str(stat), STATS)} (known: {', '.join(STATS)})")
            continue
        try:
            op, limit, _ = parse_comparison(cmp)
        except PatternError as exc:
            problems.append(f"{where}.{stat}: {exc}")
            continue
        checks.append((stat, op, limit))
    if len(checks) != len(value):
        return None
    state = ctx.state
    if all(stat in ("requests", "error_ratio", "rate_per_min") for stat, _, _ in checks):
        # the common case reads two counters instead of building a ClientStats per request
        counts = state.windows.counts
        per_min = 60.0 / state.windows.window_s

        def by_counts(client: str) -> bool:
            requests, errors = counts(client)
            for stat, op, limit in checks:
                if stat == "requests":
                    value = float(requests)
                elif stat == "error_ratio":
                    value = errors / requests if requests else 0.0
                else:
                    value = requests * per_min
                if not op(value, limit):
                    return False
            return True
        return by_counts

    def by_stats(client: str) -> bool:
        s = state.stats(client)
        for stat, op, limit in checks:
            if not op(getattr(s, stat), limit):
                return False
        return True
    return by_stats


def _rate(value: Any, ctx: Context, problems: list[str], where: str) -> str | None:
    spec = {"limit": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping):
        problems.append(f"{where}: expected '120/min' or {{limit: 120/min, key: client|ip|prefix|header:NAME, burst: N}}")
        return None
    unknown = [k for k in spec if k not in ("limit", "key", "burst")]
    if unknown:
        problems.append(f"{where}.{unknown[0]}: unknown key{did_you_mean(str(unknown[0]), ['limit', 'key', 'burst'])} (known: limit, key, burst)")
        return None
    try:
        limit, period = parse_rate(spec.get("limit"))
    except PatternError as exc:
        problems.append(f"{where}: {exc}")
        return None
    key = str(spec.get("key", "client"))
    if key not in ("client", "ip", "prefix") and not (key.startswith("header:") and key[7:] and _HEADER_NAME.fullmatch(key[7:])):
        problems.append(f"{where}.key: {key!r} is not client, ip, prefix or header:NAME")
        return None
    burst = spec.get("burst", 0)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        problems.append(f"{where}.burst: {burst!r} is not a whole number of requests")
        return None
    emit = ctx.emit
    take = emit.const(ctx.state.limiter.take)
    # each rate condition has its own buckets: the rule's first keeps the rule id, the n-th gets "#n" added
    # (counted on the rule's context); the metric still names the rule
    ctx.rate_conditions += 1
    n = ctx.rate_conditions
    rule = emit.const(ctx.rule_id if n == 1 else f"{ctx.rule_id}#{n}")
    label = emit.const(ctx.rule_id)
    rl = emit.const(RateLimit(limit, period, key, burst))
    if key == "client":
        # the address and the client's fingerprint: people sharing an address keep their own budgets
        client_key = f"{emit.const(ctx.state.key)}(f)"
    elif key == "ip":
        client_key = f"{emit.const(address_key)}(f.client_ip)"
    elif key == "prefix":
        client_key = f"{emit.const(network_of)}(f.client_ip, {emit.const(ctx.clients.ipv4_prefix)}, {emit.const(ctx.clients.ipv6_prefix)})"
    else:
        client_key = (f"{emit.const(rate_key)}({emit.const(key)}, f.client_ip, hm.get({emit.const(key[7:].lower())}, ''), "
                      f"{emit.const(ctx.clients)})")
    # matches when the request is over the limit
    return f"not {take}({rule}, {client_key}, {rl}, {label})"
