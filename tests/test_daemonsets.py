"""The DaemonSets each lab's seat share counts: the ones that really land on its nodes, with the requests they really
make, for every stack; and the messages of a lab whose learners would not fit."""

from fractions import Fraction

import pytest

import render.run
from domain.capacity.daemonsets import EKS_ADDON_DAEMONSETS, MPS_CONTROL_DAEMON, pod_requests
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.capacity.quantity import quantity
from render import addons, charts
from tests.conftest import BASE, run_values, stack_values
from tests.support.nodes import lab_nodes
from tests.support.rendered import STACKS, Rendered, rendered
from tests.support.scheduling import Node, unschedulable_because
from tests.support.synthetic import lab
from tests.test_config import problems

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"


def launchable(nodes: list[Node]) -> list[Node]:
    # tests.support.nodes combines every instance type with every architecture of the lab; EC2 has one per type.
    return [n for n in nodes if GPU_INSTANCE_TYPES[n.labels[INSTANCE_TYPE]].architecture == n.labels[ARCH]]


def rendered_daemonsets(files: dict[str, list[dict]]) -> dict[str, dict]:
    """Every DaemonSet the render holds (the program's manifests and the charts' output): name to pod spec."""
    return {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for objects in files.values()
        for o in objects
        if o.get("kind") == "DaemonSet"
    }


def landing(pod_specs: dict[str, dict], node: Node) -> dict[str, tuple[Fraction, Fraction]]:
    """The DaemonSets among `pod_specs` that the scheduler would run on the node, with their pods' requests."""
    return {name: pod_requests(spec) for name, spec in pod_specs.items() if unschedulable_because(spec, node) is None}


def counted(share) -> dict[str, tuple[Fraction, Fraction]]:
    return {d.name: (d.cpu, d.memory) for d in share.daemonsets}


def check_every_lab_node(run, files) -> None:
    specs = rendered_daemonsets(files) | addons.pod_specs(run)
    pools = lab_nodes(o for path, objects in files.items() if path.startswith("manifests/") for o in objects)
    for name, lab_settings in run.stack.settings.labs.items():
        shares = {s.instance_type: s for s in lab_settings.node_shares}
        for node in launchable(pools[name]):
            assert landing(specs, node) == counted(shares[node.labels[INSTANCE_TYPE]]), node.name


@pytest.mark.parametrize("stack", STACKS)
def test_a_labs_share_counts_exactly_its_nodes_daemonsets(stack):
    # The device plugin and the MPS control daemon as `helm template` of the pinned chart renders them for the stack,
    # any other DaemonSet the stack installs, and the EKS add-ons; placed by the scheduler's node-level rules.
    r = rendered(stack)
    check_every_lab_node(r.run, r.files())


def test_the_share_follows_the_stacks_device_plugin_resources(tmp_path):
    # Not the defaults: the chart gets these, the seat share counts these (an init container's too, on MPS nodes).
    values = stack_values(
        **{
            "gpulab:labs": {
                "isolated": lab(["g4dn.xlarge", "g5g.xlarge"], 4, sharing="mps"),
                "turns": lab(["g6.12xlarge"], 3, max_gpus=8),
            },
            "gpulab:nvidiaDevicePlugin": {"resources": {"cpu": "0.125", "memory": "0.25Gi"}},
        }
    )
    run = run_values(values)
    render.run.write(run, tmp_path)
    check_every_lab_node(run, Rendered("plugin-resources", run, tmp_path, charts.write(run, tmp_path)).files())
    isolated = run.stack.settings.labs["isolated"].node_shares[0]
    assert counted(isolated)[MPS_CONTROL_DAEMON] == (Fraction(1, 8), Fraction(2**28))


@pytest.mark.parametrize("stack", STACKS)
def test_addon_daemonsets_land_on_lab_nodes_as_the_share_counts(stack):
    r = rendered(stack)
    specs = addons.pod_specs(r.run)
    for nodes in lab_nodes(r.manifests()).values():
        for node in launchable(nodes):
            for addon in EKS_ADDON_DAEMONSETS:
                lands = unschedulable_because(specs[addon.name], node) is None
                assert lands is addon.lands_on(node.labels[INSTANCE_TYPE]), (addon.name, node.name)


