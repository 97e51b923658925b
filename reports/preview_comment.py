"""The pull-request comment of one stack's preview: a Kubernetes version change EKS would refuse, against the base
branch's render (reports/version_change.py), first; what the change does to the labs' cost against that render
(reports/cost_diff.py, when given one; a rise above gpulab:costAlertThreshold flagged first), its cost tables (at the
prices a `pulumi preview` read in the stack's region with --preview-cost: domain/cost/preview_cost.py), its
classes (on their clocks and in UTC, their terms and next occurrences: reports/class_table.py, from the stack file),
what Karpenter would launch for a full lab and at each class start (when the render has a plan.json), the class day the
rehearsal played on the twin (when a rehearsal.json is beside the render; else one line says it did not run), then the
`pulumi preview` output.

    python -m tools.preview_comment --stack <name> --outputs <render dir>/outputs.json --preview <file>
        [--base-outputs <base render dir>/outputs.json] [--plan <render dir>/plan.json]
        [--rehearsal <render dir>/rehearsal.json] [--preview-cost <file>] [--run-url URL] [--today YYYY-MM-DD]

Prints the comment's Markdown. Its first line marks the stack's comment, so that .ci/preview-comment updates it on the
next push instead of adding another. The Kubernetes versions come from the resources.json beside each outputs.json.
Exits with status 3 (REFUSED) once the comment is printed when EKS would refuse the version change (the reason on
stderr too, for the job's log), 2 without a comment for a stack file with problems.
"""

import argparse
import bisect
import datetime
import functools
import html
import json
import re
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import domain.stack
import render.run
from domain.cost import preview_cost, prices
from domain.cost.price_book import LIST
from domain.time import utc
from planner import plan
from rehearsal import report
from reports import class_table, cost_diff, cost_report, version_change
from reports.table import lead_in

# GitHub refuses comments over 65536 characters.
MAX_COMMENT_CHARS = 65_536
# The room the tables leave the preview at least: its end (the policy results and the count of changes) is what a
# reviewer reads first, and a stack of a few hundred labs would otherwise fill the comment with its tables alone.
PREVIEW_MIN_CHARS = 16_384
CUT_NOTE = "[... the start is cut; the whole output is in the run's log]"
# The exit status of a comment printed for a change whose Kubernetes version EKS would refuse: .ci/preview-comment
# posts it, then fails (a Python error exits with 1, and prints no comment to post).
REFUSED = 3
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def marker(stack: str) -> str:
    return f"<!-- gpulab-preview:{stack} -->"


