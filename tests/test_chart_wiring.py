"""What the rendered releases must agree on with the rest of the stack, for every stack; and that each check bites."""

import copy

import pytest
import yaml

from components.jupyterhub.hub import RELEASE as JUPYTERHUB
from components.karpenter.controller import RELEASE as KARPENTER
from components.nvidia.device_plugin import RELEASE as DEVICE_PLUGIN
from tests.support.chart_checks import (
    controller_problems,
    device_plugin_problems,
    hub_problems,
    mps_daemon_problems,
    profile_replicas,
)
from tests.support.rendered import BASE_STACK, HUB_STACKS, STACKS, load_objects, rendered

# The suite's slowest part, on its own: `make test-charts` (pytest -m charts).
pytestmark = pytest.mark.charts


@pytest.mark.parametrize("stack", STACKS)
def test_karpenter_gets_cluster_queue_identity_and_system_nodes(stack):
    r = rendered(stack)
    assert controller_problems(r.run, r.chart(KARPENTER), r.manifests()) == []


@pytest.mark.parametrize("stack", STACKS)
def test_device_plugin_runs_only_on_lab_nodes_with_their_slices(stack):
    r = rendered(stack)
    assert device_plugin_problems(r.run, r.chart(DEVICE_PLUGIN), r.manifests()) == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_mps_control_daemon_runs_on_mps_lab_nodes_only(stack):
    r = rendered(stack)
    assert mps_daemon_problems(r.run, r.chart(DEVICE_PLUGIN), r.manifests()) == []


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hub_runs_on_system_nodes_packs_by_gpu_serves_https(stack):
    r = rendered(stack)
    assert hub_problems(r.run, r.chart(JUPYTERHUB), r.manifests()) == []


def _hub_retemplated(change):
    # A synthetic stack, so that a lab added to a stack file changes nothing here.
    r = rendered("synthetic-jupyterhub")
    values = copy.deepcopy(dict(r.release(JUPYTERHUB).values))
    change(values)
    return r, load_objects(r.template(JUPYTERHUB, values))


def test_a_hub_that_may_run_anywhere_is_caught_on_lab_nodes():
    def anywhere(values):
        values["hub"].update(nodeSelector=None, tolerations=[{"operator": "Exists"}])

    r, objects = _hub_retemplated(anywhere)
    problems = hub_problems(r.run, objects, r.manifests())
    on_lab_nodes = tuple(f"the hub pod can schedule on {lab}/" for lab in r.run.stack.settings.labs)
    assert problems and all(p.startswith(on_lab_nodes) for p in problems)


def test_the_charts_gpu_blind_default_packing_is_caught():
    r, objects = _hub_retemplated(lambda values: values["scheduling"]["userScheduler"].pop("pluginConfig"))
    (problem,) = hub_problems(r.run, objects, r.manifests())
    assert problem.startswith("the user-scheduler does not pack learners by nvidia.com/gpu")


def test_placeholders_and_a_plain_http_hub_are_caught():
    def defaults(values):
        values["scheduling"]["userPlaceholder"]["enabled"] = True
        # The chart's TLS offload: 443 and 80 both reach the proxy's plain http port, which serves the hub in clear.
        values["proxy"]["https"] = {"enabled": True, "type": "offload"}

    r, objects = _hub_retemplated(defaults)
    problems = hub_problems(r.run, objects, r.manifests())
    assert problems == [
        "user placeholders or image pullers are installed: ['user-placeholder']",
        "proxy-public is a LoadBalancer with ports [(443, 'http'), (80, 'http')], not HTTPS on 443 and 80 to the "
        "redirect",
    ]


def test_a_hub_without_its_redirect_port_is_caught():
    def no_redirect(values):
        values["proxy"]["service"]["disableHttpPort"] = True

    r, objects = _hub_retemplated(no_redirect)
    assert hub_problems(r.run, objects, r.manifests()) == [
        "proxy-public is a LoadBalancer with ports [(443, 'https')], not HTTPS on 443 and 80 to the redirect"
    ]


def test_some_stack_has_an_mps_lab_beside_non_mps_labs():
    # The parametrised test covers every stack; this pins that the MPS case, and the case beside it, are among them.
    strategies = {lab.sharing for s in STACKS for lab in rendered(s).run.stack.settings.labs.values()}
    assert {"mps", "timeSlicing"} <= strategies


def test_an_mps_daemon_that_ignores_the_mps_label_is_caught():
    # The chart appends .Values.nodeSelector to its own mps.capable selector; an affinity that admits every GPU node
    # cannot widen it, so plant the defect in the rendered object instead.
    r = rendered("synthetic-mps-beside-time-slicing")
    objects = copy.deepcopy(r.chart(DEVICE_PLUGIN))
    for o in objects:
        if o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith("mps-control-daemon"):
            o["spec"]["template"]["spec"]["nodeSelector"] = {}
    problems = mps_daemon_problems(r.run, objects, r.manifests())
    prefix = "the MPS control daemon can schedule on "
    assert all(p.startswith(prefix) for p in problems)
    # Every node of the labs that do not use MPS; the system nodes are kept off by the GPU node affinity.
    assert {p.removeprefix(prefix).split("/")[0] for p in problems} == {"turns", "solo"}


