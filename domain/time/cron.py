"""Go cron schedules as Karpenter and Kubernetes read them, parsed and shifted in time.

Karpenter parses a budget schedule with robfig/cron v3.0.1 `cron.ParseStandard("TZ=UTC " + schedule)`
(kubernetes-sigs/karpenter at 6e7eab7a0f48, the version karpenter-provider-aws v1.14.1 pins: pkg/apis/v1/nodepool.go,
Budget.IsActive), and the Kubernetes CronJob controller parses `spec.schedule` with the same ParseStandard. This module
follows that grammar rule for rule (robfig/cron v3.0.1 parser.go and spec.go):

- five whitespace-separated fields: minute 0-59, hour 0-23, day of month 1-31, month 1-12, day of week 0-6 (0 is
  Sunday; 7 is refused);
- each field is a comma-separated list (empty items are dropped) of `*` or `?`, a number, `a-b`, `a/step` (a to the
  field's maximum), `a-b/step` or `*/step`; months and days of week also take three-letter names in any case
  (`jan`, `MON`), never longer ones (`monday` is an error);
- the descriptors @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly, spelled exactly so;
- when both day fields are restricted a day matches if EITHER does; when either was written `*` or `?` (robfig's
  "star bit", which `*/2` clears but `*/1` keeps) a day matches only if BOTH do.

Refused although robfig itself accepts them, because neither consumer can use them: `TZ=`/`CRON_TZ=` prefixes
(Karpenter already prefixes `TZ=UTC`, after which a second prefix reads as a sixth field; Kubernetes rejects them beside
`timeZone`) and `@every <duration>` (the NodePool CRD's schedule pattern admits no `@every`, and its firings depend
on when the controller started, not on the clock).
"""

from __future__ import annotations

import datetime
import functools
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from domain.time.durations import format_duration

MINUTES_PER_DAY = 24 * 60


class ScheduleError(ValueError):
    """The schedule is not one that Karpenter or the CronJob controller can use; the message says why."""


@dataclass(frozen=True)
class _Bounds:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] is the value low + i

    def value_of(self, name: str) -> int | None:
        lowered = name.lower()
        return self.low + self.names.index(lowered) if lowered in self.names else None


_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (
    _Bounds("minute", 0, 59),
    _Bounds("hour", 0, 23),
    _Bounds("day-of-month", 1, 31),
    _Bounds("month", 1, 12, _MONTH_NAMES),
    _Bounds("day-of-week", 0, 6, _DAY_NAMES),
)
MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK = _FIELDS

# robfig's parseDescriptor builds exactly the bits of these five-field schedules.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# strconv.Atoi: an optional sign and ASCII decimal digits, within int64.
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MAX = 2**63 - 1


def _is_go_space(char: str) -> bool:
    # unicode.IsSpace, which strings.Fields and strings.TrimSpace split and trim on.
    return char in "\t\n\v\f\r \x85\xa0" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _go_fields(text: str) -> list[str]:
    fields, current = [], ""
    for char in text:
        if _is_go_space(char):
            if current:
                fields.append(current)
            current = ""
        else:
            current += char
    return [*fields, current] if current else fields


def _go_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _is_go_space(text[start]):
        start += 1
    while end > start and _is_go_space(text[end - 1]):
        end -= 1
    return text[start:end]


@dataclass(frozen=True)
class Field:
    """The values one field matches, and whether robfig's star bit is set (only the day fields' bits matter)."""

    values: frozenset[int]
    star: bool = False


