"""Markdown tables whose columns also line up in a terminal: the render's summary and the pull-request comment.

A table is a list of columns, each a header and how to read its cell from one row's item, so that a new figure is one
more column where the table is defined.
"""

import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")
# The columns of the terminal the summary is read in: each table is split by concern to fit it (tests/test_render.py).
WIDTH = 120


@dataclass(frozen=True)
class Column(Generic[Item]):
    header: str
    cell: Callable[[Item], str]
    numeric: bool = False  # aligned right, as figures are read


def markdown(columns: Sequence[Column[Item]], items: Iterable[Item], last: Sequence[str] = ()) -> list[str]:
    """The table's lines: header, alignment row, one row per item, then `last` (e.g. a total) when given."""
    rows = [[column.cell(item) for column in columns] for item in items]
    if last:
        rows.append(list(last))
    cells = [[column.header for column in columns], *rows]
    cells = [[cell.replace("|", "\\|") for cell in row] for row in cells]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(columns))]

    def line(row: Sequence[str]) -> str:
        padded = (
            cell.rjust(width) if column.numeric else cell.ljust(width)
            for cell, width, column in zip(row, widths, columns, strict=True)
        )
        return f"| {' | '.join(padded)} |"

    # `---:` aligns a column right when GitHub shows the table.
    rule = "|".join("-" * (w + 1) + ":" if c.numeric else "-" * (w + 2) for c, w in zip(columns, widths, strict=True))
    return [line(cells[0]), f"|{rule}|", *(line(row) for row in cells[1:])]


def lead_in(text: str) -> list[str]:
    """A table's lead-in in lines of at most WIDTH columns."""
    return textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False)
