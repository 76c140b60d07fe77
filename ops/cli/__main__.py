"""``python -m ops.cli``: the ``strata`` command."""

import sys

from ops.cli.main import main

sys.exit(main())