@dataclass(frozen=True)
class Schedule:
    minute: Field
    hour: Field
    day_of_month: Field
    month: Field
    day_of_week: Field

    def matches_day(self, day: datetime.date) -> bool:
        """robfig's dayMatches, plus the month field."""
        if day.month not in self.month.values:
            return False
        dom = day.day in self.day_of_month.values
        dow = day.isoweekday() % 7 in self.day_of_week.values
        if self.day_of_month.star or self.day_of_week.star:
            return dom and dow
        return dom or dow

    def times_of_day(self) -> list[int]:
        """Minutes after midnight at which the schedule fires on a matching day, ascending."""
        return sorted(60 * h + m for h in self.hour.values for m in self.minute.values)

    def fires(self, start: datetime.datetime, end: datetime.datetime) -> Iterator[datetime.datetime]:
        """Every firing at or after start and before end (naive datetimes, read as UTC)."""
        times = self.times_of_day()
        day = start.date()
        while day <= end.date():
            if self.matches_day(day):
                midnight = datetime.datetime.combine(day, datetime.time())
                for minutes in times:
                    fire = midnight + datetime.timedelta(minutes=minutes)
                    if start <= fire < end:
                        yield fire
            day += datetime.timedelta(days=1)

    def __str__(self) -> str:
        return " ".join(
            _format(field, bounds)
            for field, bounds in zip(
                (self.minute, self.hour, self.day_of_month, self.month, self.day_of_week), _FIELDS, strict=True
            )
        )


def _format(field: Field, bounds: _Bounds) -> str:
    full = frozenset(range(bounds.low, bounds.high + 1))
    # The star bit changes how the day fields combine, so a full day field keeps whichever form it had.
    if field.values == full and (field.star or bounds not in (DAY_OF_MONTH, DAY_OF_WEEK)):
        return "*"
    label = (lambda v: bounds.names[v - bounds.low]) if bounds is DAY_OF_WEEK else str
    runs: list[list[int]] = []
    for value in sorted(field.values):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ",".join(label(r[0]) if len(r) == 1 else f"{label(r[0])}-{label(r[-1])}" for r in runs)


# ---------------------------------------------------------------------------------------------------------------------
# Parsing


def parse(schedule: str) -> Schedule:
    """The schedule as ParseStandard reads `TZ=UTC <schedule>`; raises ScheduleError saying what is wrong."""
    spec = _go_trim(schedule)
    if spec.startswith(("TZ=", "CRON_TZ=")):
        raise ScheduleError(
            "must not name a time zone: schedules are read in UTC (Karpenter prefixes TZ=UTC itself, and a second "
            "prefix reads as a sixth field)"
        )
    if spec.startswith("@"):
        if spec.startswith("@every "):
            raise ScheduleError(
                "@every is not accepted: the NodePool CRD's schedule pattern admits only @yearly, @annually, "
                "@monthly, @weekly, @daily, @midnight and @hourly, and @every fires relative to when the controller "
                "started"
            )
        if spec not in DESCRIPTORS:
            raise ScheduleError(f"{spec!r} is not a descriptor; use one of {', '.join(DESCRIPTORS)}")
        spec = DESCRIPTORS[spec]
    fields = _go_fields(spec)
    if len(fields) != len(_FIELDS):
        raise ScheduleError(
            f"needs exactly 5 fields (minute hour day-of-month month day-of-week), found {len(fields)}"
            + (" (is a seconds field included?)" if len(fields) == 6 else "")
        )
    minute, hour, dom, month, dow = (_field(text, bounds) for text, bounds in zip(fields, _FIELDS, strict=True))
    return Schedule(minute, hour, dom, month, dow)


def _field(text: str, bounds: _Bounds) -> Field:
    values: set[int] = set()
    star = False
    for expr in (part for part in text.split(",") if part):  # strings.FieldsFunc drops empty items
        try:
            expr_values, expr_star = _range(expr, bounds)
        except ScheduleError as error:
            raise ScheduleError(f"{bounds.name} field {text!r}: {error}") from None
        values |= expr_values
        star |= expr_star
    return Field(frozenset(values), star)


def _range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        # robfig ignores whatever follows a `*-`, as it does here.
        start, end = bounds.low, bounds.high
    else:
        start = _number_or_name(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number_or_name(low_and_high[1], bounds)
        else:
            raise ScheduleError(f"too many hyphens in {expr!r}")
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], "step")
        if len(low_and_high) == 1:  # `a/step` runs from a to the field's maximum
            end = bounds.high
        if step > 1:
            star = False
    elif len(range_and_step) > 2:
        raise ScheduleError(f"too many slashes in {expr!r}")
    if start < bounds.low:
        raise ScheduleError(f"{start} is below the minimum {bounds.low}")
    if end > bounds.high:
        hint = " (Sunday is 0 or sun)" if bounds is DAY_OF_WEEK and end == 7 else ""
        raise ScheduleError(f"{end} is above the maximum {bounds.high}{hint}")
    if start > end:
        raise ScheduleError(f"the range {expr!r} starts after it ends")
    if step == 0:
        raise ScheduleError(f"the step of {expr!r} must be a positive number")
    return set(range(start, end + 1, step)), star


