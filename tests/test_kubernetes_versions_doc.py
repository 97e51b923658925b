"""docs/configuration.md's table of Kubernetes versions is EKS's calendar as gpulab holds it."""

import re

from domain.upstream.ami_releases import default_release
from domain.upstream.eks_calendar import CALENDAR
from tests.conftest import ROOT
from tests.test_config import problems, with_cluster

PAGE = ROOT / "docs" / "configuration.md"


def test_the_versions_table_is_the_calendar():
    section = PAGE.read_text().split("## Kubernetes versions\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (1\.\d+) \| (\S+) \| (\S+) \| (\S+) \| (\S+) \| (.+) \|$", section, re.M)
    assert {version: tuple(cells) for version, *cells, _ in rows} == {
        version: (
            str(row.eks_release),
            str(row.end_of_standard),
            str(row.end_of_extended),
            f"al2023@{default_release(version)}",
        )
        for version, row in CALENDAR.items()
    }
    # A row that rests on secondary sources says so.
    assert all(source.startswith("reported") != CALENDAR[version].confirmed for version, *_, source in rows)


def test_the_pages_example_refusal_is_the_checks_own_words():
    # On the tests' day (tests/conftest.py RUN_DAY, 2026-12-04), as the page's example says.
    section = PAGE.read_text().split("## Kubernetes versions\n", 1)[1]
    example = section.split("```\n", 2)[1].strip()
    assert [example] == problems(with_cluster(kubernetesVersion="1.34"))
