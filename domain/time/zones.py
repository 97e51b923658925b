"""The IANA time zone database that gpulab reads a class's local times in: the PyPI `tzdata` package pinned in
requirements.txt, loaded from the package itself and never from the machine's /usr/share/zoneinfo, whose release
differs from one machine to the next (Python's zoneinfo would prefer it). The year-long proof (tests/test_class_year.py)
points Go at the same files and compares them with Go's own copy; docs/classes.md says which copy the cluster reads.
"""

import datetime
import difflib
import functools
import io
import re
import struct
from importlib import resources
from zoneinfo import ZoneInfo

import tzdata  # type: ignore[import-untyped]  # the package ships no type information

from domain.time import durations

# The tz database release of the pinned package (e.g. 2026f).
VERSION = tzdata.IANA_VERSION
# The zone of a class that names none, and of a stack without gpulab:timeZone: the tz database's own name for UTC
# (`UTC` is a link to it in its `backward` file), which the CronJobs of classes always named.
UTC = "Etc/UTC"


class LocalTimeError(ValueError):
    """A wall-clock time that a daylight-saving change skips or repeats on that day; the message says which."""


@functools.cache
def names() -> frozenset[str]:
    """Every zone the pinned release has (its `zones` file), links such as US/Eastern included."""
    return frozenset(resources.files(tzdata).joinpath("zones").read_text().split())


def time_zone(value: str) -> str:
    """A zone name the tz database has, as a CronJob's spec.timeZone takes it."""
    if value not in names():
        raise ValueError(
            f"{value!r} is not a time zone of the IANA tz database ({VERSION}); {_hint(value)}names look like "
            "Europe/Berlin, America/New_York or Etc/UTC"
        )
    return value


# Zones suggested first where several fit, in this order: those of the examples and of large populations. Each is
# suggested only where the pinned tz database gives it the abbreviation or offset asked about.
_FIRST = (
    "Europe/Berlin",
    "Europe/Paris",
    "Europe/London",
    "Europe/Dublin",
    "Europe/Lisbon",
    "Europe/Helsinki",
    "Europe/Moscow",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Phoenix",
    "America/Los_Angeles",
    "America/Anchorage",
    "America/Halifax",
    "America/Sao_Paulo",
    "Pacific/Honolulu",
    "Africa/Lagos",
    "Africa/Johannesburg",
    "Africa/Cairo",
    "Africa/Nairobi",
    "Asia/Dubai",
    "Asia/Karachi",
    "Asia/Kolkata",
    "Asia/Jerusalem",
    "Asia/Shanghai",
    "Asia/Singapore",
    "Asia/Tokyo",
    "Asia/Seoul",
    "Australia/Perth",
    "Australia/Adelaide",
    "Australia/Sydney",
    "Pacific/Auckland",
)
_OFFSET = re.compile(r"(?:UTC|GMT|Z)?\s*([+-])\s*([0-9]{1,2})(?::?([0-9]{2}))?", re.IGNORECASE)


@functools.cache
def _country_zones() -> tuple[str, ...]:
    """The zones of the pinned release's zone.tab (one or more per country, no links), _FIRST's first."""
    rows = resources.files(tzdata).joinpath("zoneinfo", "zone.tab").read_text().splitlines()
    listed = {row.split("\t")[2] for row in rows if row and not row.startswith("#")}
    return (*(z for z in _FIRST if z in listed), *sorted(listed - set(_FIRST)))


def _in_year(name: str) -> list[datetime.datetime]:
    # A winter and a summer day of the release's year, north and south, read on the zone's clock.
    year = int(VERSION[:4])
    return [datetime.datetime(year, month, 15, 12, tzinfo=zone(name)) for month in (1, 7)]


def _hint(value: str) -> str:
    """What the user may have meant by a name the tz database lacks: for an offset (UTC+1) or an abbreviation (CEST),
    zones of the pinned release that have it; else the closest name."""
    if offset := _OFFSET.fullmatch(value.strip()):
        sign, hours, minutes = offset[1], int(offset[2]), int(offset[3] or 0)
        if hours <= 14 and minutes < 60:
            return _offset_hint(datetime.timedelta(hours=hours, minutes=minutes) * (-1 if sign == "-" else 1))
    if value.isalpha() and 2 <= len(value) <= 5:
        abbreviation = value.upper()
        using = [z for z in _country_zones() if any(t.tzname() == abbreviation for t in _in_year(z))][:3]
        if using:
            zones_text = f"{', '.join(using[:-1])} or {using[-1]}" if len(using) > 1 else using[0]
            return (
                f"{abbreviation} is the abbreviation of an offset, not a zone, and a zone also knows when its clocks "
                f"change; did you mean {zones_text}, whose clocks show {abbreviation}? "
            )
    close = difflib.get_close_matches(value, sorted(names()), n=1)
    return f"did you mean {close[0]}? " if close else ""