def _number_or_name(text: str, bounds: _Bounds) -> int:
    named = bounds.value_of(text)
    if named is not None:
        return named
    if bounds.names and not _GO_INT.fullmatch(text):
        raise ScheduleError(f"{text!r} is not a number or a three-letter name ({', '.join(bounds.names)})")
    return _number(text, "value")


def _number(text: str, what: str) -> int:
    if not _GO_INT.fullmatch(text) or int(text) > _INT64_MAX:
        raise ScheduleError(f"{what} {text!r} is not a number")
    value = int(text)
    if value < 0:
        raise ScheduleError(f"{what} {text!r} must not be negative")
    return value


# ---------------------------------------------------------------------------------------------------------------------
# Calendar facts, checked over a whole calendar cycle


@functools.cache
def _calendar() -> tuple[datetime.date, ...]:
    """Every (month, day, weekday) the Gregorian calendar has, each once, as dates: 2001-01-01 to 2029-01-01 holds
    every one, leap days included, and every pair of consecutive days (a skipped century leap year, 2100, is an
    ordinary year). A day matches a schedule or not by its month, day and weekday alone."""
    first: dict[tuple[int, int, int], datetime.date] = {}
    for day in _days():
        first.setdefault(_key(day), day)
    return tuple(first.values())


@functools.cache
def _days() -> tuple[datetime.date, ...]:
    first = datetime.date(2001, 1, 1)
    return tuple(first + datetime.timedelta(days=n) for n in range((datetime.date(2029, 1, 1) - first).days + 1))


@functools.cache
def _consecutive() -> tuple[tuple[datetime.date, datetime.date], ...]:
    """Every pair of consecutive days the calendar has, by their months, days and weekdays, each once."""
    first: dict[tuple[tuple[int, int, int], ...], tuple[datetime.date, datetime.date]] = {}
    for a, b in itertools.pairwise(_days()):
        first.setdefault((_key(a), _key(b)), (a, b))
    return tuple(first.values())


def _key(day: datetime.date) -> tuple[int, int, int]:
    return day.month, day.day, day.isoweekday()


def never_fires(schedule: Schedule) -> bool:
    """True for schedules such as `0 0 30 2 *`. Karpenter treats a budget whose schedule never fires as always active
    (Budget.IsActive: cron's Next returns the zero time, which is not after now)."""
    return not schedule.times_of_day() or not any(schedule.matches_day(day) for day in _calendar())


def _every_day(schedule: Schedule) -> bool:
    return all(schedule.matches_day(day) for day in _calendar())


def shortest_gap(schedule: Schedule) -> int | None:
    """The shortest time in minutes between two consecutive firings, when it is shorter than a day; else None."""
    times = schedule.times_of_day()
    if not times:
        return None
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    if any(schedule.matches_day(a) and schedule.matches_day(b) for a, b in _consecutive()):
        gaps.append(MINUTES_PER_DAY - times[-1] + times[0])
    shortest = min(gaps, default=None)
    return shortest if shortest is not None and shortest < MINUTES_PER_DAY else None


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _listed(times: Iterable[int]) -> str:
    shown = [_clock(t) for t in sorted(times)]
    return ", ".join(shown[:4]) + (", ..." if len(shown) > 4 else "")