def test_a_daemonset_intolerant_of_the_gpu_taint_is_not_counted():
    # Without gpulab's configuration the dcgm-server tolerates nothing, and the tainted lab nodes never run it.
    r = rendered("synthetic-mixed")
    untolerated = {addon.name: dict(addon.pod_spec) for addon in EKS_ADDON_DAEMONSETS}
    pools = lab_nodes(r.manifests())
    amd64 = [n for n in launchable(pools["solo"]) if n.labels[ARCH] == "amd64"]
    assert amd64 and all("dcgm-server" not in landing(untolerated, n) for n in amd64)
    assert all("dcgm-server" in landing(addons.pod_specs(r.run), n) for n in amd64)


def test_a_daemonset_the_share_forgets_is_caught():
    r = rendered("base")
    files = r.files()
    extra = {
        "kind": "DaemonSet",
        "metadata": {"name": "node-exporter"},
        "spec": {
            "template": {
                "spec": {
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "exporter", "resources": {"requests": {"cpu": "20m"}}}],
                }
            }
        },
    }
    with pytest.raises(AssertionError, match="node-exporter"):
        check_every_lab_node(r.run, {**files, "manifests/node-exporter.yaml": [extra]})


@pytest.mark.parametrize(
    ("spec", "cpu", "memory"),
    [
        # Containers add up; an init container counts only if it alone asks for more.
        (
            {
                "initContainers": [{"resources": {"requests": {"cpu": "25m"}}}],
                "containers": [
                    {"resources": {"requests": {"cpu": "25m"}}},
                    {"resources": {"requests": {"cpu": "25m"}}},
                ],
            },
            "50m",
            "0",
        ),
        (
            {
                "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "2Gi"}}}],
            },
            "1",
            "2Gi",
        ),
        # A pod's missing request is its limit (SetDefaults_Pod); no requests and no limits ask for nothing.
        ({"containers": [{"resources": {"limits": {"memory": "200Mi"}}}, {"resources": {}}]}, "0", "200Mi"),
        # A sidecar (restartable init container) runs beside the containers and beside the init containers after it.
        (
            {
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                    {"resources": {"requests": {"cpu": "500m"}}},
                ],
                "containers": [{"resources": {"requests": {"cpu": "200m"}}}],
            },
            "600m",
            "0",
        ),
    ],
)
def test_pod_requests_count_as_kubernetes_and_karpenter_count(spec, cpu, memory):
    assert pod_requests(spec) == (quantity(cpu), quantity(memory))


@pytest.mark.parametrize("stack", STACKS)
def test_a_gpus_learners_and_the_daemonsets_fit_every_lab_node(stack):
    for name, lab_settings in rendered(stack).run.stack.settings.labs.items():
        requests = lab_settings.learner_requests
        for node in lab_settings.node_shares:
            cpu = node.seats * quantity(requests["cpu"]) + sum(d.cpu for d in node.daemonsets)
            memory = node.seats * quantity(requests["memory"]) + sum(d.memory for d in node.daemonsets)
            assert cpu <= Fraction(node.allocatable.cpu_millis, 1000), (name, node.instance_type)
            assert memory <= node.allocatable.memory_mib * 2**20, (name, node.instance_type)
            pods = (
                GPU_INSTANCE_TYPES[node.instance_type].max_pods
                if lab_settings.max_pods is None
                else lab_settings.max_pods
            )
            assert node.seats + len(node.daemonsets) <= pods, (name, node.instance_type)


def test_some_stack_has_mps_time_slicing_and_arm64_labs():
    # The parametrised tests cover every stack; this pins that these cases are among them.
    labs = [lab for s in STACKS for lab in rendered(s).run.stack.settings.labs.values()]
    assert {lab.sharing for lab in labs} == {"mps", "timeSlicing"}
    assert {arch for lab in labs for arch in lab.architectures} == {"amd64", "arm64"}


INTRO = BASE["gpulab:labs"]["intro"]


