"""``strata`` builds its parser from the one module of the subcommand named on the command line
(``ops.cli.main.COMMAND_MODULES``); that map must name what each module really registers."""

from __future__ import annotations

import argparse

from ops.cli import main as cli


def test_command_modules_maps_every_subcommand_to_the_module_that_registers_it() -> None:
    assert sorted(cli.COMMAND_MODULES.values()) == sorted(cli.COMMANDS)
    for name, module in cli.COMMAND_MODULES.items():
        parser = cli.build_parser([module])
        subparsers = next(a for a in parser._actions
                          if isinstance(a, argparse._SubParsersAction))
        assert list(subparsers.choices) == [name], module
