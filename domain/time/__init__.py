"""Time: Go cron schedules, time zones and the pinned tz data, durations, a class's calendar in its zone and its
budget windows in UTC."""
