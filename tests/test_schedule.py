"""Go cron (robfig/cron v3.0.1 ParseStandard, as Karpenter and the CronJob controller read it), and shifting it."""

import datetime

import pytest

from domain.time.cron import ScheduleError, never_fires, parse, shift, shortest_gap

MONDAY = datetime.datetime(2026, 1, 5)  # a Monday, so that weekdays in the tests below are easy to read


def firings(text: str, days: int = 14, start: datetime.datetime = MONDAY) -> list[datetime.datetime]:
    return list(parse(text).fires(start, start + datetime.timedelta(days=days)))


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("0 9 * * mon-fri", "0 9 * * mon-fri"),
        ("0 9 * * MON-Fri", "0 9 * * mon-fri"),  # names in any case
        ("0 9 * JAN,jun 1", "0 9 * 1,6 mon"),
        ("0 9 ? * 0", "0 9 * * sun"),  # ? is * in every field
        ("*/15 * * * *", "0,15,30,45 * * * *"),
        ("5/20 * * * *", "5,25,45 * * * *"),  # a/step runs to the field's maximum
        ("0-10/5 * * * *", "0,5,10 * * * *"),
        ("0 0,,12 * * *", "0 0,12 * * *"),  # empty list items are dropped, as strings.FieldsFunc does
        ("+5 1 * * *", "5 1 * * *"),  # strconv.Atoi takes a sign
        ("007 1 * * *", "7 1 * * *"),
        ("*-5 * * * *", "* * * * *"),  # robfig ignores what follows `*-`
        ("0 0 1-31 * mon", "0 0 1-31 * mon"),  # a full range is not a star: the day fields stay OR-ed
        ("0 0 */1 * mon", "0 0 * * mon"),  # */1 keeps the star bit
        ("  0 9 * * *\t", "0 9 * * *"),  # Karpenter's TZ=UTC prefix is followed by strings.TrimSpace
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * sun"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_schedules_robfig_accepts_parse_to_the_same_firings(spec, canonical):
    assert str(parse(spec)) == canonical
    assert firings(spec) == firings(canonical)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0 13 * * monday-friday", r"day-of-week field 'monday-friday': 'monday' is not a number or a three-letter"),
        ("0 9 * * 7", r"day-of-week field '7': 7 is above the maximum 6 \(Sunday is 0 or sun\)"),
        ("60 9 * * *", r"minute field '60': 60 is above the maximum 59"),
        ("0 24 * * *", r"hour field '24': 24 is above the maximum 23"),
        ("0 9 0 * *", r"day-of-month field '0': 0 is below the minimum 1"),
        ("0 9 * 13 *", r"month field '13': 13 is above the maximum 12"),
        ("0 9 * january *", r"month field 'january': 'january' is not a number or a three-letter name"),
        ("0 9 * * mon-sun", r"the range 'mon-sun' starts after it ends"),
        ("0 9 1-2-3 * *", r"too many hyphens in '1-2-3'"),
        ("*/5/2 9 * * *", r"too many slashes"),
        ("*/0 9 * * *", r"the step of '\*/0' must be a positive number"),
        ("*/-1 9 * * *", r"step '-1' must not be negative"),
        ("0 9 L * *", r"day-of-month field 'L': value 'L' is not a number"),
        ("0 9 * *", r"needs exactly 5 fields .* found 4"),
        ("0 0 9 * * *", r"found 6 \(is a seconds field included\?\)"),
        ("TZ=Europe/Berlin 0 9 * * *", r"must not name a time zone"),
        ("CRON_TZ=UTC 0 9 * * *", r"must not name a time zone"),
        ("@every 1h", r"@every is not accepted: the NodePool CRD's schedule pattern"),
        ("@Daily", r"'@Daily' is not a descriptor"),  # descriptors are matched exactly
        ("@daily 9", r"'@daily 9' is not a descriptor"),
        ("", r"needs exactly 5 fields"),
    ],
)
def test_schedules_robfig_refuses_are_refused_naming_the_field(spec, message):
    with pytest.raises(ScheduleError, match=message):
        parse(spec)


def test_both_restricted_day_fields_match_either_day():
    # robfig's dayMatches: without a star, day-of-month OR day-of-week.
    assert {f.date().isoformat() for f in firings("0 9 6 * mon")} == {"2026-01-05", "2026-01-06", "2026-01-12"}


