"""A class's calendar in its own time zone: its occurrences over a term, its budget windows in UTC, and the tz
database it is read with (domain/time/class_calendar.py, domain/time/budget_windows.py, domain/time/zones.py), without
mocks."""

import datetime
import re
from pathlib import Path

import pytest
import tzdata

from domain.problems import FieldProblem
from domain.time import budget_windows, class_calendar, cron, durations, zones

ROOT = Path(__file__).resolve().parent.parent
UTC = datetime.UTC
TUESDAY_IN_BERLIN = cron.parse("0 9 * * tue")
SPRING_TERM = (datetime.date(2027, 1, 11), datetime.date(2027, 4, 30), (datetime.date(2027, 4, 6),))


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_berlin_class_starts_0800_utc_then_0700_skips_holiday():
    starts = [o.start for o in class_calendar.occurrences(TUESDAY_IN_BERLIN, "Europe/Berlin", 20, 120, *SPRING_TERM)]
    # Tuesdays from 12 January to 27 April 2027, less 6 April: 15 classes; clocks go forward on Sunday 28 March.
    assert len(starts) == 15
    assert starts[:2] == [at("2027-01-12T08:00"), at("2027-01-19T08:00")]
    assert [s for s in starts if s.month == 3][-2:] == [at("2027-03-23T08:00"), at("2027-03-30T07:00")]
    assert at("2027-04-06T07:00") not in starts and starts[-1] == at("2027-04-27T07:00")


def test_warmup_start_and_end_keep_elapsed_gaps_across_a_change():
    (before, after) = [
        o
        for o in class_calendar.occurrences(TUESDAY_IN_BERLIN, "Europe/Berlin", 20, 120, *SPRING_TERM)
        if o.start.date() in (datetime.date(2027, 3, 23), datetime.date(2027, 3, 30))
    ]
    assert (before.warm, before.start, before.end) == (
        at("2027-03-23T07:40"),
        at("2027-03-23T08:00"),
        at("2027-03-23T10:00"),
    )
    assert (after.warm, after.start, after.end) == (
        at("2027-03-30T06:40"),
        at("2027-03-30T07:00"),
        at("2027-03-30T09:00"),
    )
    assert (before.offset, after.offset) == (datetime.timedelta(hours=1), datetime.timedelta(hours=2))
    assert after.local(after.start).strftime("%H:%M %Z") == "09:00 CEST"


def test_a_class_over_a_change_lasts_its_elapsed_duration():
    # 01:00 to 04:00 on the wall clock of 28 March 2027 is two hours; a 3h class ends at 05:00 CEST.
    (night,) = class_calendar.occurrences(
        cron.parse("0 1 28 3 *"), "Europe/Berlin", 20, 180, datetime.date(2027, 3, 28), datetime.date(2027, 3, 28)
    )
    assert (night.start, night.end) == (at("2027-03-28T00:00"), at("2027-03-28T03:00"))
    assert night.local(night.end).strftime("%H:%M") == "05:00"


@pytest.mark.parametrize(
    ("zone", "spec", "day", "utc"),
    [
        ("America/New_York", "0 20 * * mon", "2027-03-08", "2027-03-09T01:00"),  # EST: the next day in UTC
        ("America/New_York", "0 20 * * mon", "2027-03-15", "2027-03-16T00:00"),  # EDT, the day after 14 March
        ("Australia/Sydney", "0 9 * * mon", "2027-03-29", "2027-03-28T22:00"),  # AEDT: Sunday in UTC
        ("Australia/Sydney", "0 9 * * mon", "2027-04-05", "2027-04-04T23:00"),  # AEST from 4 April
        ("Asia/Kolkata", "30 1 * * *", "2027-07-01", "2027-06-30T20:00"),  # UTC+05:30 all year
        ("Australia/Lord_Howe", "0 10 * * sat", "2027-03-27", "2027-03-26T23:00"),  # UTC+11 in summer
        ("Australia/Lord_Howe", "0 10 * * sat", "2027-04-10", "2027-04-09T23:30"),  # UTC+10:30: a half-hour change
    ],
)
def test_each_zone_puts_the_local_start_at_its_own_utc_time(zone, spec, day, utc):
    date = datetime.date.fromisoformat(day)
    (occurrence,) = class_calendar.occurrences(cron.parse(spec), zone, 20, 60, date, date)
    assert occurrence.start == at(utc)


