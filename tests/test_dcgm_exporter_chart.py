"""gpulab's dcgm-exporter DaemonSet is what NVIDIA's chart at 4.5.3-4.8.2 installs with the same settings: `helm
template` of the chart from the upstream reference data (`make upstream`), its DaemonSet's pod compared with
gpulab's."""

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
        "arguments": container["args"],
        "hostPID": ours["hostPID"],
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


def chart_pod() -> dict:
    if not (CHART / "Chart.yaml").is_file():
        pytest.skip(absent(CHART))
    try:
        helm = charts.helm_binary()
    except charts.Unavailable as missing:
        pytest.skip(str(missing))
    release = charts.Release(dcgm_exporter.NAME, "dcgm-exporter", None, "4.8.2", "gpu-metrics", chart_values(), True)
    objects = load_objects(charts.template(release, "1.34", helm, CHART))
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return daemonset["spec"]["template"]["spec"]


def by_name(items: list[dict]) -> dict:
    return {item["name"]: item for item in items}


def test_the_charts_daemonset_runs_the_same_exporter_as_gpulabs():
    theirs, ours = chart_pod(), dcgm_exporter.pod_spec()
    (their_container,), (our_container,) = theirs["containers"], ours["containers"]
    assert their_container["image"] == our_container["image"] == DCGM_EXPORTER_IMAGE
    for key in ("args", "securityContext", "resources", "ports", "livenessProbe", "readinessProbe"):
        assert their_container[key] == our_container[key], key
    assert by_name(their_container["env"]) == by_name(our_container["env"])
    assert by_name(their_container["volumeMounts"]) == by_name(our_container["volumeMounts"])
    for key in ("hostPID", "priorityClassName", "nodeSelector", "affinity", "tolerations", "serviceAccountName"):
        assert theirs[key] == ours[key], key
    assert by_name(theirs["volumes"]) == by_name(ours["volumes"])
    # The chart mounts no service account token unless it reads pod labels; gpulab's account has none to mount.
    assert theirs["automountServiceAccountToken"] is False
