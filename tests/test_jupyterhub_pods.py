"""Each lab's learner pod, built as the hub of the rendered jupyterhub release builds it (rehearsal/learner_pods.py),
for every stack with gpulab:jupyterhub: one slice, the GPU taint tolerated, the lab's nodes and no other, a seat's
share, and on an MPS lab the one UID the lab's MPS daemon serves."""

import copy
import functools
import json
import shlex

import pytest

from components.jupyterhub import walls_gate
from components.jupyterhub.hub import RELEASE
from components.jupyterhub.spawn_profiles import MPS_LEARNER_UID
from components.labels import GPU_RESOURCE, GPU_TAINT
from domain.capacity.quantity import quantity
from domain.stack.classes import DEFAULT_WARMUP
from domain.stack.limits import seat_share
from domain.time.durations import seconds
from rehearsal.learner_pods import learner_pod
from tests.support.hub_config import authenticator_class, stack_hub_config
from tests.support.nodes import lab_nodes, system_nodes
from tests.support.pod_specs import karpenter_requests, restricted_problems
from tests.support.rendered import HUB_STACKS, rendered
from tests.support.scheduling import tolerates, unschedulable_because
from tests.support.user_data_parts import mime_parts

_config = stack_hub_config


@functools.cache
def _pods(stack: str) -> dict[str, dict]:
    """Each profile's pod, for the learner `learner`."""
    return {p["slug"]: learner_pod(_config(stack), p["slug"]) for p in _config(stack).KubeSpawner.profile_list}


def _requests(pod: dict, key: str, which: str = "requests") -> list:
    return [c["resources"].get(which, {}).get(key) for c in pod["spec"]["containers"]]


