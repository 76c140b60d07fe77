"""Run the benchmarks and print each figure beside its raw baseline: ``python -m benchmarks``."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from dataclasses import asdict

import benchmarks
from benchmarks.common import Figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench")
    parser.add_argument("areas", nargs="*", help="areas to run (e.g. records log); default: all")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    names = sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules(benchmarks.__path__)
                   if m.name.startswith("bench_"))
    chosen = args.areas or names
    unknown = set(chosen) - set(names)
    if unknown:
        parser.error(f"unknown areas {sorted(unknown)}; known: {names}")
    figures: list[Figure] = []
    for area in chosen:
        module = importlib.import_module(f"benchmarks.bench_{area}")
        print(f"== {area}", flush=True)
        for figure in module.run(quick=args.quick):
            figures.append(figure)
            print(format_figure(figure), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(fig) for fig in figures], f, indent=2)
    return 0


def format_figure(fig: Figure) -> str:
    text = f"  {fig.name:<58} {fig.value:>14,.1f} {fig.unit}"
    if fig.baseline:
        text += f"   | {fig.baseline_name or 'raw'} {fig.baseline:,.1f} {fig.unit} (ratio {fig.ratio:.2f})"
    if fig.target is not None:
        text += f"   | target {fig.target:,.0f}: {'met' if fig.meets_target else 'MISSED'}"
    if fig.note:
        text += f"   ({fig.note})"
    return text


if __name__ == "__main__":
    sys.exit(main())
