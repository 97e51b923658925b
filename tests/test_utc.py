"""domain/time/utc.py: the one way gpulab writes a moment."""

import datetime

import pytest

from domain.time.utc import utc_text

BERLIN_SUMMER = datetime.timezone(datetime.timedelta(hours=2))


def test_a_moment_is_written_in_utc_ending_in_z() -> None:
    at = datetime.datetime(2026, 7, 6, 11, 0, tzinfo=BERLIN_SUMMER)
    assert utc_text(at) == "2026-07-06T09:00:00Z"


def test_fractions_are_written_only_when_there_are_some() -> None:
    at = datetime.datetime(2026, 7, 6, 9, 0, 43, 902439, tzinfo=datetime.UTC)
    assert utc_text(at) == "2026-07-06T09:00:43.902439Z"
    assert utc_text(at.replace(microsecond=500000)) == "2026-07-06T09:00:43.500000Z"


def test_whole_seconds_drops_fractions_as_go_rfc3339_does() -> None:
    at = datetime.datetime(2026, 7, 6, 9, 0, 43, 902439, tzinfo=datetime.UTC)
    assert utc_text(at, whole_seconds=True) == "2026-07-06T09:00:43Z"


def test_a_moment_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        utc_text(datetime.datetime(2026, 7, 6, 9, 0))
