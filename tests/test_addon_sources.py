"""The EKS add-on DaemonSets of domain/capacity/daemonsets.py, and the node listeners they bring
(domain/upstream/node_listeners.py), against their published sources at the pinned versions.

The sources are in the upstream reference data as domain/upstream/fetch.py fetches them (each test skips, naming the
file it needs, when they are not): the VPC CNI's manifest and the node monitoring agent's and Pod Identity agent's
charts at the versions domain/capacity/daemonsets.py cites, and the kube-proxy DaemonSet eksctl captured from an EKS
cluster. A chart is rendered with `helm template` and the configuration the program gives its add-on. Each DaemonSet
must request what gpulab counts and land on exactly the same GPU nodes, for every instance type gpulab knows; and each
listener it brings must be on the node's own addresses (host network or a host port).
"""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.labels import GPU_PRESENT_LABEL, GPU_TAINT
from domain.capacity.daemonsets import DCGM_EXPORTER, EKS_ADDON_DAEMONSETS, pod_requests
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.upstream import fetch
from domain.upstream.fetch import FOLDERS
from domain.upstream.node_listeners import HOST_NETWORK_DAEMONSETS, LISTENERS
from render import charts
from tests.support import upstream_data as upstream_data
from tests.support.scheduling import Node, unschedulable_because
from tests.support.upstream_data import UPSTREAM

VPC_CNI = UPSTREAM / FOLDERS["amazon-vpc-cni-k8s"] / fetch.VPC_CNI_MANIFEST
NODE_MONITORING_CHART = UPSTREAM / FOLDERS["eks-node-monitoring-agent"] / fetch.NODE_MONITORING_AGENT_CHART
POD_IDENTITY_CHART = UPSTREAM / FOLDERS["eks-pod-identity-agent"] / fetch.POD_IDENTITY_AGENT_CHART
KUBE_PROXY_SAMPLE = UPSTREAM / FOLDERS["eksctl"] / fetch.KUBE_PROXY_SAMPLE

# One GPU node of every instance type gpulab knows, as a lab's NodePool makes it (labels and the GPU taint).
NODES = [
    Node(
        name,
        {
            "node.kubernetes.io/instance-type": name,
            "kubernetes.io/arch": info.architecture,
            "kubernetes.io/os": "linux",
            GPU_PRESENT_LABEL: "true",
        },
        [dict(GPU_TAINT)],
    )
    for name, info in GPU_INSTANCE_TYPES.items()
]


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(upstream_data.absent(path))
    return path


def daemonsets(objects: list[Any]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o and o.get("kind") == "DaemonSet"}


def helm_template(chart: Path, release: str, values: dict) -> dict[str, dict]:
    try:
        helm = charts.helm_binary()
    except charts.Unavailable as missing:
        pytest.skip(str(missing))
    of = charts.Release(release, release, None, "0", "kube-system", values, skip_crds=True)
    return daemonsets(list(yaml.safe_load_all(charts.template(of, "1.34", helm, chart))))


def gpulab_configuration(addon: str) -> dict:
    from tests.conftest import BASE, run_values

    run = run_values(BASE)
    (found,) = [a.inputs for a in run.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == addon]
    return json.loads(found.get("configurationValues") or "{}")


def assert_same(upstream: dict[str, dict], names: list[str]) -> None:
    ours = {addon.name: addon for addon in EKS_ADDON_DAEMONSETS}
    for name in names:
        spec = upstream[name]
        assert pod_requests(spec) == pod_requests(ours[name].pod_spec), name
        lands = [node.name for node in NODES if unschedulable_because(spec, node) is None]
        assert lands == [t for t in GPU_INSTANCE_TYPES if ours[name].lands_on(t)], name


def test_the_vpc_cni_daemonset_is_the_manifest_of_its_version():
    objects = list(yaml.safe_load_all(need(VPC_CNI).read_text()))
    assert_same(daemonsets(objects), ["aws-node"])


def test_node_monitoring_and_dcgm_are_its_chart_configured():
    values = gpulab_configuration("eks-node-monitoring-agent")
    rendered = helm_template(need(NODE_MONITORING_CHART), "eks-node-monitoring-agent", values)
    assert_same(rendered, ["eks-node-monitoring-agent", "dcgm-server"])


def test_the_pod_identity_agent_daemonset_is_its_chart():
    assert_same(helm_template(need(POD_IDENTITY_CHART), "eks-pod-identity-agent", {}), ["eks-pod-identity-agent"])


def test_the_kube_proxy_daemonset_is_the_one_eks_installs():
    sample = json.loads(need(KUBE_PROXY_SAMPLE).read_text())
    assert_same(daemonsets(sample["items"]), ["kube-proxy"])


def test_the_listeners_the_walls_probe_on_a_node_are_on_its_addresses_in_their_sources():
    # The walls probe a node's own address for the listeners its add-ons bring (domain/upstream/node_listeners.py):
    # each add-on's DaemonSet must, in its published source, run on the node's network or publish that port on the
    # host; otherwise the walls table would claim to close a port the node does not have.
    published = {
        **daemonsets(list(yaml.safe_load_all(need(VPC_CNI).read_text()))),
        **helm_template(
            need(NODE_MONITORING_CHART), "eks-node-monitoring-agent", gpulab_configuration("eks-node-monitoring-agent")
        ),
        **helm_template(need(POD_IDENTITY_CHART), "eks-pod-identity-agent", {}),
        **daemonsets(json.loads(need(KUBE_PROXY_SAMPLE).read_text())["items"]),
    }
    for name in HOST_NETWORK_DAEMONSETS:
        assert published[name].get("hostNetwork") is True, name
    brought = [ln for ln in LISTENERS if ln.daemonset not in (None, DCGM_EXPORTER)]  # the exporter is gpulab's own
    for listener in brought:
        spec = published[listener.daemonset]
        host_ports = {port.get("hostPort") for c in spec["containers"] for port in c.get("ports", [])}
        assert spec.get("hostNetwork") is True or listener.port in host_ports, listener.name
