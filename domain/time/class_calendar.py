"""A class's calendar: the days of its term, and on each the moments its seats are asked for, it starts and it ends.

A class's `schedule` is read on the wall clock of its time zone: `0 9 * * tue` in Europe/Berlin starts at 09:00 in
Berlin, 08:00 UTC in winter and 07:00 UTC in summer. Its `duration` is time elapsed, so a class over a daylight-saving
change ends as long after its start as on any other day. Every moment here is an aware datetime in UTC (arithmetic on
aware datetimes of one zone would count wall-clock time); `Occurrence.local` shows one in the class's zone.

occurrences() is the calendar the cost of a term is computed from, too; it needs nothing but the class's settings.
"""

import datetime
import functools
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from domain.problems import FieldProblem
from domain.time import cron, zones
from domain.time.cron import MINUTES_PER_DAY, Schedule
from domain.time.durations import format_duration

# A class without a term repeats every year; it is checked and planned over one whole cycle of the Gregorian calendar
# (28 years hold every weekday on every date, leap days included), from the year of the pinned tz database's release:
# daylight-saving rules fall on weekdays ("the last Sunday of March"), so their dates cycle with the calendar.
FIRST_YEAR = int(zones.VERSION[:4])
YEARS = 28


@dataclass(frozen=True)
class Occurrence:
    """One class: when its seats are asked for (`warm`), when it starts and when it ends, in UTC."""

    zone: str
    warm: datetime.datetime
    start: datetime.datetime
    end: datetime.datetime
    offset: datetime.timedelta  # the zone's UTC offset at the start, and through the warm-up (a change is refused)

    def local(self, moment: datetime.datetime) -> datetime.datetime:
        return moment.astimezone(zones.zone(self.zone))


def horizon() -> tuple[datetime.date, datetime.date]:
    """The first and last day a class without a term is checked and planned over."""
    return datetime.date(FIRST_YEAR, 1, 1), datetime.date(FIRST_YEAR + YEARS - 1, 12, 31)


def class_days(
    start: Schedule, first: datetime.date, last: datetime.date, skip: Collection[datetime.date] = ()
) -> Iterator[datetime.date]:
    """The local days from `first` to `last` (inclusive) on which the schedule starts a class, less `skip`."""
    day = first
    while day <= last:
        if start.matches_day(day) and day not in skip:
            yield day
        day += datetime.timedelta(days=1)


def occurrences(
    start: Schedule,
    zone: str,
    warmup: int,
    duration: int,
    first: datetime.date,
    last: datetime.date,
    skip: Collection[datetime.date] = (),
) -> Iterator[Occurrence]:
    """Every class that starts on a local day from `first` to `last` (inclusive) but `skip`, in order of its start;
    `warmup` and `duration` in minutes.

    Raises FieldProblem at `schedule` when a daylight-saving change skips or repeats a start on a class day (its
    CronJob would not fire, or fire twice), and at `warmup` when it does so to the time the seats are asked for, or
    falls between that time and the start (the seats would be asked for an hour early or late).
    """
    lead = datetime.timedelta(minutes=warmup)
    for day in class_days(start, first, last, skip):
        for minutes in start.times_of_day():
            try:
                begins = zones.instant(day, minutes, zone)
            except zones.LocalTimeError as error:
                raise FieldProblem("schedule", f"its start, {error}; choose a start the clock shows once") from None
            warm_day, warm_minutes = divmod(day.toordinal() * MINUTES_PER_DAY + minutes - warmup, MINUTES_PER_DAY)
            try:
                warm = zones.instant(datetime.date.fromordinal(warm_day), warm_minutes, zone)
            except zones.LocalTimeError as error:
                raise FieldProblem(
                    "warmup", f"its warm-up would begin at {error}; choose a start or a warmup that avoids it"
                ) from None
            if begins - warm != lead:
                raise FieldProblem(
                    "warmup",
                    f"the clocks of {zone} change between {warm_minutes // 60:02d}:{warm_minutes % 60:02d} and the "
                    f"start at {minutes // 60:02d}:"
                    f"{minutes % 60:02d} on {day:%a %Y-%m-%d}, so the seats would not be asked for "
                    f"{format_duration(warmup)} ahead; choose a start or a warmup that avoids it",
                )
            offset = datetime.datetime.combine(day, datetime.time()) + datetime.timedelta(minutes=minutes)
            yield Occurrence(
                zone,
                begins - lead,
                begins,
                begins + datetime.timedelta(minutes=duration),
                offset - begins.replace(tzinfo=None),
            )


def day_start(day: datetime.date, zone: str) -> datetime.datetime:
    """The first moment of a local day, in UTC: its midnight, or the end of a daylight-saving gap that swallows it (a
    skipped midnight read with fold=0, PEP 495, lands there)."""
    midnight = datetime.datetime.combine(day, datetime.time(), tzinfo=zones.zone(zone))
    return midnight.astimezone(datetime.UTC)


