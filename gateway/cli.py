"""``clefgate`` command line: serve | check | demo | train | export | eval | replay | bench | crawlers.

Commands owned by other modules are dispatched to their ``main(argv) -> int`` so each
keeps its own flags; training commands import the ``[train]`` extra only when used.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from gateway import __version__
from gateway import config as configmod

# command -> (module, help); the module's main(argv) receives the remaining arguments
DELEGATED: dict[str, tuple[str, str]] = {
    "train": ("models.train", "train Clef-flash (needs the [train] extra)"),
    "export": ("models.export", "export a trained model to ONNX (needs the [train] extra)"),
    "eval": ("gateway.tools.evaluate", "evaluate rules + model on labelled requests (JSONL)"),
    "replay": ("gateway.tools.replay", "replay an access log or decision log through the current rules, model and policy"),
    "bench": ("loadtest.bench", "run benchmarks (proxy, rules, model, mixed traffic)"),
    "crawlers": ("gateway.tools.crawlers", "manage verified-crawler IP lists (crawlers import FILE)"),
}


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file (optional with --upstream)")
    p.add_argument("--upstream", help="forward everything to this URL (a one-backend config; no file needed)")
    p.add_argument("--listen", help="HOST:PORT of the proxied listener (overrides the file)")
    p.add_argument("--admin", help="HOST:PORT of the admin/API listener; '' disables it (overrides the file)")
    p.add_argument("--workers", type=int, help="worker processes sharing the listener (SO_REUSEPORT)")
    p.add_argument("--trusted-proxies", help="CIDR[,CIDR...] whose X-Forwarded-For/Forwarded headers are believed")


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    return {"upstream": args.upstream, "listen": args.listen, "admin": args.admin, "workers": args.workers,
            "trusted_proxies": args.trusted_proxies}


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.runtime import ConfigSource
    from gateway.server import serve

    if not args.config and not args.upstream:
        print("clefgate serve: give --config FILE or --upstream URL (or run `clefgate demo`)", file=sys.stderr)
        return 2
    return serve(ConfigSource(args.config, _overrides(args)))


def cmd_check(args: argparse.Namespace) -> int:
    """Validate a config, every rule file it names and its model, without serving."""
    from gateway.arming import arming, disarms
    from gateway.runtime import check_config

    try:
        cfg = configmod.load(args.config, **_overrides(args))
        pipeline, warnings = check_config(cfg)
    except configmod.ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"{cfg.source}: warning: {warning}", file=sys.stderr)
    print(f"{cfg.source}: ok ({len(cfg.backends)} backend(s), {len(cfg.routes)} route(s), {pipeline.description})")
    armed = arming(pipeline, _model_label(cfg))
    print(f"{cfg.source}: arms {armed.summary()}")
    if pipeline.policy is not None:
        print()
        print(pipeline.policy.table(), end="")
    if args.against:
        try:
            running_cfg = configmod.load(args.against)
            running = arming(check_config(running_cfg)[0], _model_label(running_cfg))
        except configmod.ConfigError as exc:
            print(f"--against: {exc}", file=sys.stderr)
            return 1
        print(f"{running_cfg.source}: arms {running.summary()}")
        for _, why in disarms(running, armed):
            print(f"{cfg.source}: warning: against {running_cfg.source}: {why}", file=sys.stderr)
    return 0


def _model_label(cfg: configmod.Config) -> str:
    """``name@version`` of the model a config serves (the version 'latest' names, resolved), empty when off."""
    if not cfg.model.enabled:
        return ""
    from pathlib import Path

    from gateway.decider.manifest import resolve
    from gateway.decider.onnx import OnnxOptions

    base = Path(cfg.source).parent if cfg.source and not cfg.source.startswith("<") else None
    options = OnnxOptions.from_config(cfg.model, base)
    return f"{cfg.model.name}@{resolve(options.repository, options.name, options.version).name}"


def cmd_demo(args: argparse.Namespace) -> int:
    from gateway.tools.demo import run_demo

    return run_demo(listen=args.listen, admin=args.admin, origin_port=args.origin_port)


def cmd_config_reference(_: argparse.Namespace) -> int:
    sys.stdout.write(configmod.reference_markdown())
    return 0


def _delegate(module: str) -> Callable[[list[str]], int]:
    def run(argv: list[str]) -> int:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            hint = " (install the training extra: pip install 'clefgate[train]')" if module.startswith("models") else ""
            print(f"clefgate: {module} is not available: {exc}{hint}", file=sys.stderr)
            return 2
        return int(mod.main(argv) or 0)
    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clefgate", description="Edge gateway: rules and a calibrated model decide to forward, "
                                                                   "challenge or block every request.")
    parser.add_argument("--version", action="version", version=f"clefgate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("serve", help="run the gateway")
    _serve_args(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("check", help="validate a config and its rule files, print what it arms; exit non-zero on any problem")
    _serve_args(p)
    p.add_argument("--against", metavar="RUNNING", help="also compare with this (running) config: warn where --config protects less")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("demo", help="run the gateway in front of a bundled demo origin on the embedded default config")
    p.add_argument("--listen", default="127.0.0.1:8080")
    p.add_argument("--admin", default="127.0.0.1:9090")
    p.add_argument("--origin-port", type=int, default=8000)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("config-reference", help="print the config reference (Markdown)")
    p.set_defaults(func=cmd_config_reference)

    for name, (_module, help_text) in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        return _delegate(DELEGATED[argv[0]][0])(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
