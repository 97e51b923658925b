"""What the rendered charts must wire together for a stack to work, as lists of problems (empty when it holds).

Expectations come from the stack's configuration and the program's own constants, never from a hand-kept list, so the
checks hold for any valid stack. They are functions of the objects, so that tests can feed them a doctored render and
show that each check catches its defect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from components.labels import DEVICE_PLUGIN_CONFIG_LABEL, GPU_RESOURCE
from domain.capacity.sharing import DEFAULT_PROFILE
from render import harness
from tests.support.nodes import lab_nodes, system_nodes
from tests.support.scheduling import Node, unschedulable_because

POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
CONTROLLER = "gpulab:karpenter:Controller"
CONFIG_MANAGER = "config-manager"
DEVICE_PLUGIN_COMMAND = "nvidia-device-plugin"
MPS_DAEMON_COMMAND = "mps-control-daemon"

Objects = list[dict[str, Any]]


def one(objects: Objects, kind: str, what: str, **where: Any) -> dict[str, Any]:
    """The one object of the kind (and metadata), `what` saying in the failure which one it should have been."""
    matches = [o for o in objects if o["kind"] == kind and all(o["metadata"].get(k) == v for k, v in where.items())]
    assert len(matches) == 1, f"expected one {kind} ({what}) {where or ''}, found {len(matches)}"
    return matches[0]


def _env(container: Mapping[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _placement_problems(
    what: str, pod_spec: Mapping[str, Any], allowed: Iterable[Node], forbidden: Iterable[Node]
) -> list[str]:
    problems = [
        f"{what} cannot schedule on {node.name}: {reason}"
        for node in allowed
        if (reason := unschedulable_because(pod_spec, node)) is not None
    ]
    problems += [
        f"{what} can schedule on {node.name}" for node in forbidden if unschedulable_because(pod_spec, node) is None
    ]
    return problems


def controller_problems(run: harness.Run, objects: Objects, manifests: Objects) -> list[str]:
    """The karpenter release's controller: feature gates, cluster, queue, identity and placement."""
    settings = run.stack.settings
    deployment = one(objects, "Deployment", "the Karpenter controller")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if "CLUSTER_NAME" in _env(c)]
    env = _env(container)
    gates = dict(gate.split("=", 1) for gate in (env.get("FEATURE_GATES") or "").split(",") if gate)
    problems = []
    # NodeOverlays are only written for labs that share GPUs, and Karpenter ignores them unless the gate is on.
    expected_overlay = str(any(lab.slices_per_gpu > 1 for lab in settings.labs.values())).lower()
    if gates.get("NodeOverlay") != expected_overlay:
        problems.append(f"FEATURE_GATES has NodeOverlay={gates.get('NodeOverlay')}, the labs need {expected_overlay}")
    if env.get("CLUSTER_NAME") != settings.cluster.name:
        problems.append(f"CLUSTER_NAME is {env.get('CLUSTER_NAME')!r}, the cluster is {settings.cluster.name!r}")
    # The name the program gives the queue, not what the mock answers for it.
    queue = run.one("aws:sqs/queue:Queue", "karpenter-interruption").inputs["name"]
    if env.get("INTERRUPTION_QUEUE") != queue:
        problems.append(f"INTERRUPTION_QUEUE is {env.get('INTERRUPTION_QUEUE')!r}, the queue is {queue!r}")

    (association,) = [r.inputs for r in run.of_type(POD_IDENTITY) if (r.parent or "").startswith(f"{CONTROLLER}::")]
    namespace = deployment["metadata"]["namespace"]
    account = pod.get("serviceAccountName")
    if (account, namespace) != (association["serviceAccount"], association["namespace"]):
        problems.append(
            f"the controller runs as {namespace}/{account}, Pod Identity gives its role to "
            f"{association['namespace']}/{association['serviceAccount']}"
        )
    if not any(o["kind"] == "ServiceAccount" and o["metadata"].get("name") == account for o in objects):
        problems.append(f"the chart creates no ServiceAccount {account!r}")

    pools = [node for nodes in lab_nodes(manifests).values() for node in nodes]
    return problems + _placement_problems("the Karpenter controller", pod, system_nodes(run), pools)


