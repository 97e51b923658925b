"""docs/configuration.md's table of Kubernetes versions is EKS's calendar as gpulab holds it."""

import re

from domain.upstream.eks_calendar import CALENDAR
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "configuration.md"


def test_the_versions_table_is_the_calendar():
    section = PAGE.read_text().split("## Kubernetes versions\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (1\.\d+) \| (\S+) \| (\S+) \| (\S+) \| (.+) \|$", section, re.M)
    assert {version: (release, standard, extended) for version, release, standard, extended, _ in rows} == {
        version: (str(row.eks_release), str(row.end_of_standard), str(row.end_of_extended))
        for version, row in CALENDAR.items()
    }
    # A row that rests on secondary sources says so.
    assert all(source.startswith("reported") != CALENDAR[version].confirmed for version, *_, source in rows)