def test_a_star_day_field_makes_both_day_fields_required():
    assert [f.date().isoformat() for f in firings("0 9 * * mon")] == ["2026-01-05", "2026-01-12"]
    assert [f.date().isoformat() for f in firings("0 9 */1 * mon")] == ["2026-01-05", "2026-01-12"]
    assert len(firings("0 9 1-31 * mon")) == 14  # a full range without a star: every day matches


def test_a_schedule_that_no_calendar_day_matches_never_fires():
    assert never_fires(parse("0 0 30 2 *"))
    assert never_fires(parse("0 0 31 4,6,9,11 *"))
    assert never_fires(parse(", 0 * * *"))
    assert not never_fires(parse("0 0 29 2 *"))  # leap days happen
    assert not never_fires(parse("0 0 30 2 mon"))  # OR-ed with Mondays


def shifted_firings(text: str, minutes: int, start: datetime.datetime, days: int) -> tuple[list, list]:
    """(each firing of text plus minutes, firings of the shifted schedule) over the same span."""
    delta = datetime.timedelta(minutes=minutes)
    end = start + datetime.timedelta(days=days)
    expected = [f + delta for f in parse(text).fires(start - delta, end - delta)]
    return expected, list(shift(parse(text), minutes).fires(start, end))


@pytest.mark.parametrize(
    ("spec", "minutes", "shifted"),
    [
        ("10 0 * * mon", -20, "50 23 * * sun"),  # across the hour, the day and the week
        ("0 9 * * mon-fri", -20, "40 8 * * mon-fri"),
        ("0 0 * * sun", -60, "0 23 * * sat"),
        ("0 0 * * *", -90, "30 22 * * *"),
        ("0 */2 * * *", -20, "40 1,3,5,7,9,11,13,15,17,19,21,23 * * *"),  # steps that do shift exactly
        ("*/15 * * * *", -15, "0,15,30,45 * * * *"),
        ("10 0,9 * * *", -20, "50 8,23 * * *"),  # every day matches, so crossing midnight is harmless
        ("10 0 15 * *", -20, "50 23 14 * *"),
        ("5 0 2 jan,feb *", -10, "55 23 1 1-2 *"),
        ("0 0 1-31 * mon", -30, "30 23 1-31 * mon"),  # every day, and the OR-ed day fields are kept
        ("0 20 * * tue", 300, "0 1 * * wed"),  # 20:00 in New York in winter is 01:00 UTC the next day
        ("30 22 * * sat", 90, "0 0 * * sun"),  # later across the week
        ("0 21 1-27 * *", 240, "0 1 2-28 * *"),
        ("0 9 * * tue", 0, "0 9 * * tue"),
    ],
)
def test_a_shifted_schedule_fires_exactly_that_far_from_starts(spec, minutes, shifted):
    assert str(shift(parse(spec), minutes)) == shifted
    # Over eight years (two leap days, every weekday on every date), firing for firing.
    expected, actual = shifted_firings(spec, minutes, datetime.datetime(2025, 1, 1), 8 * 366)
    assert expected == actual and expected


@pytest.mark.parametrize(
    ("spec", "minutes", "message"),
    [
        ("10,50 9 * * *", -20, r"starts at 09:10, 09:50 become 08:50, 09:30, which are not every combination"),
        ("10 0,9 * * mon", -20, r"20m earlier moves its starts at 00:10 to the day before but not those at 09:10"),
        ("0 0 1 * *", -20, r"starts on the 1st of a month, .* the last day of the month before, which cron cannot"),
        ("10 0 31 * *", -20, r"the shifted schedule would also fire on .* 30 Apr, but no class starts on .* 01 May"),
        ("0 0 * 1 mon", -30, r"the class starts on Mon 01 Jan but Sun 31 Dec cannot be named"),  # month changes
        ("0 0 29 2 *", -10, r"would also fire on .* 28 Feb, but no class starts on .* 01 Mar"),
        ("0 20 31 * *", 300, r"starts on the 31st, .* to the 1st of the next month"),
        ("0 20 30 * *", 300, r"the class starts on .* 30 Apr but .* 01 May cannot be named"),
        ("0 20,23 * * mon", 120, r"2h later moves its starts at 23:00 to the day after but not those at 20:00"),
    ],
)
def test_an_unshiftable_schedule_is_refused_saying_why(spec, minutes, message):
    with pytest.raises(ScheduleError, match=message):
        shift(parse(spec), minutes)


def test_shortest_gap_is_the_closest_starts_across_midnight_too():
    assert shortest_gap(parse("0,30 9 * * *")) == 30
    assert shortest_gap(parse("0 1,23 * * *")) == 120  # 23:00 to 01:00 the next day
    assert shortest_gap(parse("0 1,23 * * mon")) == 22 * 60  # Mondays only: no next-day pair
    assert shortest_gap(parse("0 9 * * *")) is None  # a day apart


