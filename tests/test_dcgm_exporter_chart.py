"""gpulab's dcgm-exporter DaemonSet is what NVIDIA's chart at 4.5.3-4.8.2 installs with the same settings: `helm
template` of the chart from the upstream reference data (`make upstream`), its DaemonSet's pod compared with
gpulab's, and its access to the API server (with `kubernetes.enablePodUID`, the chart's way to a pod's UID) with
gpulab's narrower one."""

import pytest

from components.metrics import dcgm_exporter
from domain.upstream.fetch import FOLDERS
from domain.upstream.versions import DCGM_EXPORTER_IMAGE
from render import charts
from tests.support.rendered import load_objects
from tests.support.upstream_data import UPSTREAM, absent

CHART = UPSTREAM / FOLDERS["dcgm-exporter"] / "charts" / "dcgm-exporter"


def chart_values() -> dict:
    """gpulab's settings as the chart's values."""
    ours = dcgm_exporter.pod_spec()
    (container,) = ours["containers"]
    chart_env = {"DCGM_EXPORTER_KUBERNETES", "DCGM_EXPORTER_LISTEN", "NODE_NAME"}  # the chart sets these itself
    return {
        "fullnameOverride": dcgm_exporter.NAME,
        # The chart mounts the token and makes its role on pods only with pod UIDs or labels (templates/
        # serviceaccount.yaml:27, daemonset.yaml:61, clusterrole.yaml:1); the per-pod path needs the UIDs.
        "kubernetes": {"enablePodUID": True},
        "arguments": container["args"],
        "hostPID": ours["hostPID"],
        "hostNetwork": ours["hostNetwork"],
        # null removes a default of the chart's (its SYS_ADMIN), as in a values file.
        "securityContext": container["securityContext"] | {"capabilities": {"add": None, "drop": ["ALL"]}},
        # No CPU limit: a throttled exporter answers the scraper late.
        "resources": container["resources"] | {"limits": {"cpu": None, **container["resources"]["limits"]}},
        "nodeSelector": ours["nodeSelector"],
        "affinity": ours["affinity"],
        "tolerations": ours["tolerations"],
        "extraEnv": [e for e in container["env"] if e["name"] not in chart_env],
        "extraConfigMapVolumes": [v for v in ours["volumes"] if "configMap" in v],
        "extraVolumeMounts": [m for m in container["volumeMounts"] if m["name"] == "counters"],
        "service": {"enable": False},
        "serviceMonitor": {"enabled": False},
    }


# Set by the chart's enablePodUID, not by gpulab: it only adds pod_uid to the fields copied from the whole GPU
# (FB_FREE, XID; NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go:385-387). The per-pod
# GPU_UTIL and FB_USED, all gpulab's rules read, carry pod_uid whatever it says (kubernetes.go:243).
CHART_ONLY_ENV = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"


def chart_objects() -> list[dict]:
    if not (CHART / "Chart.yaml").is_file():
        pytest.skip(absent(CHART))
    try:
        helm = charts.helm_binary()
    except charts.Unavailable as missing:
        pytest.skip(str(missing))
    release = charts.Release(dcgm_exporter.NAME, "dcgm-exporter", None, "4.8.2", "gpu-metrics", chart_values(), True)
    return load_objects(charts.template(release, "1.34", helm, CHART))


def chart_pod() -> dict:
    (daemonset,) = [o for o in chart_objects() if o["kind"] == "DaemonSet"]
    return daemonset["spec"]["template"]["spec"]


def by_name(items: list[dict]) -> dict:
    return {item["name"]: item for item in items}


def test_the_charts_daemonset_runs_the_same_exporter_as_gpulabs():
    theirs, ours = chart_pod(), dcgm_exporter.pod_spec()
    (their_container,), (our_container,) = theirs["containers"], ours["containers"]
    assert their_container["image"] == our_container["image"] == DCGM_EXPORTER_IMAGE
    for key in ("args", "securityContext", "resources", "ports", "livenessProbe", "readinessProbe"):
        assert their_container[key] == our_container[key], key
    their_env = by_name(their_container["env"])
    assert their_env.pop(CHART_ONLY_ENV) == {"name": CHART_ONLY_ENV, "value": "true"}
    assert their_env == by_name(our_container["env"])
    assert by_name(their_container["volumeMounts"]) == by_name(our_container["volumeMounts"])
    keys = ("hostPID", "hostNetwork", "dnsPolicy", "priorityClassName", "nodeSelector", "affinity", "tolerations")
    keys += ("serviceAccountName",)
    for key in (*keys, "automountServiceAccountToken"):
        assert theirs[key] == ours[key], key
    assert by_name(theirs["volumes"]) == by_name(ours["volumes"])


def test_the_exporter_reads_pods_as_the_chart_with_fewer_rights():
    """The same token and binding as the chart's with pod UIDs, and a role that grants a part of the chart's: list and
    watch on pods, without its get and resourceslices (which only DRA reads: components/metrics/dcgm_exporter.py)."""
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in chart_objects()}
    account = theirs[("ServiceAccount", dcgm_exporter.NAME)]
    assert (
        account["automountServiceAccountToken"]
        is dcgm_exporter.service_account("gpu-metrics")["automount_service_account_token"]
        is True
    )
    ours = dcgm_exporter.cluster_role()
    (their_rule,) = theirs[("ClusterRole", ours["metadata"]["name"])]["rules"]
    (our_rule,) = ours["rules"]
    for key in ("apiGroups", "resources", "verbs"):
        assert set(our_rule[key]) < set(their_rule[key]), key
    binding = theirs[("ClusterRoleBinding", ours["metadata"]["name"])]
    our_binding = dcgm_exporter.cluster_role_binding("gpu-metrics")
    assert (binding["roleRef"], binding["subjects"]) == (our_binding["roleRef"], our_binding["subjects"])
