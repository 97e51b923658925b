"""EKS's calendar is the one home of each version's support dates, and covers every version gpulab runs."""

import pytest

from domain.stack.fields import KNOWN_VERSIONS
from domain.upstream.eks_calendar import CALENDAR
from domain.upstream.versions import ADDON_VERSIONS, KUBE_SCHEDULER_VERSIONS


def test_every_pinned_version_has_its_support_dates():
    # A version pinned in one table but not the others would be refused with a message that blames the wrong table.
    assert set(CALENDAR) == set(KUBE_SCHEDULER_VERSIONS) == set(KNOWN_VERSIONS)
    assert {addon: set(table) for addon, table in ADDON_VERSIONS.items()} == {a: set(CALENDAR) for a in ADDON_VERSIONS}
    assert KNOWN_VERSIONS[0] == "1.28" and KNOWN_VERSIONS[-1] == "1.36"


def _months_later(day, months):
    month = day.month - 1 + months
    return day.replace(year=day.year + month // 12, month=month % 12 + 1)


@pytest.mark.parametrize("version", sorted(CALENDAR))
def test_each_row_follows_the_14_and_12_month_rule(version):
    # The User Guide: standard support "for the first 14 months after it's released", extended "for the next 12
    # months". A row copied with a typo breaks the rule; the REPORTED rows 1.35 and 1.36 are held to it too.
    row = CALENDAR[version]
    assert row.end_of_standard == _months_later(row.eks_release, 14)
    assert row.end_of_extended == _months_later(row.end_of_standard, 12)