def with_intro(**changes) -> dict:
    return stack_values(**{"gpulab:labs": {"intro": {**INTRO, **changes}}})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            with_intro(learnerPod={"cpu": "1237m"}),
            "gpulab:labs.intro.learnerPod.cpu: must be at most 1236m so that every slice of each instance type's node "
            "gets a learner: g4dn.xlarge has 3920m allocatable cpu; its DaemonSets request 210m (nvidia-device-plugin "
            "50m, kube-proxy 100m, aws-node 50m, eks-pod-identity-agent 0m, eks-node-monitoring-agent 10m, "
            "dcgm-server 0m); the 3710m left over 3 seats is 1236m each",
        ),
        (
            with_intro(learnerPod={"memory": "4775Mi"}, sharing="mps"),
            "gpulab:labs.intro.learnerPod.memory: must be at most 4731Mi so that every slice of each instance type's "
            "node gets a learner: g4dn.xlarge has 14481Mi allocatable memory; its DaemonSets request 286Mi "
            "(nvidia-device-plugin 128Mi, nvidia-device-plugin-mps-control-daemon 128Mi, kube-proxy 0Mi, aws-node "
            "0Mi, eks-pod-identity-agent 0Mi, eks-node-monitoring-agent 30Mi, dcgm-server 0Mi); the 14195Mi left over "
            "3 seats is 4731Mi each",
        ),
        (
            stack_values(
                **{
                    "gpulab:labs": {"intro": INTRO},
                    "gpulab:nvidiaDevicePlugin": {"resources": {"cpu": "4", "memory": "128Mi"}},
                }
            ),
            "gpulab:labs.intro.learnerPod.cpu: no room for a learner on every slice of each node: g4dn.xlarge has "
            "3920m allocatable cpu; its DaemonSets request 4160m",
        ),
        (
            with_intro(maxPods=8),
            "gpulab:labs.intro.maxPods: must be at least 9: g4dn.xlarge takes 3 learners and 6 DaemonSet pods "
            "(nvidia-device-plugin, kube-proxy, aws-node, eks-pod-identity-agent, eks-node-monitoring-agent, "
            "dcgm-server)",
        ),
        (
            with_intro(slicesPerGpu=24),
            "gpulab:labs.intro.slicesPerGpu: too many learners for a node: g4dn.xlarge takes 24 learners and 6 "
            "DaemonSet pods",
        ),
        (
            stack_values(**{"gpulab:cluster": {**BASE["gpulab:cluster"], "kubernetesVersion": "1.27"}}),
            "gpulab:cluster.kubernetesVersion: gpulab runs Kubernetes 1.28 to 1.36, not 1.27: a version needs its "
            "EKS add-ons and kube-scheduler pinned",
        ),
    ],
)
def test_a_lab_whose_learners_dont_fit_is_refused_with_figures(values, expected):
    assert any(line.startswith(expected) for line in problems(values)), problems(values)


def test_a_bad_plugin_setting_is_reported_once_judging_no_lab():
    values = stack_values(
        **{"gpulab:labs": {"intro": INTRO}, "gpulab:nvidiaDevicePlugin": {"resources": {"cpu": "lots"}}}
    )
    lines = problems(values)
    assert [line.split(":")[1] for line in lines] == ["nvidiaDevicePlugin.resources.cpu"], lines


def test_default_learner_gets_what_the_plugin_leaves_no_more():
    plugin = {"gpulab:nvidiaDevicePlugin": {"resources": {"cpu": "150m", "memory": "128Mi"}}}
    run = run_values(stack_values(**{"gpulab:labs": {"intro": INTRO}}, **plugin))
    # g4dn.xlarge: 3920m less 150m for the plugin and 160m for the add-ons, over 3 seats.
    assert run.stack.settings.labs["intro"].learner_requests["cpu"] == "1203m"
    lines = problems(stack_values(**{"gpulab:labs": {"intro": {**INTRO, "learnerPod": {"cpu": "1204m"}}}}, **plugin))
    assert any(line.startswith("gpulab:labs.intro.learnerPod.cpu: must be at most 1203m") for line in lines), lines