def fixed_offset(zone: str) -> datetime.timedelta | None:
    """The zone's one UTC offset over the horizon, or None when it changes."""
    return zones.fixed_offset(zone, datetime.datetime(FIRST_YEAR, 1, 1, tzinfo=datetime.UTC))


@functools.lru_cache(maxsize=1024)
def planned(
    start: Schedule,
    zone: str,
    warmup: int,
    duration: int,
    term: tuple[datetime.date, datetime.date, tuple[datetime.date, ...]] | None,
) -> tuple[Occurrence, ...] | None:
    """The occurrences a class is checked and its budgets planned by: those of its term (first day, last day, days
    skipped), or without one those over the horizon; None for a class without a term in a zone of one fixed offset,
    on whose clock every time exists once. Cached: validation and the model both ask."""
    if term is None:
        if fixed_offset(zone) is not None:
            return None
        first, last = horizon()
        return tuple(occurrences(start, zone, warmup, duration, first, last))
    return tuple(occurrences(start, zone, warmup, duration, *term))


def missed_days(
    start: Schedule, zone: str, warmup: int, planned: tuple[Occurrence, ...] | None
) -> list[tuple[datetime.date, str]]:
    """The class's CronJobs that the CronJob controller would not run on a class day, as (local day, "warm-up at
    HH:MM" or "release at HH:MM"), in order: a job whose day's midnight the zone skips, on a schedule that does not also
    fire the day before, never runs that day (robfig/cron v3.0.1 spec.go Next, followed in domain/time/cron.py
    robfig_next). Only those days are asked; on every other day Next finds each time the clock shows once."""
    if planned is None:  # a zone of one fixed offset, whose midnights all exist
        return []
    try:
        warm = cron.shift(start, -warmup)
    except cron.ScheduleError:  # the warmup's own problem
        warm = None
    missed = []
    for occurrence in planned:
        for job, schedule, moment in (("warm-up", warm, occurrence.warm), ("release", start, occurrence.start)):
            day = occurrence.local(moment).date()
            if schedule is None or not zones.midnight_skipped(day, zone):
                continue
            # From just before the day before's first moment, as from any earlier run of the job: Next walks the
            # days from there (spec.go's day loop), and fires the day before first if the schedule does.
            fire: int | None = int(day_start(day - datetime.timedelta(days=1), zone).timestamp()) - 1
            while fire is not None and fire < moment.timestamp():
                fire = cron.robfig_next(schedule, zone, fire)
            if fire != moment.timestamp():
                missed.append((day, f"{job} at {occurrence.local(moment):%H:%M}"))
    return missed


@dataclass(frozen=True)
class ClassTerm:
    """A class's occurrences over the days it is rehearsed on, in order of their start, named as a reader knows it
    (`intro classes[0]`); `ends` when its last occurrence is the last of its term (a class without a term has none)."""

    name: str
    occurrences: tuple[Occurrence, ...]
    ends: bool


def class_day(occurrence: Occurrence) -> datetime.date:
    """The local day an occurrence starts on, on the clock of its zone."""
    return occurrence.local(occurrence.start).date()


def distinct_days(terms: Iterable[ClassTerm]) -> dict[datetime.date, tuple[str, ...]]:
    """The class days the rehearsal plays by default (issue #48), each with why, in order of date: of each class, its
    first day and the last of its term, its first class on each weekday it has classes (Karpenter's disruption budgets
    are UTC cron windows by weekday), and its first class after each change of its zone's UTC offset (a daylight-saving
    change: the same local start then falls at another UTC time against those windows). Not every combination: after a
    change, a class on Mondays and Thursdays plays its first class, a Monday, and not the Thursday after it, which
    only all_days plays."""
    why: dict[datetime.date, list[str]] = {}
    for term in terms:
        if not term.occurrences:
            continue
        first, last = term.occurrences[0], term.occurrences[-1]
        why.setdefault(class_day(first), []).append(f"{term.name}: its first day")
        if term.ends:
            why.setdefault(class_day(last), []).append(f"{term.name}: the last day of its term")
        seen: set[int] = set()
        for before, occurrence in zip((None, *term.occurrences), term.occurrences, strict=False):
            day = class_day(occurrence)
            if day.weekday() not in seen:
                seen.add(day.weekday())
                why.setdefault(day, []).append(f"{term.name}: its first {day:%A}")
            if before is not None and before.offset != occurrence.offset:
                why.setdefault(day, []).append(
                    f"{term.name}: its first class after the clocks of {occurrence.zone} change from "
                    f"{zones.utc_offset(before.offset)} to {zones.utc_offset(occurrence.offset)}"
                )
    return {day: tuple(dict.fromkeys(why[day])) for day in sorted(why)}


def all_days(terms: Iterable[ClassTerm]) -> dict[datetime.date, tuple[str, ...]]:
    """Every class day of every class, in order of date, each with the classes that have it."""
    why: dict[datetime.date, list[str]] = {}
    for term in terms:
        for occurrence in term.occurrences:
            why.setdefault(class_day(occurrence), []).append(f"{term.name}: a class day")
    return {day: tuple(dict.fromkeys(why[day])) for day in sorted(why)}
