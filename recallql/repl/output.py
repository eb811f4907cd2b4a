"""Where the shell's results go: the terminal (through a pager when they are longer than the
screen, as psql does), or a file chosen with ``\\o FILE``.

The pager is ``$PAGER`` (``less`` when unset), run by `click.echo_via_pager`; it is used only
when standard output is a terminal (``\\pager off`` turns it off). Messages and errors never
go to the pager or the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from rich.console import Console, RenderableType

from recallql.ui.render import PIPE_WIDTH, print_table


class Output:
    """The shell's result sink.

    Args:
        console: the terminal console (messages, errors, and results unless redirected).
        pager: use a pager for results longer than the screen (only on a terminal).
    """

    def __init__(self, console: Console, pager: bool = True) -> None:
        self.console = console
        self.pager = pager
        self.path: Path | None = None
        self._file: IO[str] | None = None
        self._file_console: Console | None = None

    @property
    def width(self) -> int:
        """The width results are laid out for (the terminal's, or `PIPE_WIDTH` in a file)."""
        return self._file_console.width if self._file_console else self.console.width

    def redirect(self, path: str | None) -> None:
        """``\\o FILE`` (results to FILE, truncated first) or ``\\o`` (back to the terminal).

        Raises:
            OSError: the file cannot be opened (the output stays where it was).
        """
        handle = open(Path(path).expanduser(), "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.close()
        if handle is not None:
            self.path, self._file = Path(path or ""), handle
            self._file_console = Console(file=handle, width=PIPE_WIDTH, color_system=None,
                                         highlight=False, soft_wrap=False)

    def close(self) -> None:
        """Close the ``\\o`` file, if any."""
        if self._file is not None:
            self._file.close()
        self.path, self._file, self._file_console = None, None, None

    def show(self, renderable: RenderableType, *, soft_wrap: bool = False,
             plain: bool = False) -> None:
        """Print a result: to the ``\\o`` file, or to the terminal — through the pager when it
        has more lines than the screen and paging is on."""
        kwargs: dict[str, Any] = {"soft_wrap": soft_wrap}
        if plain:
            kwargs.update(markup=False, highlight=False)
        table = not (soft_wrap or plain)  # a table: to a file or a pipe, no trailing padding
        if self._file_console is not None:
            if table:
                print_table(self._file_console, renderable)
            else:
                self._file_console.print(renderable, **kwargs)
            self._file.flush()  # type: ignore[union-attr]
            return
        if not (self.pager and self.console.is_terminal):
            if table:
                print_table(self.console, renderable)
            else:
                self.console.print(renderable, **kwargs)
            return
        with self.console.capture() as captured:
            self.console.print(renderable, **kwargs)
        text = captured.get()
        if text.count("\n") < self.console.size.height - 1:
            self.console.file.write(text)
            self.console.file.flush()
            return
        page(text)


def page(text: str) -> None:
    """Show `text` (ANSI colours kept) in ``$PAGER``, or ``less -R`` when it is unset."""
    import click

    if not os.environ.get("PAGER"):
        os.environ.setdefault("LESS", "-FRSX")  # quit if it fits, colours, no wrap, keep screen
    click.echo_via_pager(text, color=True)
