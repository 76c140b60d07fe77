"""Text we did not write (a path, a topic, a reason) printed inside the CLI's markup: shown as it
is on a terminal (rich) and off one (the plain console), never taken for a tag."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

from ops.tools.output import PlainConsole, markup_escape

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
