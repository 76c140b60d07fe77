"""The ``strata`` command (console script ``strata = ops.cli.main:entry``; also
``python -m ops.cli``).

Every subcommand lives in its own module, listed in ``COMMANDS``. A module defines::

    def register(subparsers: argparse._SubParsersAction) -> None:
        parser = subparsers.add_parser("dump-log", help="...", description="...")
        parser.add_argument(...)
        parser.set_defaults(handler=run)

    def run(args: argparse.Namespace) -> int:      # the exit code
        ...

To add a subcommand, write such a module and append its dotted name to ``COMMANDS``. ``main``
imports every listed module to build the parser, so a module's top level must stay cheap: import
ray, pyspark, storage and the cluster client inside ``run``, never at module level (``strata
--help`` must not start numba or ray; tests/cluster/test_cli.py checks it). A handler raises
``ops.tools.UsageError`` for a request it cannot serve; ``main`` prints it and exits 2.
Exit codes are in ``ops.tools``: 0 fine, 1 problems found, 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import NoReturn, Sequence

from ops.tools import EXIT_USAGE, UsageError

COMMANDS: tuple[str, ...] = (
    "ops.tools.dump_log",
    "ops.tools.recover",
    "ops.cli.lifecycle",
    "ops.cli.topics",
    "ops.cli.produce",
    "ops.cli.consume",
    "ops.cli.log_dirs",
    "ops.cli.cleaning",
    "ops.cli.groups",
    "ops.drills.command",
    "ops.plot",
)

# the subcommand each module of COMMANDS registers: a command line naming one builds the parser
# from that module alone (the others, the drills above all, cost a tenth of a second to import)
COMMAND_MODULES: dict[str, str] = {
    "dump-log": "ops.tools.dump_log", "recover": "ops.tools.recover",
    "cluster": "ops.cli.lifecycle", "topic": "ops.cli.topics",
    "produce": "ops.cli.produce", "consume": "ops.cli.consume",
    "log-dirs": "ops.cli.log_dirs", "cleaner": "ops.cli.cleaning", "groups": "ops.cli.groups",
    "drill": "ops.drills.command", "stats": "ops.plot",
}

EXIT_INTERRUPTED = 130


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``strata`` parser with one subcommand per module of ``commands`` (``COMMANDS``)."""
    parser = argparse.ArgumentParser(
        prog="strata",
        description="Strata: Kafka's log storage layer in Python. Offline tools work on the files "
                    "of a log directory; cluster commands talk to a running cluster.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS if commands is None else commands:
        module = importlib.import_module(name)
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (``sys.argv[1:]`` by default), run the subcommand, return its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    first = words[0] if words else None
    parser = build_parser([COMMAND_MODULES[first]] if first in COMMAND_MODULES else None)
    args, extras = parser.parse_known_args(words)
    if extras:
        _unrecognized(parser, args, extras)
    try:
        return int(args.handler(args))
    except UsageError as err:
        print(f"strata {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"strata {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (``strata dump-log ... | head``): stop quietly, like cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace,
                  extras: list[str]) -> NoReturn:
    """Refuse ``extras`` with the usage of the sub-command they were given to (argparse would
    print the top-level usage), saying what to use instead of a Kafka tool's flag."""
    from ops.cli.kafka_flags import hint

    command = parser
    while True:
        sub = next((a for a in command._actions if isinstance(a, argparse._SubParsersAction)),
                   None)
        name = None if sub is None else getattr(args, sub.dest, None)
        if sub is None or name not in sub.choices:
            break
        command = sub.choices[name]
    hints = [f"{flag.split('=', 1)[0]}: {said}" for flag in extras
             if flag.startswith("--") and (said := hint(args.command, flag)) is not None]
    message = f"unrecognized arguments: {' '.join(extras)}"
    if hints:
        message += " (" + "; ".join(hints) + ")"
    command.error(message)


def entry() -> NoReturn:
    """The ``strata`` program (the console script and ``python -m ops.cli``): ``main``, then the
    end of the process. When the command made this process a Ray driver (``ops.cli.connect``),
    the process ends with ``os._exit`` once stdout and stderr are flushed: every call of the
    command has returned, and Ray's own teardown (``ray.shutdown``, run by its exit hook after a
    0.5 s sleep) would add a third of a second or more to a command that takes less. The raylet
    sees the driver's connection close and ends its job as it does after a shutdown. ``main``
    called in a process that goes on (the tests) keeps disconnecting as before."""
    import ops.cli as cli

    cli.exit_when_done()
    code = main()
    if cli.driver_started():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):   # the reader went away, or it is closed
                pass
        logging.shutdown()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