def test_the_hub_stacks_have_an_mps_and_a_time_slicing_lab():
    sharing = {lab.sharing for s in HUB_STACKS for lab in rendered(s).run.stack.settings.labs.values()}
    assert {"mps", "timeSlicing"} <= sharing


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_spawn_page_offers_one_profile_per_lab_only(stack):
    labs = rendered(stack).run.stack.settings.labs
    assert [p["slug"] for p in _config(stack).KubeSpawner.profile_list] == [
        n for n, lab in labs.items() if lab.on_spawn_page
    ]
    assert rendered(stack).run.outputs["jupyterhub"]["profiles"] == list(_pods(stack))


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_a_learner_pod_requests_and_limits_one_gpu_slice(stack):
    for lab_name, pod in _pods(stack).items():
        asked = [quantity(str(q)) for q in _requests(pod, GPU_RESOURCE) if q is not None]
        limited = [quantity(str(q)) for q in _requests(pod, GPU_RESOURCE, "limits") if q is not None]
        assert (asked, limited) == ([1], [1]), lab_name
        assert not [c for c in pod["spec"].get("initContainers") or [] if GPU_RESOURCE in str(c)], lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_no_learner_code_runs_before_the_walls_gate_lets_the_server_start(stack):
    # The pod KubeSpawner builds (which formats every string of an init container) runs the gate's program as written,
    # first, from the learner's own image, and asks the hub where the hub's config says learners reach it.
    hub = _config(stack).JupyterHub.hub_connect_url
    for lab_name, pod in _pods(stack).items():
        (gate,) = pod["spec"]["initContainers"]
        (notebook,) = pod["spec"]["containers"]
        assert gate["name"] == walls_gate.NAME, lab_name
        assert gate["image"] == notebook["image"], lab_name
        assert gate["command"] == walls_gate.command(), lab_name
        assert gate["command"][2] == walls_gate.CHECK.read_text(), lab_name
        host, port = gate["command"][3:5]
        assert hub == f"http://{host}:{port}", lab_name
        assert gate["terminationMessagePath"] == gate["command"][-1], lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_walls_gate_changes_no_request_of_the_pod_and_holds_no_gpu(stack):
    for lab_name, pod in _pods(stack).items():
        spec = pod["spec"]
        (gate,) = spec["initContainers"]
        without = karpenter_requests({"containers": spec["containers"]})
        assert karpenter_requests(spec) == without, lab_name
        assert GPU_RESOURCE in without, lab_name
        assert set(gate["resources"]["requests"]) == {"cpu", "memory"}, lab_name
        # A template gets no defaults from its limits; a pod with requests equal to limits keeps its QoS class.
        assert gate["resources"]["limits"] == gate["resources"]["requests"], lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_walls_gate_runs_as_the_restricted_profile_allows(stack):
    for lab_name, pod in _pods(stack).items():
        problems = restricted_problems(pod["spec"])
        assert [p for p in problems if p.startswith(f"{walls_gate.NAME}:")] == [], lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_a_learner_pod_lands_tolerated_on_its_labs_nodes_only(stack):
    r = rendered(stack)
    pools = lab_nodes(r.manifests())
    for lab_name, pod in _pods(stack).items():
        spec = pod["spec"]
        assert any(tolerates(t, GPU_TAINT) for t in spec["tolerations"]), lab_name
        for node in pools[lab_name]:
            assert unschedulable_because(spec, node) is None, node.name
        elsewhere = [n for name, nodes in pools.items() if name != lab_name for n in nodes] + system_nodes(r.run)
        assert all(unschedulable_because(spec, node) for node in elsewhere), lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_a_learner_pod_asks_the_labs_requests_which_fit_a_seat(stack):
    labs = rendered(stack).run.stack.settings.labs
    for lab_name, pod in _pods(stack).items():
        lab = labs[lab_name]
        share = seat_share(lab.node_shares)
        for which in ("requests", "limits"):
            (cpu,) = _requests(pod, "cpu", which)
            (memory,) = _requests(pod, "memory", which)
            assert quantity(str(cpu)) == quantity(lab.learner_requests["cpu"]), (lab_name, which)
            assert quantity(str(memory)) == quantity(lab.learner_requests["memory"]), (lab_name, which)
            assert quantity(str(cpu)) * 1000 <= share.cpu_millis, lab_name
            assert quantity(str(memory)) <= share.memory_mib * 2**20, lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_mps_learners_run_as_the_one_uid_their_daemon_serves(stack):
    labs = rendered(stack).run.stack.settings.labs
    mps = [name for name in _pods(stack) if labs[name].sharing == "mps" and labs[name].slices_per_gpu > 1]
    for lab_name in mps:
        for user in ("ada", "grace"):
            (container,) = learner_pod(_config(stack), lab_name, user)["spec"]["containers"]
            assert container["securityContext"]["runAsUser"] == MPS_LEARNER_UID, (lab_name, user)


