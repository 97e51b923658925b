"""The IANA time zone database that gpulab reads a class's local times in: the PyPI `tzdata` package pinned in
requirements.txt, loaded from the package itself and never from the machine's /usr/share/zoneinfo, whose release
differs from one machine to the next (Python's zoneinfo would prefer it). The year-long proof (tests/test_class_year.py)
points Go at the same files and compares them with Go's own copy; docs/classes.md says which copy the cluster reads.
"""

import datetime
import difflib
import functools
import io
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
        close = difflib.get_close_matches(value, sorted(names()), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ValueError(
            f"{value!r} is not a time zone of the IANA tz database ({VERSION}); {hint}names look like Europe/Berlin, "
            "America/New_York or Etc/UTC"
        )
    return value


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


def utc_offset(offset: datetime.timedelta) -> str:
    """A UTC offset as gpulab writes it: UTC+01:00, UTC-04:00, UTC+10:30."""
    minutes = int(offset.total_seconds()) // 60
    return f"UTC{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