def comment(
    stack: str,
    labs: dict,
    preview: str,
    run_url: str | None = None,
    planned: dict | None = None,
    classes: Callable[[Collection[str]], list[str]] = lambda shown: [],
    whole_stack: Callable[[dict], list[str]] = lambda figures: [],
    base: dict | None = None,
    threshold: float | str | None = None,
    costs: tuple[dict | None, dict | None] = (None, None),
    rehearsed: dict | None = None,
    refused: str | None = None,
    budgets: Sequence[str] = (),
    priced: dict | None = None,
) -> str:
    """The comment; `classes` gives the class table of the labs shown, `whole_stack` the whole stack's cost and term
    from every lab's figures (reports/cost_report.py stack_table); `base` is the base branch's `labs` output, and a rise
    of all labs' "at most" per hour over it by more than `threshold` (gpulab:costAlertThreshold) is flagged first;
    `costs` are the base's and the head's `cost` outputs, whose totals the diff compares; `rehearsed` is the
    rehearsal.json beside the render, None when the rehearsal did not run; `refused` says why EKS would refuse the
    change's Kubernetes version (reports/version_change.py), on top; `budgets` are the labs' budget lines the summary
    shows too (reports/cost_report.py budgets), after the whole stack's cost; `priced` holds the labs' figures a `pulumi
    preview` priced in the stack's region (priced_at_preview), which the lab cost table and `whole_stack` show instead
    of the render's, with its notes before them."""
    preview = _ANSI.sub("", preview).strip()
    run = f": {run_url}" if run_url else "."
    failed = "The preview did not finish; its log is in the workflow run" + run

    flag = cost_diff.alert(base, labs, threshold) if base is not None else None
    alike = base is None or cost_diff.totals_alike(base, labs)
    whole_diff = [*total, ""] if (total := cost_diff.stack_total(*costs, alike)) else []

    def frame(shown: list[str]) -> list[str]:
        """The comment around the preview, with the rows of the labs `shown` (their plan's too)."""
        left_out = len(names) - len(shown)
        cut = [
            f"The tables leave out the last {left_out} of the {len(names)} labs to fit GitHub's limit on a comment; "
            f"the render step of the workflow run lists them all{run}",
            "",
        ]
        rows = set(shown)
        shown_plan = {**planned, "labs": {n: p for n, p in planned["labs"].items() if n in rows}} if planned else None
        return [
            marker(stack),
            f"#### `pulumi preview` of {stack}",
            "",
            *([f"> [!CAUTION]\n> {refused}", ""] if refused else []),
            *([flag, ""] if flag else []),
            *([*cost_diff.table(base, labs, rows), "", *whole_diff] if base is not None else []),
            *([*priced["notes"], ""] if priced else []),
            *cost_report.table(priced["labs"] if priced else figures, rows, priced["region"] if priced else None),
            "",
            *([*table, ""] if (table := whole_stack(priced["labs"] if priced else figures)) else []),
            *([*budgets, ""] if budgets else []),
            *([*table, ""] if (table := classes(rows)) else []),
            *([*plan.summary_table(shown_plan), ""] if shown_plan else []),
            *report.table(rehearsed, rows),
            "",
            *(cut if left_out else []),
            "<details><summary>Pulumi preview</summary>",
            "",
            "{body}",
            "</details>",
            "",
        ]

    def too_long(shown: int) -> bool:
        return len("\n".join(frame(names[:shown]))) > MAX_COMMENT_CHARS - PREVIEW_MIN_CHARS

    # The most labs, in name order, whose rows leave the preview its room: one less than the fewest that do not (the
    # frame grows with every lab shown). A lab the change removes has a row in the diff only.
    names = sorted(set(labs) | set(base or {}))
    figures = plan.with_plan(labs, planned)
    shown = max(bisect.bisect_left(range(len(names) + 1), True, key=too_long) - 1, 0)
    kept = frame(names[:shown])
    room = MAX_COMMENT_CHARS - len("\n".join(kept)) - len("<pre>\n\n</pre>") - len(CUT_NOTE) - 1
    body = f"<pre>\n{_last_lines_escaped(preview, room)}\n</pre>" if preview else failed
    return "\n".join(kept).replace("{body}", body)


def priced_at_preview(
    found: dict, labs: dict, planned: dict | None, seats: dict[str, int], diffed: bool
) -> dict[str, Any]:
    """The labs' figures as `pulumi preview` priced them (`found`, domain/cost/preview_cost.py) for the comment's cost
    tables, its prices (`book`) for the whole stack's, and the notes that say what is priced where: the cost diff
    (`diffed`) stays the offline renders' (the base has no preview, and like is compared with like). The planner's
    figures (`planned`) are made Karpenter's only where it priced its fleets in the same region (`karpenters`); else
    each lab's "at most" is the preview's arithmetic bound, at its configured `seats`, and a note says why."""
    region = found["region"]
    karpenters = planned is not None and planned.get("pricesRegion") == region
    at_preview = {
        name: {**lab, "learnerSeats": seats[name], "cost": found["labs"][name]["cost"]} for name, lab in labs.items()
    }
    list_region = prices.REGION  # the render's prices (domain/cost/price_book.py LIST)
    notes = [
        *(
            lead_in(
                "the cost diff above compares the offline renders of the base branch and of this pull request, both "
                f"at the {list_region} list: like with like"
            )
            if diffed
            else []
        ),
        *lead_in(f"the cost tables below are priced by `pulumi preview` from {region}'s prices"),
        *(
            lead_in(
                f"each lab's at most per hour below is the arithmetic bound at {region}'s prices: the planner priced "
                f"Karpenter's full lab (the plan below) at the {planned['pricesRegion']} list"
            )
            if planned is not None and not karpenters
            else []
        ),
    ]
    return {
        "region": region,
        "labs": plan.with_plan(at_preview, planned if karpenters else None),
        "book": preview_cost.book_from(found["book"]),
        "karpenters": karpenters,
        "notes": notes,
    }