@functools.lru_cache(maxsize=1024)
def shift(schedule: Schedule, minutes: int) -> Schedule:
    """A schedule that fires exactly `minutes` (less than a day either way) after every firing of `schedule`; before
    it when `minutes` is negative. A warmup shifts a start earlier; a class's UTC offset shifts its local start to UTC.

    Raises ScheduleError, saying why, when no single five-field schedule does: the shifted times of day are not every
    combination of some minutes and some hours (e.g. 10 and 50 past, 20 minutes earlier), or the shift moves only
    some firings to another day, or it moves firings to a day that cron cannot name (the day before the 1st is the
    last day of the previous month, and so is the day after it). Cached: the calendar check reads 28 years.
    """
    if not -MINUTES_PER_DAY < minutes < MINUTES_PER_DAY:
        raise ValueError(f"can only shift by less than a day, not {minutes} minutes")
    if minutes == 0:
        return schedule
    times = schedule.times_of_day()
    moved = {(t + minutes) % MINUTES_PER_DAY for t in times}
    hours = frozenset(t // 60 for t in moved)
    minutes_past = frozenset(t % 60 for t in moved)
    if len(moved) != len(hours) * len(minutes_past):
        raise ScheduleError(
            f"its starts at {_listed(times)} become {_listed(moved)}, which are not every combination of a set of "
            "minutes and a set of hours, so no one cron schedule fires at them; split it into one class per start time"
        )
    shifted_times = Schedule(
        Field(minutes_past), Field(hours), schedule.day_of_month, schedule.month, schedule.day_of_week
    )
    days = {(t + minutes) // MINUTES_PER_DAY for t in times}  # -1: the day before, 0: the same day, 1: the day after
    if days == {0} or _every_day(schedule):
        return shifted_times
    if len(days) > 1:
        other = "after" if 1 in days else "before"
        raise ScheduleError(
            f"shifting it by {_signed(minutes)} moves its starts at "
            f"{_listed(t for t in times if (t + minutes) // MINUTES_PER_DAY != 0)} to the day {other} but not those "
            f"at {_listed(t for t in times if (t + minutes) // MINUTES_PER_DAY == 0)}, which one cron schedule cannot "
            "do on restricted days; split it into one class per start time"
        )
    return _other_day(shifted_times, days.pop(), minutes)


def _signed(minutes: int) -> str:
    return f"{format_duration(abs(minutes))} {'later' if minutes > 0 else 'earlier'}"


def _other_day(schedule: Schedule, days: int, minutes: int) -> Schedule:
    """The schedule's days moved a day later (`days` 1) or earlier (-1), where cron can name the days so moved."""
    dom, dow = schedule.day_of_month, schedule.day_of_week
    other = "before" if days < 0 else "after"
    if dom.values != frozenset(range(1, 32)):
        if days < 0 and 1 in dom.values:
            raise ScheduleError(
                f"it starts on the 1st of a month, and shifting it by {_signed(minutes)} moves that to the last day "
                "of the month before, which cron cannot name (it is the 28th to the 31st)"
            )
        moved = frozenset(d + days for d in dom.values)
        if days > 0 and not moved <= frozenset(range(1, 32)):
            raise ScheduleError(
                f"it starts on the 31st, and shifting it by {_signed(minutes)} moves that to the 1st of the next "
                "month, which cron cannot name as the day after the 31st"
            )
        dom = Field(moved, dom.star)
    if dow.values != frozenset(range(7)):
        dow = Field(frozenset((d + days) % 7 for d in dow.values), dow.star)
    shifted = Schedule(schedule.minute, schedule.hour, dom, schedule.month, dow)
    for day, next_day in _consecutive():
        class_day, shifted_day = (next_day, day) if days < 0 else (day, next_day)
        if shifted.matches_day(shifted_day) != schedule.matches_day(class_day):
            why = (
                f"the class starts on {class_day:%a %d %b} but {shifted_day:%a %d %b} cannot be named"
                if schedule.matches_day(class_day)
                else f"the shifted schedule would also fire on {shifted_day:%a %d %b}, but no class starts on "
                f"{class_day:%a %d %b}"
            )
            raise ScheduleError(
                f"shifting it by {_signed(minutes)} moves it to the day {other}, and no cron schedule names just "
                f"those days: {why}"
            )
    return shifted


# How the Kubernetes CronJob controller finds a schedule's next time in a time zone: robfig/cron v3.0.1's
# (*SpecSchedule).Next (spec.go:58-175; k8s.io/kubernetes v1.34.12 go.mod pins github.com/robfig/cron/v3 v3.0.1, and
# the controller computes every schedule time through Next, pkg/controller/cronjob/utils.go), on Go's time.Date.
# Followed step for step, because it misses whole days that exist: when a day's local midnight falls in a
# daylight-saving gap, time.Date puts the skipped midnight after the gap in a zone east of UTC (01:00), Next's day loop
# then takes the hour back ("Add an hour if it's 23, subtract an hour if it's 1", spec.go:112-136), lands at 23:00 the
# day before, steps a day to 23:00 of the gap day and an hour to the next midnight: a schedule that does not also fire
# the day before never fires that day, at any time of it. Run against robfig/cron v3.0.1 itself with the pinned
# tzdata (2026f): `TZ=Africa/Cairo 0 9 * * 5` fires 2026-04-17 and then 2026-05-01, missing Friday 2026-04-24 (midnight
# skipped); `TZ=Asia/Beirut 0 9 * * 0` misses Sunday 2026-03-29; America/Havana, America/Santiago and Atlantic/Azores,
# west of UTC, are not affected (time.Date puts their skipped midnight at 23:00, which the loop moves forward); a daily
# schedule is not affected (it reaches the day through the hour loop). A time inside a gap never fires either (the
# hour loop adds real hours, which never show it): zones.instant refuses those times already.
def _go_date(zone_name: str, year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    """Go's time.Date in the zone, as Unix seconds: fields out of range roll over; a wall time in a gap or a repeat
    takes the offset Go's lookup finds (go/src/time/time.go Date: the offset at the time read as UTC, unless that
    offset's period does not hold the result, then the offset at the result)."""
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    wall = datetime.datetime(year, month, 1) + datetime.timedelta(
        days=day - 1, hours=hour, minutes=minute, seconds=second
    )
    unix = int((wall - datetime.datetime(1970, 1, 1)).total_seconds())
    return unix - _offset(zone_name, unix - _offset(zone_name, unix))


def _offset(zone_name: str, unix: int) -> int:
    from domain.time import zones  # zones reads durations, as this module does; imported here to keep the floors flat

    offset = datetime.datetime.fromtimestamp(unix, zones.zone(zone_name)).utcoffset()
    assert offset is not None
    return int(offset.total_seconds())


def _local(zone_name: str, unix: int) -> datetime.datetime:
    from domain.time import zones

    return datetime.datetime.fromtimestamp(unix, zones.zone(zone_name))


def _day_matches(schedule: Schedule, day: datetime.datetime) -> bool:
    # robfig's dayMatches: the day fields only (the month loop has matched the month).
    dom = day.day in schedule.day_of_month.values
    dow = day.isoweekday() % 7 in schedule.day_of_week.values
    return dom and dow if schedule.day_of_month.star or schedule.day_of_week.star else dom or dow


def robfig_next(schedule: Schedule, zone_name: str, after: int) -> int | None:
    """The first time after `after` (Unix seconds) at which the CronJob controller runs `schedule` with
    spec.timeZone `zone_name`, as robfig/cron v3.0.1's Next finds it (its seconds field is 0, as ParseStandard's);
    None when it finds none within five years."""
    local = functools.partial(_local, zone_name)
    t = after + 1
    added = False
    year_limit = local(t).year + 5
    while local(t).year <= year_limit:  # WRAP
        now = local(t)
        wrapped = False
        while now.month not in schedule.month.values:
            if not added:
                added = True
                t = _go_date(zone_name, now.year, now.month, 1, 0, 0, 0)
            now = local(t)
            t = _go_date(zone_name, now.year, now.month + 1, now.day, now.hour, now.minute, now.second)
            now = local(t)
            if now.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(schedule, now):
            if not added:
                added = True
                t = _go_date(zone_name, now.year, now.month, now.day, 0, 0, 0)
            now = local(t)
            t = _go_date(zone_name, now.year, now.month, now.day + 1, now.hour, now.minute, now.second)
            now = local(t)
            if now.hour:  # the DST fix of spec.go:123-130
                t += (24 - now.hour) * 3600 if now.hour > 12 else -now.hour * 3600
                now = local(t)
            if now.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while now.hour not in schedule.hour.values:
            if not added:
                added = True
                t = _go_date(zone_name, now.year, now.month, now.day, now.hour, 0, 0)
            t += 3600
            now = local(t)
            if now.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while now.minute not in schedule.minute.values:
            if not added:
                added = True
                t -= t % 60
            t += 60
            now = local(t)
            if now.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while now.second != 0:
            if not added:
                added = True
            t += 1
            now = local(t)
            if now.second == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return t
    return None
