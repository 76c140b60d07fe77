"""Offline operator tools of the ``strata`` command: they read (and, for ``recover``, repair) the
files of a log directory directly, with no cluster running.

Every module here is a subcommand: it defines ``register(subparsers)``, which adds its parser and
sets ``handler=run`` on it, and ``run(args) -> int``, which returns the exit code. ``ops.cli.main``
lists the modules. Importing one must stay cheap (``strata --help`` imports them all): storage,
numba and rich are imported inside the functions that need them, and ray never.

Exit codes shared by the tools::

    0  EXIT_OK        nothing wrong (or everything repaired)
    1  EXIT_PROBLEMS  damage found (``dump-log --verify``), repairs needed (``recover --dry-run``),
                      a repair that failed, or damage no tool repairs (``recover``'s ``manual``
                      findings: an entry named like a segment that is no usable file, a batch
                      whose records do not decode), each also one line on stderr
    2  EXIT_USAGE     bad arguments, a missing file, a directory locked by a running node, or one
                      that cannot be listed or locked (a ``.lock`` that is no file, a read-only
                      file system when repairing): one line on stderr, never a traceback
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A command was asked for something it cannot do (a missing file, a locked directory).

    ``ops.cli.main.main`` prints the message as ``strata <command>: error: <message>`` and exits
    with ``EXIT_USAGE``. Unlike a found problem (``EXIT_PROBLEMS``), nothing was checked.
    """
