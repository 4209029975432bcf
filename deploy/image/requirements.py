#!/usr/bin/env python3
"""Print the serving requirements of clefgate, one per line, for a container image.

The list comes from ``[project].dependencies`` in pyproject.toml, so an image never
drifts from the package: training extras (torch, transformers) are never included.
The onnxruntime line is replaced by the wheel the image wants, pinned to one version:

* ``--onnxruntime cpu``: the CPU-only ``onnxruntime`` wheel (about a tenth of the size
  of ``onnxruntime-gpu``, and nothing in it looks for CUDA libraries);
* ``--onnxruntime gpu``: ``onnxruntime-gpu``, which needs CUDA and cuDNN libraries of
  the major version it was built for (see ``deploy/Dockerfile.cuda``).

Usage: requirements.py [--onnxruntime cpu|gpu] [--onnxruntime-version X.Y.Z] [pyproject.toml]
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ONNXRUNTIME_DISTRIBUTIONS = {"cpu": "onnxruntime", "gpu": "onnxruntime-gpu"}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def split_requirement(requirement: str) -> tuple[str, str]:
    """(normalised distribution name, the rest) of a PEP 508 requirement: ``onnxruntime_GPU>=1`` -> (``onnxruntime-gpu``, ``>=1``)."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower(), requirement[match.end():].strip()


def serving_requirements(pyproject: dict, onnxruntime: str, onnxruntime_version: str = "") -> list[str]:
    """The serving dependencies with every onnxruntime variant replaced by the chosen one."""
    if onnxruntime not in ONNXRUNTIME_DISTRIBUTIONS:
        raise ValueError(f"--onnxruntime must be one of {', '.join(ONNXRUNTIME_DISTRIBUTIONS)}")
    out: list[str] = []
    replaced = None
    for requirement in pyproject["project"]["dependencies"]:
        name, specifier = split_requirement(requirement)
        if name in ONNXRUNTIME_DISTRIBUTIONS.values():
            replaced = ONNXRUNTIME_DISTRIBUTIONS[onnxruntime] + (f"=={onnxruntime_version}" if onnxruntime_version else specifier)
            out.append(replaced)
        else:
            out.append(requirement)
    if replaced is None:
        raise ValueError("pyproject.toml lists no onnxruntime dependency")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", nargs="?", default="pyproject.toml")
    parser.add_argument("--onnxruntime", choices=sorted(ONNXRUNTIME_DISTRIBUTIONS), default="cpu")
    parser.add_argument("--onnxruntime-version", default="", help="pin this exact version (empty: keep the pyproject specifier)")
    args = parser.parse_args(argv)
    with Path(args.pyproject).open("rb") as fh:
        pyproject = tomllib.load(fh)
    try:
        lines = serving_requirements(pyproject, args.onnxruntime, args.onnxruntime_version)
    except ValueError as exc:
        print(f"requirements.py: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