# robfig/cron v3.0.1's Next with `TZ=<zone> <schedule>` as the CronJob controller parses it, run here (Go 1.26.8, the
# module from the Go module cache, ZONEINFO pointed at the pinned tzdata 2026f; a throwaway program, not committed)
# from the moment given: its next four times on the zone's clock. domain/time/cron.py robfig_next must find the same.
ROBFIG_V3_0_1 = [
    ("Africa/Cairo", "0 9 * * 5", "2026-04-18T12:00Z", ["05-01 09:00", "05-08 09:00", "05-15 09:00", "05-22 09:00"]),
    ("Africa/Cairo", "0 9 * * 5", "2026-04-23T12:00Z", ["05-01 09:00", "05-08 09:00", "05-15 09:00", "05-22 09:00"]),
    ("Africa/Cairo", "0 9 * * *", "2026-04-22T12:00Z", ["04-23 09:00", "04-24 09:00", "04-25 09:00", "04-26 09:00"]),
    ("Africa/Cairo", "0 1 * * 5", "2026-04-18T12:00Z", ["05-01 01:00", "05-08 01:00", "05-15 01:00", "05-22 01:00"]),
    ("Africa/Cairo", "0 9 * * 4,5", "2026-04-18T12:00Z", ["04-23 09:00", "04-24 09:00", "04-30 09:00", "05-01 09:00"]),
    ("Africa/Cairo", "40 23 * * 4", "2026-04-18T12:00Z", ["04-23 23:40", "04-30 23:40", "05-07 23:40", "05-14 23:40"]),
    ("Africa/Cairo", "0 0 * * *", "2026-04-22T12:00Z", ["04-23 00:00", "04-25 00:00", "04-26 00:00", "04-27 00:00"]),
    ("Asia/Beirut", "0 9 * * 0", "2026-03-22T12:00Z", ["04-05 09:00", "04-12 09:00", "04-19 09:00", "04-26 09:00"]),
    ("Asia/Beirut", "0 9 * * 6", "2026-03-22T12:00Z", ["03-28 09:00", "03-29 09:00", "04-04 09:00", "04-11 09:00"]),
    ("Asia/Beirut", "30 0 * * *", "2026-03-27T12:00Z", ["03-28 00:30", "03-30 00:30", "03-31 00:30", "04-01 00:30"]),
    ("America/Havana", "0 9 * * 0", "2026-03-01T12:00Z", ["03-01 09:00", "03-08 09:00", "03-15 09:00", "03-22 09:00"]),
    ("America/Havana", "0 0 * * *", "2026-10-30T12:00Z", ["10-31 00:00", "11-01 00:00", "11-02 00:00", "11-03 00:00"]),
    (
        "America/Santiago",
        "0 9 * * 0",
        "2026-08-30T12:00Z",
        ["08-30 09:00", "09-06 09:00", "09-13 09:00", "09-20 09:00"],
    ),
    ("Atlantic/Azores", "0 9 * * 0", "2026-03-22T12:00Z", ["03-29 09:00", "04-05 09:00", "04-12 09:00", "04-19 09:00"]),
    ("Europe/Berlin", "0 9 * * 0", "2026-03-22T12:00Z", ["03-29 09:00", "04-05 09:00", "04-12 09:00", "04-19 09:00"]),
    ("Europe/Berlin", "30 2 * * *", "2026-03-27T12:00Z", ["03-28 02:30", "03-30 02:30", "03-31 02:30", "04-01 02:30"]),
    (
        "America/Sao_Paulo",
        "0 9 * * 0",
        "2026-03-22T12:00Z",
        ["03-29 09:00", "04-05 09:00", "04-12 09:00", "04-19 09:00"],
    ),
]


@pytest.mark.parametrize(("zone", "schedule", "after", "expected"), ROBFIG_V3_0_1)
def test_robfig_next_finds_what_robfig_cron_v3_0_1_does(zone, schedule, after, expected):
    from domain.time import zones
    from domain.time.cron import robfig_next

    moment = int(datetime.datetime.fromisoformat(after).timestamp())
    found = []
    for _ in expected:
        moment = robfig_next(parse(schedule), zone, moment)
        found.append(f"{datetime.datetime.fromtimestamp(moment, zones.zone(zone)):%m-%d %H:%M}")
    assert found == expected