@pytest.mark.parametrize(
    ("spec", "day", "warmup", "key", "message"),
    [
        (
            "30 2 * * sun",
            "2027-03-28",
            20,
            "schedule",
            "its start, 02:30 on Sun 2027-03-28 does not exist in Europe/Berlin: its clocks go forward 1h then "
            "(UTC+01:00 to UTC+02:00)",
        ),
        (
            "30 2 * * sun",
            "2027-10-31",
            20,
            "schedule",
            "its start, 02:30 on Sun 2027-10-31 happens twice in Europe/Berlin: its clocks go back 1h then "
            "(UTC+02:00 to UTC+01:00)",
        ),
        (
            "10 3 * * sun",
            "2027-03-28",
            20,
            "warmup",
            "its warm-up would begin at 02:50 on Sun 2027-03-28 does not exist in Europe/Berlin",
        ),
        (
            "10 3 * * sun",
            "2027-03-28",
            90,
            "warmup",
            "the clocks of Europe/Berlin change between 01:40 and the start at 03:10 on Sun 2027-03-28",
        ),
    ],
)
def test_a_start_or_warmup_a_change_skips_or_repeats_is_refused(spec, day, warmup, key, message):
    date = datetime.date.fromisoformat(day)
    with pytest.raises(FieldProblem, match=re.escape(message)) as caught:
        list(class_calendar.occurrences(cron.parse(spec), "Europe/Berlin", warmup, 60, date, date))
    assert caught.value.key == key


def test_a_terms_budget_windows_keep_each_offset_to_its_months():
    planned = class_calendar.planned(TUESDAY_IN_BERLIN, "Europe/Berlin", 20, 120, SPRING_TERM)
    windows = budget_windows.windows(TUESDAY_IN_BERLIN, 20, 120, planned, None, True)
    assert [(w.reasons, str(w.schedule), w.minutes) for w in windows] == [
        (("Drifted", "Underutilized"), "40 7 * 1-3 tue", 140),  # UTC+01:00, January to March
        (("Empty",), "40 7 * 1-3 tue", 35),
        (("Drifted", "Underutilized"), "40 6 * 3-4 tue", 140),  # UTC+02:00, from 30 March
        (("Empty",), "40 6 * 3-4 tue", 35),
    ]


def test_a_utc_class_keeps_its_two_windows_as_written():
    start = cron.parse("30 13 1-28 * *")
    windows = budget_windows.windows(start, 20, 60, None, datetime.timedelta(0), False)
    assert [(str(w.schedule), w.minutes) for w in windows] == [("10 13 1-28 * *", 80), ("10 13 1-28 * *", 35)]


def test_a_window_utc_cannot_name_is_refused_at_the_schedule():
    first_of_month = cron.parse("0 9 1 * *")  # Sydney's 09:00 on the 1st is the last day of the month before
    planned = class_calendar.planned(first_of_month, "Australia/Sydney", 20, 60, None)
    with pytest.raises(FieldProblem, match=r"its budget windows at UTC\+11:00 cannot be one cron schedule in UTC"):
        budget_windows.windows(first_of_month, 20, 60, planned, None, False)


def test_a_class_without_a_term_needs_the_days_asked_about():
    from tests.test_class_seats import with_classes
    from tests.test_config import parsed

    lab = parsed(with_classes({"schedule": "0 9 * * tue", "duration": "1h"})).settings.labs["intro"]
    with pytest.raises(ValueError, match="a class without a term repeats all year: give the first and last day"):
        lab.classes[0].occurrences()
    week = lab.classes[0].occurrences(datetime.date(2027, 1, 1), datetime.date(2027, 1, 7))
    assert [o.start for o in week] == [at("2027-01-05T09:00")]


def test_time_zones_come_from_the_pinned_tzdata_package_only():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line)
    assert pins["tzdata"] == tzdata.__version__
    assert zones.VERSION == tzdata.IANA_VERSION
    berlin = zones.zone("Europe/Berlin")
    assert berlin.key == "Europe/Berlin" and berlin.utcoffset(datetime.datetime(2027, 7, 1)) == datetime.timedelta(
        hours=2
    )


@pytest.mark.parametrize(
    ("zone", "offset"),
    [
        ("Etc/UTC", datetime.timedelta(0)),
        ("Asia/Kolkata", datetime.timedelta(hours=5, minutes=30)),
        ("America/Sao_Paulo", datetime.timedelta(hours=-3)),  # no daylight saving since 2019
        ("Europe/Berlin", None),
        ("Australia/Lord_Howe", None),
        ("Africa/Casablanca", None),  # changes in 2026, as the file lists
    ],
)
def test_a_zone_has_one_offset_iff_its_clock_never_changes(zone, offset):
    assert class_calendar.fixed_offset(zone) == offset
    first, last = class_calendar.horizon()
    sampled = {
        datetime.datetime(year, month, day, tzinfo=UTC).astimezone(zones.zone(zone)).utcoffset()
        for year in range(first.year, last.year + 1)
        for month in range(1, 13)
        for day in (1, 8, 15, 22)
    }
    assert (len(sampled) == 1) == (offset is not None)


