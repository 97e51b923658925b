"""Karpenter's duration strings as numbers: what drain timeouts, class windows and budget lengths are computed from."""

import pytest

from domain.time.durations import duration_minutes, format_duration, seconds


@pytest.mark.parametrize(("text", "expected"), [("90s", 90), ("1h", 3600), ("1h30m", 5400), ("720h", 2_592_000)])
def test_a_karpenter_duration_reads_as_its_seconds(text, expected):
    assert seconds(text) == expected


@pytest.mark.parametrize(("text", "minutes"), [("45m", 45), ("2h", 120), ("1h30m", 90), ("0m", 0)])
def test_budget_durations_read_and_written_back_alike(text, minutes):
    assert duration_minutes(text) == minutes
    assert duration_minutes(format_duration(minutes)) == minutes


@pytest.mark.parametrize("text", ["", "90s", "1d", "30m1h"])
def test_a_duration_that_is_not_hours_and_minutes_is_refused(text):
    with pytest.raises(ValueError, match="is not a duration of hours and minutes"):
        duration_minutes(text)
