"""A stack on a Kubernetes version past EKS standard support is refused unless it opts in to extended support, and one
past extended support is refused outright, on the day of the run in UTC (tests/conftest.py pins it: RUN_DAY)."""

import datetime

import pytest

from domain.time import utc
from reports.summary import summary
from tests.conftest import run_values
from tests.support import tables
from tests.support.synthetic import lab
from tests.test_config import parsed, problems, with_cluster

EKS = "eks:index:Cluster"


def test_a_version_past_standard_support_is_refused_with_both_ways_out():
    assert problems(with_cluster(kubernetesVersion="1.34")) == [
        "gpulab:cluster.kubernetesVersion: Kubernetes 1.34 left EKS standard support on 2026-12-02 (today is "
        "2026-12-04, UTC): move gpulab:cluster.kubernetesVersion to a version in standard support (1.35, 1.36; "
        "docs/configuration.md#kubernetes-versions), or set gpulab:cluster.supportType: EXTENDED to keep 1.34 until "
        "2027-12-02 at 0.60 USD per cluster-hour instead of 0.10"
    ]


def test_extended_support_keeps_the_version_and_reaches_the_cluster():
    eks = run_values(with_cluster(kubernetesVersion="1.34", supportType="EXTENDED")).one(EKS, "cluster-eks").inputs
    assert (eks["version"], eks["upgradePolicy"]) == ("1.34", {"supportType": "EXTENDED"})


def test_a_version_past_extended_support_is_refused_even_extended():
    assert problems(with_cluster(kubernetesVersion="1.31", supportType="EXTENDED")) == [
        "gpulab:cluster.kubernetesVersion: Kubernetes 1.31 left EKS extended support on 2026-11-26 (today is "
        "2026-12-04, UTC): EKS creates no cluster on it and upgrades a running one itself; move "
        "gpulab:cluster.kubernetesVersion to a version in standard support (1.35, 1.36; "
        "docs/configuration.md#kubernetes-versions)"
    ]


def test_a_version_without_eks_dates_is_refused_as_unknown():
    (line,) = problems(with_cluster(kubernetesVersion="1.37"))
    assert line.startswith("gpulab:cluster.kubernetesVersion: gpulab runs Kubernetes 1.28 to 1.36, not 1.37")


@pytest.mark.parametrize(("day", "refused"), [(datetime.date(2026, 12, 1), False), (datetime.date(2026, 12, 2), True)])
def test_standard_support_ends_at_the_start_of_its_utc_day(monkeypatch, day, refused):
    # EKS User Guide: extended support's billing "starts at the beginning of the day that the version reaches end of
    # standard support, in the UTC+0 timezone".
    monkeypatch.setattr(utc, "today", lambda: day)
    values = with_cluster(kubernetesVersion="1.34")
    if refused:
        (line,) = problems(values)
        assert line.startswith(
            "gpulab:cluster.kubernetesVersion: Kubernetes 1.34 left EKS standard support on 2026-12-02"
        )
        assert "(1.35, 1.36;" in line  # the versions in standard support that day
    else:
        assert parsed(values).settings.cluster.support_type == "STANDARD"


def test_a_wrong_support_type_is_refused_by_its_key():
    assert problems(with_cluster(supportType="extended")) == [
        "gpulab:cluster.supportType: must be one of 'STANDARD' or 'EXTENDED', got 'extended'"
    ]


# --- what the summary says of it -------------------------------------------------------------------------------------


def _warnings(lines: list[str]) -> list[str]:
    """Each warning of the summary, its lines (wrapped at 120 columns) joined."""
    paragraphs = "\n".join(lines).split("\n\n")
    return [" ".join(p.splitlines()) for p in paragraphs if p.startswith("warning: ")]


def test_the_summary_shows_the_end_of_standard_support_without_a_warning_far_from_it():
    lines = summary(run_values(with_cluster()))
    assert tables.cluster(lines)["standard support until"] == "2027-08-02"
    assert _warnings(lines) == []


def test_the_summary_warns_60_days_ahead_of_the_end_of_standard_support():
    run = run_values(with_cluster())
    assert _warnings(summary(run, datetime.date(2027, 6, 2))) == []  # 61 days before
    assert _warnings(summary(run, datetime.date(2027, 6, 3))) == [
        "warning: EKS standard support for Kubernetes 1.36 ends on 2027-08-02, within 60 days of 2027-06-03: EKS "
        "upgrades the control plane itself after that day (supportType STANDARD); move "
        "gpulab:cluster.kubernetesVersion to a newer version before then (docs/configuration.md#kubernetes-versions)"
    ]


def test_the_summary_warns_when_the_term_outlives_standard_support():
    term = {"start": "2027-07-26", "end": "2027-08-08"}
    classes = [{"schedule": "0 9 * * mon", "duration": "1h", "term": term}]
    values = with_cluster(supportType="EXTENDED")
    values["gpulab:labs"] = {"intro": lab(["g4dn.xlarge"], 3, max_gpus=4, classes=classes)}
    assert _warnings(summary(run_values(values))) == [
        "warning: EKS standard support for Kubernetes 1.36 ends on 2027-08-02, within the classes' term (2027-07-26 "
        "to 2027-08-08): the cluster pays 0.60 instead of 0.10 USD per cluster-hour from that day (supportType "
        "EXTENDED); move gpulab:cluster.kubernetesVersion to a newer version before then "
        "(docs/configuration.md#kubernetes-versions)"
    ]


def test_the_summary_says_a_stack_is_in_extended_support():
    lines = summary(run_values(with_cluster(kubernetesVersion="1.34", supportType="EXTENDED")))
    assert tables.cluster(lines)["standard support until"] == "2026-12-02"
    assert _warnings(lines) == [
        "warning: Kubernetes 1.34 is in EKS extended support since 2026-12-02, at 0.60 instead of 0.10 USD per "
        "cluster-hour, until 2027-12-02; move gpulab:cluster.kubernetesVersion to a version in standard support "
        "(docs/configuration.md#kubernetes-versions)"
    ]


def test_a_summary_of_a_later_day_says_eks_upgrades_a_standard_cluster():
    # The render's --today may be later than the day the stack was checked on.
    (line,) = _warnings(summary(run_values(with_cluster()), datetime.date(2027, 8, 2)))
    assert line.startswith(
        "warning: Kubernetes 1.36 left EKS standard support on 2027-08-02: EKS upgrades the control plane itself"
    )