def _offset_hint(offset: datetime.timedelta) -> str:
    shown = utc_offset(offset)
    places = [z for z in _country_zones() if _in_year(z)[0].utcoffset() == offset][:2]
    place = f"the zone of the class's place, such as {' or '.join(places)}," if places else "the zone of its place,"
    text = f"{shown} is an offset, not a zone: write {place} which follows the place's clocks, summer time included"
    hours, rest = divmod(int(offset.total_seconds()) // 60, 60)
    if not hours and not rest:
        text += ", or Etc/UTC"
    elif not rest and -12 <= hours <= 14:
        # POSIX TZ strings count hours west of Greenwich, and the tz database's Etc/GMT zones are named alike: in the
        # pinned release Etc/GMT-1 is UTC+01:00 (tests/test_class_seats.py checks the zone the hint names).
        text += (
            f", or Etc/GMT{-hours:+d} for {shown} all year (the sign is reversed: Etc/GMT zones count hours west of "
            "Greenwich, as POSIX does)"
        )
    return f"{text}; "


def go_zoneinfo() -> str:
    """The pinned package's folder of zone files, as Go's time.LoadLocation reads them first through $ZONEINFO (Go
    1.26 src/time/zoneinfo.go LoadLocation): a Go process given it reads the same release as gpulab (a CronJob's
    spec.timeZone, the CronJob controller's schedules), not Go's own copy."""
    return str(resources.files(tzdata).joinpath("zoneinfo"))


def _file(name: str) -> bytes:
    return resources.files(tzdata).joinpath("zoneinfo", *name.split("/")).read_bytes()


@functools.cache
def zone(name: str) -> ZoneInfo:
    """The zone from the pinned package's own file (zoneinfo.ZoneInfo(name) would read the system's first)."""
    return ZoneInfo.from_file(io.BytesIO(_file(name)), key=name)


@functools.cache
def fixed_offset(name: str, since: datetime.datetime) -> datetime.timedelta | None:
    """The zone's UTC offset from `since` on, when it never changes again; else None. Read from the zone's file
    (RFC 8536, TZif version 2 or later): the offset in force at `since`, every transition after it, and the rule
    for the years after the last transition (the footer, a POSIX TZ string, names a daylight-saving rule after a
    comma)."""
    data = _file(name)
    counts = struct.unpack(">6l", data[20:44])  # isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
    isut, isstd, leap, times, types, chars = counts
    v2 = 44 + times * 5 + types * 6 + chars + leap * 8 + isstd + isut  # the 64-bit header, after the 32-bit data
    isut, isstd, leap, times, types, chars = struct.unpack(">6l", data[v2 + 20 : v2 + 44])
    body = v2 + 44
    moments = struct.unpack(f">{times}q", data[body : body + times * 8])
    kinds = data[body + times * 8 : body + times * 9]
    offsets = [
        struct.unpack(">l", data[at : at + 4])[0] for at in range(body + times * 9, body + times * 9 + types * 6, 6)
    ]
    footer = data[body + times * 9 + types * 6 + chars + leap * 12 + isstd + isut :].strip(b"\n")
    limit = since.timestamp()
    in_force = [kinds[i] for i, moment in enumerate(moments) if moment > limit]
    earlier = [kinds[i] for i, moment in enumerate(moments) if moment <= limit]
    seen = {offsets[kind] for kind in [earlier[-1] if earlier else 0, *in_force]}
    if len(seen) != 1 or b"," in footer:
        return None
    return datetime.timedelta(seconds=seen.pop())


def instant(day: datetime.date, minutes: int, name: str) -> datetime.datetime:
    """The one moment, in UTC, at which the wall clock of the zone shows `minutes` after midnight on `day`;
    LocalTimeError when a daylight-saving change skips that time on that day or shows it twice."""
    local = datetime.datetime.combine(day, datetime.time()) + datetime.timedelta(minutes=minutes)
    tz = zone(name)
    # In a gap, fold=0 reads the time with the offset before the change and fold=1 with the one after; in a repeat,
    # fold=0 is its first showing (PEP 495).
    before, after = tz.utcoffset(local), tz.utcoffset(local.replace(fold=1))
    assert before is not None and after is not None
    if before == after:
        return (local - before).replace(tzinfo=datetime.UTC)
    step = durations.format_duration(abs(int((after - before).total_seconds())) // 60)
    offsets = f"{utc_offset(before)} to {utc_offset(after)}"
    clock = f"{local:%H:%M} on {local:%a %Y-%m-%d}"
    if before < after:
        raise LocalTimeError(f"{clock} does not exist in {name}: its clocks go forward {step} then ({offsets})")
    raise LocalTimeError(f"{clock} happens twice in {name}: its clocks go back {step} then ({offsets})")


def midnight_skipped(day: datetime.date, name: str) -> bool:
    """Whether a daylight-saving change skips the zone's midnight on `day` (its clocks go forward at 00:00)."""
    local = datetime.datetime.combine(day, datetime.time())
    tz = zone(name)
    before, after = tz.utcoffset(local), tz.utcoffset(local.replace(fold=1))
    assert before is not None and after is not None
    return before < after


def utc_offset(offset: datetime.timedelta) -> str:
    """A UTC offset as gpulab writes it: UTC+01:00, UTC-04:00, UTC+10:30."""
    minutes = int(offset.total_seconds()) // 60
    return f"UTC{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
