"""The EKS add-on builds gpulab pins per Kubernetes version (domain/upstream/versions.py) against what the rest of the
program reads of their sources: one upstream release per add-on whose DaemonSets, listeners or network policy agent
are modelled from it."""

import re

import pytest

from domain.upstream import fetch, versions
from domain.upstream.versions import ADDON_VERSIONS, one_release

BUILD = re.compile(r"v\d+\.\d+\.\d+-eksbuild\.\d+")


def test_every_row_is_an_eks_build():
    rows = {(addon, k8s, build) for addon, table in ADDON_VERSIONS.items() for k8s, build in table.items()}
    assert {row for row in rows if not BUILD.fullmatch(row[2])} == set()


def test_the_modelled_add_ons_are_one_release_at_every_version():
    # The VPC CNI's manifest and the node monitoring agent's chart are fetched at one tag (domain/upstream/fetch.py)
    # and give domain/capacity/daemonsets.py, domain/upstream/node_listeners.py and render/network_policy_agent.py
    # their figures; a row of another release would run what none of them was read from.
    assert (fetch.VPC_CNI_TAG, fetch.NODE_MONITORING_AGENT_TAG) == ("v1.21.1", "v1.6.1")
    assert {b.split("-")[0] for b in ADDON_VERSIONS["vpc-cni"].values()} == {"v1.21.1"}
    assert {b.split("-")[0] for b in ADDON_VERSIONS["eks-node-monitoring-agent"].values()} == {"v1.6.1"}


def test_a_row_of_another_release_is_refused_with_the_reason(monkeypatch):
    moved = {**versions.VPC_CNI_ADDON_VERSIONS, "1.36": "v1.23.0-eksbuild.1"}
    monkeypatch.setitem(versions.ADDON_VERSIONS, "vpc-cni", moved)
    refused = r"^vpc-cni is pinned to builds of v1\.21\.1, v1\.23\.0 .*read it per Kubernetes version"
    with pytest.raises(ValueError, match=refused):
        one_release("vpc-cni")
