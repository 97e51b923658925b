"""Reads the Markdown tables of the render's summary (and the PR comment) back into cells, as a reader sees them."""

from collections.abc import Sequence

# The start of the line before the plan's table (planner/plan.py table).
PLAN_TABLE = "what Karpenter "


def cells(line: str) -> list[str]:
    return [cell.strip().replace("\\|", "|") for cell in line.strip().strip("|").split(" | ")]


def table(lines: Sequence[str], after: str | None = None) -> list[dict[str, str]]:
    """The rows, by header, of the first table after the line that starts with `after` (else of the first table)."""
    start = 0 if after is None else next(i for i, line in enumerate(lines) if line.startswith(after)) + 1
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("| "))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    header, _rule, *body = lines[first:end]
    return [dict(zip(cells(header), cells(row), strict=True)) for row in body]


def cluster(lines: Sequence[str]) -> dict[str, str]:
    """The summary's first table, the cluster's: its header row (cluster, name) and every other row, by label."""
    header = cells(lines[0])
    return {header[0]: header[1], **{row["cluster"]: row[header[1]] for row in table(lines)}}


def lead_ins(lines: Sequence[str], starts: tuple[str, ...]) -> list[str]:
    """The lead-ins (a table's title, wrapped to the terminal's width: reports/table.py lead_in) that start with one of
    `starts`, each joined back into one line."""
    found = [i for i, line in enumerate(lines) if line.startswith(starts)]

    def end(i: int) -> int:  # the next blank line, table or list item
        return next(
            (j for j in range(i + 1, len(lines)) if not lines[j] or lines[j].startswith(("|", "- "))), len(lines)
        )

    return [" ".join(lines[i : end(i)]) for i in found]
