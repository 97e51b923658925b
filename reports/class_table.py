"""The classes table of the render summary and of the pull-request comment: each class on its own clock and in UTC,
its term, and its next three classes from a given day.

"Next" counts from the day a render or a comment is made for (`--today`, the current day in UTC by default), so that
a render given the same day prints the same table; nothing the render writes to files depends on the day.
"""

import datetime
import itertools
from collections.abc import Collection

from domain.stack.model import Lab, LabClass, Settings
from domain.time import zones
from domain.time.budget_windows import Window
from domain.time.class_calendar import Occurrence
from domain.time.durations import format_duration
from reports.table import Column, markdown

# Each class of a lab, with the lab and its name.
ClassItem = tuple[str, Lab, LabClass]
NEXT = 3
# How far ahead the next classes are looked for: a class of a schedule that fires once a year still shows one.
LOOK_AHEAD = datetime.timedelta(days=366)
# A warm seat requests what a learner does: the summary's table of what each learner gets says how much.
LEAD_IN = "classes: warm seats, shaped like learner pods, are asked for ahead of each start and released at it"
TERMS_LEAD_IN = "the classes' terms (outside them a class does not run)"


def _term(lab_class: LabClass) -> str:
    term = lab_class.term
    if term is None:
        return "all year"
    skip = f", not {', '.join(map(str, sorted(term.skip)))}" if term.skip else ""
    return f"{term.start} to {term.end}{skip}"


def next_classes(lab_class: LabClass, day: datetime.date) -> list[Occurrence]:
    """The class's next NEXT occurrences starting on or after `day` (on its clock)."""
    return list(itertools.islice(lab_class.occurrences(day, day + LOOK_AHEAD), NEXT))


# Each of a class's next occurrences, with the class's key and its lab's name.
NextItem = tuple[str, str, Occurrence]


def class_path(classes: list[LabClass], lab_class: LabClass) -> str:
    """The class as its key path names it (labs.<lab>.classes[i]), which the later tables refer to it by; its CronJobs'
    stable name is another thing (components/karpenter/class_seats_manifests.py class_key)."""
    return f"classes[{classes.index(lab_class)}]"


COLUMNS: tuple[Column[ClassItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("class", lambda item: class_path(item[1].classes, item[2])),
    Column("starts", lambda item: f"{item[2].schedule} {item[2].zone}"),
    Column("lasts", lambda item: item[2].duration),
    Column("warm seats", lambda item: str(item[1].warm_seats(item[2])), numeric=True),
    Column("ahead", lambda item: item[2].warmup),
)
TERM_COLUMNS: tuple[Column[ClassItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("class", lambda item: class_path(item[1].classes, item[2])),
    Column("term", lambda item: _term(item[2])),
)
# Each UTC offset a class has, with the class's windows at that offset: (lab, class key, its empty-node and its moves
# window).
UtcItem = tuple[str, str, Window, Window]
UTC_COLUMNS: tuple[Column[UtcItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("class", lambda item: item[1]),
    Column("at", lambda item: zones.utc_offset(item[2].offset)),
    Column("no learner moved, in UTC", lambda item: f"{item[3].schedule} for {format_duration(item[3].minutes)}"),
    Column("no empty node removed, in UTC", lambda item: f"{item[2].schedule} for {format_duration(item[2].minutes)}"),
)
NEXT_COLUMNS: tuple[Column[NextItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("class", lambda item: item[1]),
    Column("starts", lambda item: f"{item[2].local(item[2].start):%a %Y-%m-%d %H:%M %Z}"),
    Column("in UTC", lambda item: f"{item[2].start:%a %Y-%m-%d %H:%M}"),
    Column("seats asked for (UTC)", lambda item: f"{item[2].warm:%H:%M}"),
)


def table(settings: Settings, day: datetime.date, labs: Collection[str] | None = None) -> list[str]:
    """The classes (of the `labs` named, or all), then each one's next classes from `day`; nothing without classes."""
    chosen = settings.labs.items() if labs is None else [(n, lab) for n, lab in settings.labs.items() if n in labs]
    classes = [(name, lab, c) for name, lab in chosen for c in lab.classes]
    if not classes:
        return []
    keys = {id(c): class_path(lab.classes, c) for _, lab, c in classes}
    upcoming = [(name, keys[id(c)], o) for name, _, c in classes for o in next_classes(c, day)]
    offsets = [
        (name, keys[id(c)], empty, moves)
        for name, _, c in classes
        for moves, empty in zip(c.budget_windows[::2], c.budget_windows[1::2], strict=True)
    ]
    return [
        f"{LEAD_IN}:",
        "",
        *markdown(COLUMNS, classes),
        "",
        f"{TERMS_LEAD_IN}:",
        "",
        *markdown(TERM_COLUMNS, classes),
        "",
        "the classes in UTC, as their NodePools' budgets hold them, for each UTC offset a class has in its term:",
        "",
        *markdown(UTC_COLUMNS, offsets),
        "",
        f"the next {NEXT} classes of each from {day} (none for a class whose term is over):",
        "",
        *markdown(NEXT_COLUMNS, upcoming),
    ]