def test_node_overlays_are_on_exactly_when_a_lab_shares_gpus():
    # The parametrised test covers this for every stack; this pins that both cases are among them.
    sharing = {s: any(lab.slices_per_gpu > 1 for lab in rendered(s).run.stack.settings.labs.values()) for s in STACKS}
    assert set(sharing.values()) == {True, False}


def _retemplated(release, change):
    """The base stack's release, templated again after `change` edits a copy of its values."""
    r = rendered(BASE_STACK)
    values = copy.deepcopy(dict(r.release(release).values))
    change(values)
    return r, load_objects(r.template(release, values))


def test_a_profile_with_the_wrong_replicas_is_caught():
    def wrong_replicas(values):
        profile = yaml.safe_load(values["config"]["map"]["intro"])
        for strategy in profile["sharing"].values():  # whichever way the profile shares the GPU
            for resource in strategy["resources"]:
                resource["replicas"] += 1
        values["config"]["map"]["intro"] = yaml.safe_dump(profile)

    r, objects = _retemplated(DEVICE_PLUGIN, wrong_replicas)
    slices = r.run.stack.settings.labs["intro"].slices_per_gpu
    problems = device_plugin_problems(r.run, objects, r.manifests())
    assert problems and all(p.endswith(f"gets {slices + 1} replicas per GPU, lab intro has {slices}") for p in problems)


def test_a_missing_profile_is_caught():
    r, objects = _retemplated(DEVICE_PLUGIN, lambda values: values["config"]["map"].pop("intro"))
    problems = device_plugin_problems(r.run, objects, r.manifests())
    assert "profiles ['default'], expected 'default' and one per lab ['intro']" in problems
    assert any(p.endswith("selects profile 'intro', which the ConfigMap does not have") for p in problems)


def test_a_toleration_dropped_from_the_device_plugin_is_caught():
    # An empty list replaces the chart's default tolerations (Helm merges maps, not lists).
    r, objects = _retemplated(DEVICE_PLUGIN, lambda values: values.update(tolerations=[]))
    problems = device_plugin_problems(r.run, objects, r.manifests())
    assert problems
    assert all(
        p.startswith("the device plugin cannot schedule on intro/")
        and p.endswith("untolerated taint nvidia.com/gpu=true:NoSchedule")
        for p in problems
    )


def test_a_device_plugin_without_node_affinity_is_caught():
    # null deletes the key, and with it the chart's default affinity.
    r, objects = _retemplated(DEVICE_PLUGIN, lambda values: values.update(affinity=None))
    problems = device_plugin_problems(r.run, objects, r.manifests())
    assert problems
    assert all(p.startswith("the device plugin can schedule on cluster-system/") for p in problems)


def test_the_feature_gate_off_while_a_lab_shares_gpus_is_caught():
    def gate_off(values):
        values["settings"]["featureGates"]["nodeOverlay"] = False

    r, objects = _retemplated(KARPENTER, gate_off)
    assert controller_problems(r.run, objects, r.manifests()) == [
        "FEATURE_GATES has NodeOverlay=false, the labs need true"
    ]


def test_a_controller_with_another_service_account_is_caught():
    r, objects = _retemplated(KARPENTER, lambda values: values["serviceAccount"].update(name="karpenter-controller"))
    association = "kube-system/karpenter"
    assert f"the controller runs as kube-system/karpenter-controller, Pod Identity gives its role to {association}" in (
        controller_problems(r.run, objects, r.manifests())
    )


def test_a_controller_without_node_selector_stays_off_labs():
    r, objects = _retemplated(KARPENTER, lambda values: values.pop("nodeSelector"))
    assert controller_problems(r.run, objects, r.manifests()) == []


def test_a_controller_that_may_run_anywhere_is_caught_on_labs():
    def anywhere(values):
        values.update(nodeSelector=None, affinity=None, tolerations=[{"operator": "Exists"}])

    r, objects = _retemplated(KARPENTER, anywhere)
    problems = controller_problems(r.run, objects, r.manifests())
    assert problems
    assert all(p.startswith("the Karpenter controller can schedule on intro/") for p in problems)


@pytest.mark.parametrize(
    ("profile", "replicas"),
    [
        ("version: v1\nflags: {migStrategy: none}\n", 1),
        ("version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 4}]}}\n", 4),
        ("version: v1\nsharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: 6}]}}\n", 6),
    ],
)
def test_profile_replicas_reads_either_sharing_strategy(profile, replicas):
    assert profile_replicas(profile) == replicas
