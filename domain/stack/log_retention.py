"""How long CloudWatch Logs may keep a log group's events: only the values its API accepts."""

# Amazon CloudWatch Logs API Reference, PutRetentionPolicy, retentionInDays: "Possible values are: 1, 3, 5, 7, 14, 30,
# 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, and 3653." pulumi-aws 7.51.1 lists the
# same for aws.cloudwatch.LogGroup.retention_in_days, plus 0, which means never expire and is deliberately not offered.
LOG_RETENTION_DAYS = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip


def accepted_retention(days: int) -> int:
    if days not in LOG_RETENTION_DAYS:
        shorter = max((d for d in LOG_RETENTION_DAYS if d < days), default=None)
        longer = min((d for d in LOG_RETENTION_DAYS if d > days), default=None)
        nearest = [str(d) for d in (shorter, longer) if d is not None]
        raise ValueError(
            f"must be a retention CloudWatch Logs accepts ({', '.join(map(str, LOG_RETENTION_DAYS))}), got {days}; "
            f"the nearest {'are' if len(nearest) == 2 else 'is'} {' or '.join(nearest)}"
        )
    return days
