"""The Amazon EKS Kubernetes release calendar: for each minor version gpulab pins its add-ons for
(domain/upstream/versions.py), the day EKS released it, the day its standard support ends and the day its extended
support ends, each row with its source. The one home of these dates: the stack's checks (supportType), its cost
(domain/cost/stack_cost.py) and its summary read them here.

The rules the dates follow, from the Amazon EKS User Guide (awsdocs/amazon-eks-user-guide,
latest/ug/versioning/kubernetes-versions.adoc at commit 013856044148d6eeed4723027a45aa2180536bcb): "A minor version is
under standard support in Amazon EKS for the first 14 months after it's released. Once a version is past the end of
standard support date, it enters extended support for the next 12 months." "Billing for extended support starts at
the beginning of the day that the version reaches end of standard support, in the UTC+0 timezone. The dates in the
following table use the UTC+0 timezone." "On the end of extended support date, you can no longer create new Amazon EKS
clusters with the unsupported version."

Kubernetes 1.37 is left out: EKS serves it (its platform-versions page names 1.37 as the newest version), but no source
stored here gives its EKS dates, and gpulab pins no kube-proxy add-on for it.
"""

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class SupportWindow:
    """One minor version's days on EKS (UTC): released, last day before extended support, last day before EKS stops
    it; and where they are written."""

    eks_release: datetime.date
    end_of_standard: datetime.date  # extended support, and its price, start at this day's 00:00 UTC
    end_of_extended: datetime.date
    source: str
    confirmed: bool  # read in AWS's own calendar; False: only secondary sources quote it (REPORTED)


_DAY = datetime.date.fromisoformat
# The User Guide's calendar table (kubernetes-versions.adoc, section kubernetes-release-calendar) at two commits of
# awsdocs/amazon-eks-user-guide: 013856044148 holds the rows 1.29 to 1.34, 8596db85c9ea (older) 1.28 to 1.33.
_AWS_NEW = "awsdocs/amazon-eks-user-guide@013856044148 latest/ug/versioning/kubernetes-versions.adoc"
_AWS_OLD = "awsdocs/amazon-eks-user-guide@8596db85c9ea latest/ug/versioning/kubernetes-versions.adoc"
# No stored copy of AWS's calendar has a 1.35 or 1.36 row (the User Guide's stored versions end at 1.34, and AWS's web
# pages were read only to their opening). REPORTED, from secondary sources that agree with each other and with the
# 14-month rule: 1.35, the AWS table's row as a sync-eks-data tool's test fixture quotes it ("| `1.35` | December 17,
# 2025 | January 27, 2026 | March 27, 2027 | March 27, 2028 |"; endoflife.date/amazon-eks gives 28 Jan 2026 for the
# release and the same end dates; aws-samples sample-apex-skills cluster-lifecycle, verified 2026-04-24, the same end
# dates); 1.36, a calendar "verified as of 2026-08-06 via docs.aws.amazon.com/eks/latest/userguide/
# kubernetes-versions.html" in a third-party skill file ("| 1.36 | August 2, 2027 | August 2, 2028 |") and the
# devopsdreams blog of 2026-08-16 ("Kubernetes 1.36 reached Amazon EKS on June 2, 2026 and remains in standard support
# through August 2, 2027"). Check them against the User Guide's table before relying on them.
_REPORTED_135 = "REPORTED: AWS's table row as quoted by a sync-eks-data test fixture; endoflife.date/amazon-eks"
_REPORTED_136 = "REPORTED: third-party calendar verified 2026-08-06 against the EKS User Guide; devopsdreams 2026-08-16"

# fmt: off
CALENDAR: Mapping[str, SupportWindow] = MappingProxyType({
    "1.36": SupportWindow(_DAY("2026-06-02"), _DAY("2027-08-02"), _DAY("2028-08-02"), _REPORTED_136, False),
    "1.35": SupportWindow(_DAY("2026-01-27"), _DAY("2027-03-27"), _DAY("2028-03-27"), _REPORTED_135, False),
    "1.34": SupportWindow(_DAY("2025-10-02"), _DAY("2026-12-02"), _DAY("2027-12-02"), _AWS_NEW, True),
    "1.33": SupportWindow(_DAY("2025-05-29"), _DAY("2026-07-29"), _DAY("2027-07-29"), _AWS_NEW, True),
    "1.32": SupportWindow(_DAY("2025-01-23"), _DAY("2026-03-23"), _DAY("2027-03-23"), _AWS_NEW, True),
    "1.31": SupportWindow(_DAY("2024-09-26"), _DAY("2025-11-26"), _DAY("2026-11-26"), _AWS_NEW, True),
    "1.30": SupportWindow(_DAY("2024-05-23"), _DAY("2025-07-23"), _DAY("2026-07-23"), _AWS_NEW, True),
    "1.29": SupportWindow(_DAY("2024-01-23"), _DAY("2025-03-23"), _DAY("2026-03-23"), _AWS_NEW, True),
    "1.28": SupportWindow(_DAY("2023-09-26"), _DAY("2024-11-26"), _DAY("2025-11-26"), _AWS_OLD, True),
})
# fmt: on