def test_the_example_of_classes_md_holds_what_the_page_says():
    planned = class_calendar.planned(TUESDAY_IN_BERLIN, "Europe/Berlin", 20, 120, SPRING_TERM)
    assert planned is not None
    needed = sum((o.end - o.warm for o in planned), datetime.timedelta())
    held = set()
    for window in budget_windows.windows(TUESDAY_IN_BERLIN, 20, 120, planned, None, True):
        if window.reasons == budget_windows.MOVES_LEARNERS:  # Karpenter's reading: [firing, firing + duration)
            for fire in window.schedule.fires(datetime.datetime(2027, 1, 1), datetime.datetime(2028, 1, 1)):
                held |= {fire + datetime.timedelta(minutes=m) for m in range(window.minutes)}
    page = " ".join((ROOT / "docs" / "classes.md").read_text().split())
    figures = f"the {len(planned)} classes need {durations.format_duration(int(needed.total_seconds()) // 60)} of "
    assert figures in page and f"the windows hold {durations.format_duration(len(held))} in 2027" in page


def test_etc_gmt_minus_1_is_utc_plus_1_as_the_hint_says():
    # The hint for an offset (domain/time/zones.py) names Etc/GMT-1 for UTC+01:00: POSIX's sign, west of Greenwich.
    moment = datetime.datetime(2027, 1, 11, 12, tzinfo=zones.zone("Etc/GMT-1"))
    assert (moment.utcoffset(), moment.tzname()) == (datetime.timedelta(hours=1), "+01")


MONDAY_AND_THURSDAY = cron.parse("0 9 * * mon,thu")
# Fourteen weeks in New York, Monday 4 January to Thursday 8 April 2027: its clocks go forward on Sunday 14 March.
FOURTEEN_WEEKS = (datetime.date(2027, 1, 4), datetime.date(2027, 4, 8))


def term(*skip: datetime.date, ends: bool = True) -> class_calendar.ClassTerm:
    occurrences = class_calendar.occurrences(MONDAY_AND_THURSDAY, "America/New_York", 20, 90, *FOURTEEN_WEEKS, skip)
    return class_calendar.ClassTerm("lab classes[0]", tuple(occurrences), ends)


def test_a_term_plays_its_first_and_last_day_each_weekday_and_the_day_after_its_clocks_change():
    days = class_calendar.distinct_days([term()])
    assert list(days) == [
        datetime.date(2027, 1, 4),
        datetime.date(2027, 1, 7),
        datetime.date(2027, 3, 15),
        datetime.date(2027, 4, 8),
    ]
    assert days[datetime.date(2027, 1, 4)] == ("lab classes[0]: its first day", "lab classes[0]: its first Monday")
    assert days[datetime.date(2027, 1, 7)] == ("lab classes[0]: its first Thursday",)
    assert days[datetime.date(2027, 3, 15)] == (
        "lab classes[0]: its first class after the clocks of America/New_York change from UTC-05:00 to UTC-04:00",
    )
    assert days[datetime.date(2027, 4, 8)] == ("lab classes[0]: the last day of its term",)


def test_all_days_are_every_class_day_of_the_term():
    days = class_calendar.all_days([term()])
    assert len(days) == 28 and list(days)[:3] == [datetime.date(2027, 1, d) for d in (4, 7, 11)]
    assert set(class_calendar.distinct_days([term()])) < set(days)


def test_the_day_after_a_change_is_the_first_class_the_calendar_has_after_it():
    # The Monday after the change is skipped: the Thursday is the first class at the new offset.
    days = class_calendar.distinct_days([term(datetime.date(2027, 3, 15))])
    assert datetime.date(2027, 3, 15) not in days and datetime.date(2027, 3, 18) in days


def test_a_class_without_a_term_has_no_last_day_and_a_zone_without_changes_no_change_day():
    assert list(class_calendar.distinct_days([term(ends=False)])) == [
        datetime.date(2027, 1, 4),
        datetime.date(2027, 1, 7),
        datetime.date(2027, 3, 15),
    ]
    utc = class_calendar.occurrences(MONDAY_AND_THURSDAY, zones.UTC, 20, 90, *FOURTEEN_WEEKS)
    assert list(class_calendar.distinct_days([class_calendar.ClassTerm("utc", tuple(utc), True)])) == [
        datetime.date(2027, 1, 4),
        datetime.date(2027, 1, 7),
        datetime.date(2027, 4, 8),
    ]