def _last_lines_escaped(text: str, room: int) -> str:
    """The text HTML-escaped, cut from the front at whole lines to fit `room` characters: its end holds the policy
    results and the count of changes. Escaping can make a line several times longer, so the cut counts escaped text."""
    kept: list[str] = []
    used = 0
    for line in reversed(text.splitlines()):
        escaped = html.escape(line)
        if used + len(escaped) + 1 > room:
            return "\n".join([CUT_NOTE, *reversed(kept)])
        kept.append(escaped)
        used += len(escaped) + 1
    return "\n".join(reversed(kept))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.preview_comment", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stack", required=True, help="the stack's name, or the path of its stack file (the comment names the stack)"
    )
    parser.add_argument("--outputs", required=True, type=Path, help="outputs.json of the stack's offline render")
    parser.add_argument(
        "--preview", required=True, type=Path, help="the output of `pulumi preview`; absent if it never ran"
    )
    parser.add_argument(
        "--base-outputs",
        type=Path,
        help="outputs.json of the base branch's render of the stack, which the comment's cost diff compares with",
    )
    parser.add_argument("--plan", type=Path, help="plan.json of the render (planner/plan.py), when the planner ran")
    parser.add_argument(
        "--rehearsal", type=Path, help="rehearsal.json beside the render (rehearsal/run.py), when the rehearsal ran"
    )
    parser.add_argument(
        "--preview-cost",
        type=Path,
        help=f"the cost figures `pulumi preview` wrote where {preview_cost.ENV} said (domain/cost/preview_cost.py); "
        "the cost tables show them when the file is there, else the render's",
    )
    parser.add_argument("--run-url", help="the workflow run, linked when the preview has no output")
    parser.add_argument(
        "--today",
        type=datetime.date.fromisoformat,
        help="the day (YYYY-MM-DD) the classes' next occurrences count from; the current day in UTC by default",
    )
    args = parser.parse_args(argv)
    outputs = json.loads(args.outputs.read_text())
    labs = outputs["labs"]
    # The preview step writes the file as it runs; a job that failed before it (credentials, say) leaves none.
    preview = args.preview.read_text() if args.preview.is_file() else ""
    planned = json.loads(args.plan.read_text()) if args.plan else None
    rehearsed = json.loads(args.rehearsal.read_text()) if args.rehearsal else None
    base_outputs = json.loads(args.base_outputs.read_text()) if args.base_outputs else {}
    base = base_outputs.get("labs") if args.base_outputs else None
    try:  # the stack file the render read: the classes' calendars are settings, not outputs
        name, stack_path = render.run.stack_file(args.stack)
        stack = domain.stack.from_cli(render.run.read_stack_file(stack_path))
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    day = args.today or utc.today()
    found = preview_cost.read(args.preview_cost)
    seats = {name: lab.learner_seats for name, lab in stack.settings.labs.items()}
    priced = None if found is None else priced_at_preview(found, labs, planned, seats, base is not None)
    classes = functools.partial(class_table.table, stack.settings, day)
    whole = functools.partial(
        cost_report.stack_table,
        stack,
        day=day,
        planned=planned is not None if priced is None else priced["karpenters"],
        book=priced["book"] if priced else LIST,
    )
    threshold = stack.settings.cost_alert_threshold
    costs = (base_outputs.get("cost"), outputs.get("cost"))
    versions = [version_change.rendered_version(f.parent) if f else None for f in (args.base_outputs, args.outputs)]
    refused = version_change.refusal(*versions)
    body = comment(
        name,
        labs,
        preview,
        args.run_url,
        planned,
        classes,
        whole,
        base,
        threshold,
        costs,
        rehearsed,
        refused,
        # The budget lines, then the warning the render prints of a lab whose nodes may cost more over its budget's
        # period than the budget (cost_report.budget_warnings), which a reviewer reads here, not in the job's log.
        [
            *cost_report.budgets(stack.settings),
            *(
                line
                for warning in cost_report.budget_warnings(priced["labs"] if priced else labs)
                for line in lead_in(f"- warning: {warning}")
            ),
        ],
        priced,
    )
    sys.stdout.write(body)
    if refused:
        print(refused, file=sys.stderr)
        return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main())
