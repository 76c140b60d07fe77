"""``python -m ops.cli``: the ``strata`` command."""

from ops.cli.main import entry

entry()
