"""How the CLI prints. Text we did not write (a path, a topic, a reason) printed inside its markup
is shown as it is on a terminal (rich) and off one (the plain console), never taken for a tag; a
big table is plain columns everywhere."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from ops.tools.output import (RICH_ROWS_AT_MOST, PlainConsole, markup_escape, plain_table,
                              print_table)

HOSTILE = ["d [/tmp/x]", "[bold]not bold[/]", "a\\", "[/]", "back\\[slash]", "x [@click] y"]


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_prints_unchanged_through_rich_on_a_terminal(text: str) -> None:
    assert Text.from_markup(f"reason: [bold]{markup_escape(text)}[/] end").plain == \
        f"reason: {text} end"
    assert Text.from_markup(f"reason: {markup_escape(text)}[bold] end[/]").plain == \
        f"reason: {text} end"


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_prints_unchanged_through_the_plain_console(text: str) -> None:
    out = io.StringIO()
    PlainConsole(out).print(f"reason: [bold]{markup_escape(text)}[/] end")
    PlainConsole(out).print(f"reason: {markup_escape(text)}[bold] end[/]")
    assert out.getvalue() == f"reason: {text} end\n" * 2


def test_a_closing_tag_in_unescaped_text_is_what_rich_refuses() -> None:
    """Why the escape is needed: the same text unescaped is an error in rich."""
    from rich.errors import MarkupError

    with pytest.raises(MarkupError):
        Console(file=io.StringIO(), force_terminal=True).print("reason: d [/tmp/x]")


def test_a_table_of_many_rows_prints_as_plain_columns_even_on_a_terminal() -> None:
    """``strata stats`` of a big cluster: rich lays out about a thousand rows a second, so a
    table above ``RICH_ROWS_AT_MOST`` rows is printed as plain columns on a terminal too (every
    value whole, as off a terminal); a small one stays a rich table."""
    columns = ("name", "value")
    many = [(f"topic-{i}", i) for i in range(RICH_ROWS_AT_MOST + 1)]
    terminal = Console(file=io.StringIO(), force_terminal=True, width=80)
    print_table(terminal, "big", columns, many)
    text = terminal.file.getvalue()
    assert text == plain_table("big", columns, many)
    assert f"topic-{RICH_ROWS_AT_MOST}  {RICH_ROWS_AT_MOST}" in text
    small = Console(file=io.StringIO(), force_terminal=True, width=80)
    print_table(small, "small", columns, many[:3])
    assert "│" in small.file.getvalue() or "┃" in small.file.getvalue()   # rich's borders
