"""What the GPU meter's metrics workspace costs: the samples the AWS managed scraper sends it, their storage, and the
collector's hours, per hour, per 730-hour month and over the stack's term (the meter runs all the time).

AWS bills Amazon Managed Service for Prometheus per metric sample ingested, per GB-month stored, per query sample
processed, and its collector per hour turned on and per sample collected (aws.amazon.com/prometheus/pricing, read in
the search index 2026-12-04: the dimensions, not the amounts). The volumes here follow from the stack: series (its
labs full; components/metrics/series.py, some counts assumed) x one sample per scrape interval. They are priced only
with a price from AWS itself (a preview's Price List look-ups); offline they are volumes, said to be unpriced. An
upper bound: every sample at the first paid tier's rate (the dearest; AWS's free tier is the account's, and other
workspaces may use it). Not counted: query samples processed (the rules, the culler and the spend gate query each
minute), the recording rules' own samples, and the collector's hours and samples collected, whose usage type was not
found here.
"""

import datetime
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from domain.cost.lab_cost import rounded
from domain.cost.price_book import MeterPrices
from domain.cost.prices import HOURS_PER_MONTH
from domain.cost.stack_cost import term_hours

# "Metrics ingested into a workspace are stored for 150 days by default" (AMP User Guide, AMP-onboard-ingest-metrics,
# read 2026-12-04); gpulab's workspace sets no retention (components/metrics/store.py).
RETENTION_DAYS = 150
# AWS's pricing page: the storage charge is the samples ("typically 1 or 2 bytes") and their metadata; 2 bytes a
# sample, metadata not counted (ASSUMPTION).
BYTES_PER_SAMPLE = 2
GIB = 2**30  # "1GB is 2^30 bytes" (the same page)
COLLECTOR_UNPRICED = "collector hours unpriced: no Price List usage type for the managed collector found here"


@dataclass(frozen=True)
class MeterCost:
    """The meter's volumes, and its cost where priced."""

    series: int
    samples_per_month: int
    stored_gb: Decimal  # held at steady state, after RETENTION_DAYS
    collector_hours_per_month: int
    per_month: float | None  # samples and storage, rounded up; None where either has no price
    unpriced: str  # why per_month is None, or ""

    @property
    def excluded(self) -> str:
        """What of the meter a total with it leaves out, and why: the one label the summary, the PR comment and the
        `cost` output give such a total."""
        if self.per_month is None:
            return f"excludes the GPU meter: samples and storage {self.unpriced}; {COLLECTOR_UNPRICED}"
        return f"excludes the GPU meter's {COLLECTOR_UNPRICED}"

    @property
    def per_hour(self) -> float | None:
        return (
            None if self.per_month is None else rounded(Decimal(str(self.per_month)) / HOURS_PER_MONTH, ROUND_CEILING)
        )

    def over(self, hours: int) -> float | None:
        """USD over `hours` hours, at the month's figure."""
        if self.per_month is None:
            return None
        return rounded(Decimal(str(self.per_month)) * hours / HOURS_PER_MONTH, ROUND_CEILING)

    def as_output(self, days: tuple[datetime.date, datetime.date] | None) -> dict[str, Any]:
        """The `cost.meter` stack output: the volumes always, USD where priced, over the stack's term `days` (a
        730-hour month without one)."""
        hours = term_hours(days) if days else HOURS_PER_MONTH
        return {
            "series": self.series,
            "samplesPerMonth": self.samples_per_month,
            "storedGb": float(self.stored_gb),
            "collectorHoursPerMonth": self.collector_hours_per_month,
            "perHour": self.per_hour,
            "perMonth": self.per_month,
            "term": {"hours": hours, "usd": self.over(hours)},
            "unpriced": [u for u in (self.unpriced, COLLECTOR_UNPRICED) if u],
        }


def meter_cost(series: int, scrape_interval_seconds: int, prices: MeterPrices) -> MeterCost:
    """The meter of `series` series scraped every `scrape_interval_seconds`, at `prices`."""
    per_series_month = HOURS_PER_MONTH * 3600 // scrape_interval_seconds
    samples = series * per_series_month
    held = series * (RETENTION_DAYS * 86400 // scrape_interval_seconds) * BYTES_PER_SAMPLE
    stored = (Decimal(held) / GIB).quantize(Decimal("0.01"), rounding=ROUND_CEILING)
    per_month = None
    if prices.per_sample is not None and prices.per_gb_month is not None:
        amount = samples * Decimal(prices.per_sample) + stored * Decimal(prices.per_gb_month)
        per_month = rounded(amount, ROUND_CEILING)
    unpriced = "" if per_month is not None else prices.missing
    return MeterCost(series, samples, stored, HOURS_PER_MONTH, per_month, unpriced)
