"""``clefgate bench``: the benchmarks, one command.

    clefgate bench                 the mixed-traffic comparison: origin, nginx, clefgate rules only,
                                   rules + model (cache on and off), report and plots (make bench)
    clefgate bench mixed [...]     the same, with options (scenario, setups, scale, --target HOST:PORT)
    clefgate bench proxy [...]     wrk: origin vs nginx proxy_pass vs clefgate allow-all (loadtest/proxybench.py)
    clefgate bench rules [...]     rule evaluation cost per request (loadtest/rulesbench.py)
    clefgate bench model [...]     Clef-flash decisions/s and latency per provider and variant (loadtest/modelbench.py)
    clefgate bench flood [...]     the challenged flood's CPU per request, profiled or part by part (loadtest/floodbench.py)
    clefgate bench report DIR      render a results folder again (summary.md, plots) from its results.json

Options after ``clefgate bench`` that start with ``-`` go to the mixed comparison.
Benchmarks print numbers; they assert nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# subcommand -> (module, description)
COMMANDS: dict[str, tuple[str, str]] = {
    "mixed": ("loadtest.compare", "mixed realistic traffic against every setup, side by side, with a report"),
    "proxy": ("loadtest.proxybench", "wrk: origin vs nginx proxy_pass vs clefgate (allow-all)"),
    "rules": ("loadtest.rulesbench", "rule evaluation cost per request"),
    "model": ("loadtest.modelbench", "Clef-flash decisions/s and tokenize+infer latency per provider and variant"),
    "flood": ("loadtest.floodbench", "CPU per request of a challenged flood (served, cProfile, or its parts side by side)"),
    "report": ("loadtest.report", "write a results folder's summary.md and plots again from its results.json"),
}


def usage() -> str:
    lines = ["usage: clefgate bench [COMMAND] [options]", "", "commands:"]
    lines += [f"  {name:<7} {desc}" for name, (_, desc) in COMMANDS.items()]
    lines += ["", "with no command: the full mixed-traffic comparison (clefgate bench mixed with its defaults)"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if not args or args[0].startswith("-"):
        from loadtest import compare

        return compare.main(args, prog="clefgate bench")
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"clefgate bench: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    if name == "mixed":
        return int(module.main(rest, prog="clefgate bench mixed") or 0)
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
