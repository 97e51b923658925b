"""Learners walled off: what a learner's server reaches and what reaches it, through every NetworkPolicy a stack
installs, as the upstream NetworkPolicy engine of devtools/netpol answers it (tests/support/reachability.py); as EKS's
network policy agent enforces them, with the lab nodes' host firewall, is tests/test_walls.py's; that the VPC CNI's
agent is on, tests/test_cluster.py's."""

import dataclasses

import pulumi
import pytest

import domain.stack
from components.jupyterhub.walls import NOT_INTERNET, internet_exceptions
from tests.conftest import BASE, ROOT, as_cli_config, stack_values
from tests.support.reachability import (
    API_SERVICE,
    INTERNET,
    METADATA,
    POD_IDENTITY,
    breaches,
    cluster,
    evaluate,
    markdown,
    probes,
    table,
)
from tests.support.rendered import HUB_STACKS
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE

pytestmark = pytest.mark.charts


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_learners_reach_hub_dns_web_only_hub_proxy_reach_them(stack):
    assert breaches(cluster(stack), table(stack)) == []


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hub_keeps_its_ways_out(stack):
    # KubeSpawner talks to the API server, the SigV4 proxy beside it gets its credentials from the Pod Identity agent
    # and queries the metrics workspace on the internet (components/jupyterhub/culling.py).
    c = cluster(stack)
    hub = {(v.destination, v.port.number): v.allowed for v in table(stack) if v.source == c.hub.name}
    assert hub[(API_SERVICE.name, 443)] and hub[(c.api_endpoint.name, 443)]
    assert hub[(POD_IDENTITY.name, 80)] and hub[(INTERNET.name, 443)]


def test_a_lab_closed_to_the_internet_keeps_the_hub_and_dns():
    c = cluster("synthetic-jupyterhub")
    assert c.internet_open == {"isolated": True, "turns": False}
    out = {(v.source, v.destination): v.allowed for v in table("synthetic-jupyterhub")}
    closed, _ = c.learners["turns"]
    assert not out[(closed.name, INTERNET.name)]
    assert out[(closed.name, c.hub.name)] and out[(closed.name, c.dns.name)]
    assert out[(c.learners["isolated"][0].name, INTERNET.name)]


# What each plant opens, and what the walls check must then report.
PLANTS = {
    "an allow-all egress for learners": (
        {"podSelector": {"matchLabels": {"component": "singleuser-server"}}, "policyTypes": ["Egress"], "egress": [{}]},
        lambda a, b: f"{a.name} -> {METADATA.name} 80/TCP: egress allowed",
    ),
    "learner-to-learner ingress": (
        {
            "podSelector": {"matchLabels": {"component": "singleuser-server"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"component": "singleuser-server"}}}]}],
        },
        lambda a, b: f"{b.name} -> {a.name} 8888/TCP: ingress allowed",
    ),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_the_walls_check_reports_a_policy_that_opens_them(plant):
    # The check above is only as good as what it catches: each plant must show up as a breach.
    spec, breach = PLANTS[plant]
    c = cluster("synthetic-jupyterhub")
    a, b = next(iter(c.learners.values()))
    extra = {"kind": "NetworkPolicy", "metadata": {"name": "planted", "namespace": c.hub.namespace}, "spec": spec}
    planted = dataclasses.replace(c, policies=[*c.policies, extra])
    found = breaches(planted, evaluate(planted, list(probes(planted))))
    assert any(line.startswith(breach(a, b)) for line in found), found


def test_docs_show_the_example_stacks_table_as_the_engine_answers_it():
    # A synthetic stack the tests own, so that a lab added to a stack file changes no page.
    doc = (ROOT / "docs" / "jupyterhub.md").read_text()
    current = markdown(table("synthetic-jupyterhub"))
    assert current in doc, f"docs/jupyterhub.md holds an old table; the current one:\n{current}"


def test_the_vpcs_own_public_blocks_are_not_the_internet():
    assert internet_exceptions(["192.168.0.0/16"]) == list(NOT_INTERNET)
    assert internet_exceptions(["10.1.0.0/16", "203.0.113.0/24"]) == [*NOT_INTERNET, "203.0.113.0/24"]


def _problems(values: dict) -> list[str]:
    pulumi.runtime.set_all_config(as_cli_config(values))
    with pytest.raises(domain.stack.ConfigError) as caught:
        domain.stack.load()
    return caught.value.lines


def test_a_closed_internet_needs_a_hub_running_its_learners():
    closed = {**BASE["gpulab:labs"]["intro"], "internet": False}
    assert _problems(stack_values(**{"gpulab:labs": {"intro": closed}})) == [
        "gpulab:labs.intro.internet: false closes the internet to the lab's JupyterHub learners: it needs "
        "gpulab:jupyterhub and the lab on its spawn page (onSpawnPage: true)"
    ]
    hub = {"gpulab:jupyterhub": {**HUB, "notebookImage": NOTEBOOK_IMAGE}}
    labs = {"intro": BASE["gpulab:labs"]["intro"], "staff": {**closed, "onSpawnPage": False}}
    # HUB signs in with GitHub and the stack sets no client secret, which is reported beside (no longer after) it.
    assert [line.split(":", 2)[1] for line in _problems(stack_values(**hub, **{"gpulab:labs": labs}))] == [
        "labs.staff.internet",
        "jupyterhubClientSecret",
    ]
