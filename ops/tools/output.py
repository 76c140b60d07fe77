"""Output helpers shared by the ``strata`` subcommands: ``--json`` documents, rich tables and a
progress bar that stays out of the way when nobody is watching.

Conventions: machine-readable output goes to stdout, one compact JSON document per line (so a
stream of documents is JSON Lines and ``jq`` reads it); human tables go to stdout; progress bars
and diagnostics go to stderr, so ``--json`` output can be piped while the bar is shown. rich is
imported on first use, keeping ``strata --help`` fast.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, Iterator, Sequence

if TYPE_CHECKING:
    from rich.console import Console

WIDE = 200   # columns of a console that is not a terminal (a pipe, a file, a test)
_MARKUP_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")   # rich's markup tags (rich.markup.RE_TAGS)


def printable(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1; newlines and tabs too) and every
    undecodable byte (a surrogate from ``os.fsdecode``) escaped as ``\\xNN`` (``\\uNNNN`` above
    0xFF), so a hostile file name cannot drive the terminal or forge a line of output."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:         # surrogateescape: the raw byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


class EscapingStream(io.TextIOBase):
    """A text stream that writes ``raw`` forms of a file name as their ``printable`` form (the
    messages of storage errors embed the path as it is)."""

    def __init__(self, stream: IO[str], raw: list[str]) -> None:
        super().__init__()
        self._stream = stream
        self._pairs = sorted(((r, printable(r)) for r in set(raw) if r != printable(r)),
                             key=lambda pair: -len(pair[0]))

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        for raw, shown in self._pairs:
            text = text.replace(raw, shown)
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()


def json_line(document: Any) -> str:
    """``document`` as one compact line of JSON (non-ASCII kept as is)."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def write_json(document: Any, stream: IO[str] | None = None) -> None:
    """Print ``document`` as one line of JSON on ``stream`` (stdout by default)."""
    out = stream if stream is not None else sys.stdout
    out.write(json_line(document) + "\n")


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr) when it is a terminal; otherwise a ``PlainConsole``,
    which prints every line whole (no wrapping at 80 columns, no colour) without importing rich
    (a tenth of a second of every command whose output goes to a pipe or a file)."""
    stream = sys.stderr if stderr else sys.stdout
    if not _terminal(stream):
        return PlainConsole(stream)  # type: ignore[return-value]
    from rich.console import Console

    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, width=WIDE, no_color=True)


def _terminal(stream: IO[str]) -> bool:
    """Whether rich could take ``stream`` for a terminal: a tty, or an environment that says so
    (rich's ``TTY_COMPATIBLE`` and ``FORCE_COLOR``)."""
    if os.environ.get("TTY_COMPATIBLE") or os.environ.get("FORCE_COLOR") is not None:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def markup_escape(text: str) -> str:
    """``text`` (a path, a topic, a reason: anything not written by us) made literal inside a
    markup string: every ``[`` that could open or close a tag gets a backslash, as
    ``rich.markup.escape`` does (without importing rich). Unescaped, ``[/tmp/x]`` in a reason
    makes rich raise ``MarkupError`` and the plain output drop it."""
    escaped = _MARKUP_TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\[{m.group(2)}]", text)
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        escaped += "\\"
    return escaped


def plain_markup(text: str) -> str:
    """``text`` with rich's markup tags removed (``[bold]x[/]`` -> ``x``); an escaped tag
    (``\\[bold]``) and a closing tag that closes nothing (``[/tmp/x]``, which rich refuses)
    stay as literal text."""
    opened: list[str] = []

    def replace(match: re.Match[str]) -> str:
        backslashes, escaped = divmod(len(match.group(1)), 2)
        tag = match.group(2)
        if escaped:
            kept = f"[{tag}]"
        elif not tag.startswith("/"):
            opened.append(tag.partition("=")[0])
            kept = ""
        elif tag == "/" and opened:
            opened.pop()
            kept = ""
        elif tag[1:] in opened:
            opened.remove(tag[1:])
            kept = ""
        else:
            kept = f"[{tag}]"
        return "\\" * backslashes + kept
    return _MARKUP_TAG.sub(replace, text)


class PlainConsole:
    """The part of rich's ``Console`` the commands use, for output that is not a terminal:
    ``print`` writes its text (markup removed unless ``markup=False``) on one line, whatever its
    length; ``is_terminal`` is False and ``file`` is the stream. Anything that is not text (a
    rich renderable) is printed by a rich console of the same stream."""

    is_terminal = False

    def __init__(self, file: IO[str]) -> None:
        self.file = file

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", markup: bool = True,
              **_options: Any) -> None:
        if not all(isinstance(o, str) for o in objects):
            from rich.console import Console

            Console(file=self.file, highlight=False, width=WIDE, no_color=True).print(
                *objects, sep=sep, end=end, markup=markup)
            return
        text = sep.join(objects)
        self.file.write((plain_markup(text) if markup else text) + end)


RICH_ROWS_AT_MOST = 2_000


def print_table(out: Console, title: str | None, columns: Sequence[str],
                rows: Sequence[Sequence[object]], *, wrap: Sequence[str] = ()) -> None:
    """One rich table on a terminal; ``None`` cells print as empty. Only the ``wrap`` columns
    wrap on a narrow terminal; the others (names, paths, numbers) stay on one line. When ``out``
    is not a terminal (a pipe, a file) the table is plain columns separated by two spaces, every
    value whole: never an ellipsis, whatever the width or ``COLUMNS``. So is a table of more
    than ``RICH_ROWS_AT_MOST`` rows on a terminal: rich lays out about a thousand rows a second,
    which would make ``strata stats`` of 100,000 partitions print for minutes."""
    if not out.is_terminal or len(rows) > RICH_ROWS_AT_MOST:
        out.file.write(plain_table(title, columns, rows))
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=column not in wrap)
    for row in rows:
        table.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    out.print(table)


def plain_table(title: str | None, columns: Sequence[str],
                rows: Sequence[Sequence[object]]) -> str:
    """The text of a table as plain columns (left-aligned, two spaces apart, trailing blanks
    cut), a title line first when there is one; every cell whole, a newline in it escaped."""
    cells = [[str(c) for c in columns]] + [
        [printable("" if cell is None else str(cell)) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = [title] if title else []
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


class Steps:
    """A progress bar of ``total`` steps; ``advance`` moves it and names the current item."""

    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, description: str | None = None, steps: int = 1) -> None:
        if self._progress is None:
            return
        if description is not None:
            self._progress.update(self._task, description=description)
        self._progress.advance(self._task, steps)


@contextmanager
def progress_bar(total: int, description: str, *, enabled: bool = True) -> Iterator[Steps]:
    """A rich progress bar on stderr, shown only when stderr is a terminal and ``enabled``."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    err = console(stderr=True)
    if not enabled or not err.is_terminal:
        yield Steps(None, None)
        return
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, transient=False)
    with progress:
        task = progress.add_task(description, total=max(total, 0))
        yield Steps(progress, task)


def human_bytes(count: int) -> str:
    """``1536`` -> ``1.5 KiB``; exact below 1 KiB."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"