def test_an_mps_labs_uid_is_its_profiles_not_the_hubs_default():
    # The chart's singleuser.uid is 1000 too, so the test above alone would pass without the profile's override: give
    # the hub another default, as a stack's chart values could, and the MPS learners must still share the lab's UID.
    stack = next(
        s for s in HUB_STACKS if any(lab.sharing == "mps" for lab in rendered(s).run.stack.settings.labs.values())
    )
    config = copy.deepcopy(_config(stack))
    config.KubeSpawner.uid = MPS_LEARNER_UID + 1
    labs = rendered(stack).run.stack.settings.labs
    for lab_name in _pods(stack):
        (container,) = learner_pod(config, lab_name)["spec"]["containers"]
        expected = MPS_LEARNER_UID if labs[lab_name].sharing == "mps" else MPS_LEARNER_UID + 1
        assert container["securityContext"]["runAsUser"] == expected, lab_name


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_learner_pods_go_to_the_charts_user_scheduler(stack):
    schedulers = {p["spec"]["schedulerName"] for p in _pods(stack).values()}
    deployments = {o["metadata"]["name"] for o in rendered(stack).chart(RELEASE) if o["kind"] == "Deployment"}
    assert len(schedulers) == 1
    assert schedulers <= {f"{RELEASE}-{name}" for name in deployments}


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_authenticator_knows_every_setting_the_hub_gives_it(stack):
    config = _config(stack)
    cls = authenticator_class(config.JupyterHub.authenticator_class)
    section = config.get(cls.__name__, {})
    settable = cls.class_traits(config=True)
    assert sorted(set(section) - set(settable)) == []
    assert (rendered(stack).run.stack.settings.jupyterhub.auth.type == "dummy") == (
        cls.__name__ == "DummyAuthenticator"
    )


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_idle_culler_runs_with_the_stacks_timeout_and_ages(stack):
    culling = rendered(stack).run.stack.settings.jupyterhub.culling
    (service,) = [s for s in _config(stack).JupyterHub.services if s["name"] == "jupyterhub-idle-culler"]
    arguments = dict(a.removeprefix("--").split("=", 1) for a in service["command"] if a.startswith("--") and "=" in a)
    assert arguments["timeout"] == str(seconds(culling.idle_timeout))
    assert arguments["cull-every"] == str(seconds(culling.every))
    assert arguments.get("max-age") == (str(seconds(culling.max_age)) if culling.max_age else None)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_outputs_name_hub_address_profiles_and_pod_requests(stack):
    r = rendered(stack)
    hub = r.run.stack.settings.jupyterhub
    assert r.run.outputs["jupyterhub"]["address"] == f"https://{hub.host}/"
    for lab_name, pod in _pods(stack).items():
        (cpu,), (memory,) = _requests(pod, "cpu"), _requests(pod, "memory")
        output = r.run.outputs["labs"][lab_name]
        assert quantity(output["learnerCpu"]) == quantity(str(cpu))
        assert quantity(output["learnerMemory"]) == quantity(str(memory))


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hub_waits_for_a_new_node_as_long_as_a_warmup(stack):
    # JupyterHub's Spawner gives up after 60 s by default and the chart after 300 s: less than a cold GPU node takes.
    assert _config(stack).KubeSpawner.start_timeout >= seconds(DEFAULT_WARMUP)


def _scheduling(spec: dict) -> tuple:
    """What decides where a pod runs and how much of a node it takes: node selector, tolerations, requests."""
    (container,) = spec["containers"]
    requests = {key: quantity(str(value)) for key, value in container["resources"]["requests"].items()}
    tolerations = sorted(json.dumps(t, sort_keys=True) for t in spec.get("tolerations") or [])
    return spec.get("nodeSelector"), tolerations, requests


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hubs_learner_pods_are_the_planners_learners(stack):
    # The planner (planner/) places labs.<lab>.learnerPodSpec; the hub must start pods it would place the same way.
    labs = rendered(stack).run.outputs["labs"]
    for lab_name, pod in _pods(stack).items():
        assert _scheduling(pod["spec"]) == _scheduling(labs[lab_name]["learnerPodSpec"]), lab_name


def _prepulled(stack: str) -> dict[str, list[str]]:
    """The images each lab's nodes pull as they boot, in order, from the lab's EC2NodeClass user data."""
    pulled = {}
    for node_class in (o for o in rendered(stack).manifests() if o.get("kind") == "EC2NodeClass"):
        parts = mime_parts(node_class["spec"]["userData"])
        scripts = [p.get_payload() for p in parts if p.get_content_type() == "text/x-shellscript"]
        lines = [line for script in scripts for line in script.splitlines() if line.startswith("images=(")]
        images = [shlex.split(line.removeprefix("images=(").removesuffix(")")) for line in lines]
        pulled[node_class["metadata"]["name"]] = images[0] if images else []  # a lab with no image has no pre-pull
    return pulled


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_a_learners_image_is_the_first_its_labs_nodes_pull(stack):
    # A learner on a node that is still pulling waits for that one pull, not for the lab's other prepullImages.
    pulled = _prepulled(stack)
    for lab_name, pod in _pods(stack).items():
        (image,) = {c["image"] for c in pod["spec"]["containers"]}
        assert pulled[lab_name][0] == image, lab_name
