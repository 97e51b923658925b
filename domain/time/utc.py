"""The one way gpulab writes a moment and names the day: UTC, ISO 8601 / RFC 3339 ending in Z.

Every moment a render, a rehearsal or a report writes goes through utc_text, so that a reader compares them as text and
a tool parses them with one rule (datetime.fromisoformat, Go's time.Parse(time.RFC3339), which accepts fractions).
"""

import datetime


def utc_text(moment: datetime.datetime, *, whole_seconds: bool = False) -> str:
    """`moment` in UTC as 2026-01-05T09:00:00Z, with fractions of a second (2026-01-05T09:00:43.902439Z) only when it
    has them; `whole_seconds` drops them, as Go's time.RFC3339 layout writes a moment (the Karpenter stepper's clock,
    rehearsal/stepper/rehearse.go, and the CronJob controller's scheduled-timestamp annotation). A moment without a
    zone is refused: which clock it is read on would be a guess."""
    if moment.tzinfo is None:
        raise ValueError(f"{moment} has no time zone: gpulab writes moments in UTC and will not guess the clock")
    moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    if whole_seconds:
        moment = moment.replace(microsecond=0)
    return moment.isoformat() + "Z"


def today() -> datetime.date:
    """The day of the run in UTC: the day a class table counts from, a rehearsal plays, a live price is looked up on."""
    return datetime.datetime.now(datetime.UTC).date()