def profile_replicas(profile_text: str) -> int:
    """How many pods share one GPU under a device plugin profile: its nvidia.com/gpu replicas, 1 if it shares none."""
    sharing = (yaml.safe_load(profile_text) or {}).get("sharing") or {}
    replicas = [
        resource["replicas"]
        for strategy in sharing.values()
        for resource in (strategy or {}).get("resources", [])
        if resource["name"] == GPU_RESOURCE
    ]
    assert len(replicas) <= 1, f"a profile shares {GPU_RESOURCE} by several strategies: {sharing}"
    return replicas[0] if replicas else 1


def _daemon_set_pod(objects: Objects, command: str) -> dict[str, Any]:
    """The pod spec of the one DaemonSet whose containers run `command`."""
    daemon_sets = [
        o
        for o in objects
        if o["kind"] == "DaemonSet"
        and any(c.get("command") == [command] for c in o["spec"]["template"]["spec"]["containers"])
    ]
    assert len(daemon_sets) == 1, f"expected one DaemonSet running {command}, found {len(daemon_sets)}"
    return daemon_sets[0]["spec"]["template"]["spec"]


def mps_daemon_problems(run: harness.Run, objects: Objects, manifests: Objects) -> list[str]:
    """The chart's MPS control daemon runs on the nodes of MPS labs, whose plugin waits for it, and on no other node.

    The chart always renders it; without it on an MPS lab's node the plugin never advertises a GPU, and on any other
    node it would put the GPUs in EXCLUSIVE_PROCESS mode under time-sliced learners.
    """
    labs = run.stack.settings.labs
    pod = _daemon_set_pod(objects, MPS_DAEMON_COMMAND)
    pools = lab_nodes(manifests)
    mps = [node for name, nodes in pools.items() if labs[name].sharing == "mps" for node in nodes]
    others = [node for name, nodes in pools.items() if labs[name].sharing != "mps" for node in nodes]
    return _placement_problems("the MPS control daemon", pod, mps, [*others, *system_nodes(run)])


def device_plugin_problems(run: harness.Run, objects: Objects, manifests: Objects) -> list[str]:
    """The nvidia-device-plugin release: one profile per lab with its slices, picked by the node label, on lab nodes."""
    labs = run.stack.settings.labs
    pod = _daemon_set_pod(objects, DEVICE_PLUGIN_COMMAND)
    managers = [c for c in pod["containers"] if c.get("command") == [CONFIG_MANAGER]]
    if not managers:
        return ["the device plugin runs no config manager: a node's profile label would be ignored"]
    (manager,) = managers
    env = _env(manager)
    problems = []
    if env.get("ONESHOT") != "false":
        problems.append("the config manager runs once, so relabelled nodes keep their old profile")
    if env.get("NODE_LABEL") != DEVICE_PLUGIN_CONFIG_LABEL:
        problems.append(
            f"the config manager reads {env.get('NODE_LABEL')!r}, lab nodes set {DEVICE_PLUGIN_CONFIG_LABEL!r}"
        )
    if env.get("DEFAULT_CONFIG") != DEFAULT_PROFILE:
        problems.append(f"the default profile is {env.get('DEFAULT_CONFIG')!r}, not {DEFAULT_PROFILE!r}")

    # The profiles the config manager chooses from: the ConfigMap mounted where it looks for them.
    mounts = {m["mountPath"]: m["name"] for m in manager.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    config_map = volumes[mounts[str(env.get("CONFIG_FILE_SRCDIR"))]]["configMap"]["name"]
    profiles = one(objects, "ConfigMap", "the device plugin profiles", name=config_map)["data"]
    if set(profiles) != {DEFAULT_PROFILE, *labs}:
        problems.append(f"profiles {sorted(profiles)}, expected {DEFAULT_PROFILE!r} and one per lab {sorted(labs)}")

    pools = lab_nodes(manifests)
    for lab_name, lab in labs.items():
        for node in pools[lab_name]:
            # What the config manager does on this node: the profile its label names, else the default.
            chosen = node.labels.get(str(env.get("NODE_LABEL")), str(env.get("DEFAULT_CONFIG")))
            if chosen not in profiles:
                problems.append(f"{node.name} selects profile {chosen!r}, which the ConfigMap does not have")
            elif (replicas := profile_replicas(profiles[chosen])) != lab.slices_per_gpu:
                problems.append(
                    f"{node.name} gets {replicas} replicas per GPU, lab {lab_name} has {lab.slices_per_gpu}"
                )
    every_pool_node = [node for nodes in pools.values() for node in nodes]
    return problems + _placement_problems("the device plugin", pod, every_pool_node, system_nodes(run))


# The jupyterhub chart's own pods (zero-to-jupyterhub-k8s 4.4.0 templates): they belong on the system nodes.
HUB_DEPLOYMENTS = ("hub", "proxy", "user-scheduler")


def hub_problems(run: harness.Run, objects: Objects, manifests: Objects) -> list[str]:
    """The jupyterhub release: its pods on the system nodes only, learners packed by GPU slices too, no placeholders
    or image pullers, the hub's database on the encrypted gp3 StorageClass, HTTPS only at the load balancer."""
    problems = []
    pools = [node for nodes in lab_nodes(manifests).values() for node in nodes]
    for name in HUB_DEPLOYMENTS:
        pod = one(objects, "Deployment", "a JupyterHub component", name=name)["spec"]["template"]["spec"]
        problems += _placement_problems(f"the {name} pod", pod, system_nodes(run), pools)

    config = yaml.safe_load(
        one(objects, "ConfigMap", "the user-scheduler", name="user-scheduler")["data"]["config.yaml"]
    )
    fit = [
        p["args"]["scoringStrategy"]
        for profile in config["profiles"]
        for p in profile.get("pluginConfig", [])
        if p["name"] == "NodeResourcesFit"
    ]
    if [(s["type"], GPU_RESOURCE in {r["name"] for r in s["resources"]}) for s in fit] != [("MostAllocated", True)]:
        problems.append(f"the user-scheduler does not pack learners by {GPU_RESOURCE} (MostAllocated): {fit}")

    unwanted = [o["metadata"]["name"] for o in objects if o["kind"] in ("StatefulSet", "DaemonSet")]
    if unwanted:
        problems.append(f"user placeholders or image pullers are installed: {unwanted}")

    (claim,) = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    classes = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "StorageClass"}
    wanted = classes.get(claim["spec"].get("storageClassName"))
    if wanted is None:
        problems.append(
            f"the hub's database claims StorageClass {claim['spec'].get('storageClassName')!r}, not the stack's"
        )
    elif (wanted.get("volumeBindingMode"), wanted["parameters"].get("encrypted")) != ("WaitForFirstConsumer", "true"):
        problems.append(f"StorageClass {wanted['metadata']['name']} is not encrypted with WaitForFirstConsumer")

    public = one(objects, "Service", "the proxy's public Service", name="proxy-public")
    ports = [(p["port"], p["targetPort"]) for p in public["spec"]["ports"]]
    # 443 to the proxy's TLS port, first (the load balancer health-checks the first port), and 80 to its redirect.
    if public["spec"]["type"] != "LoadBalancer" or ports != [(443, "https"), (80, "http")]:
        problems.append(
            f"proxy-public is a {public['spec']['type']} with ports {ports}, not HTTPS on 443 and 80 to the redirect"
        )
    return problems
