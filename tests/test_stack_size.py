"""How many labs one stack holds: every lab's device plugin profile lands in one ConfigMap and in one Helm Secret.

The chart copies `config.map` into one ConfigMap (templates/configmap.yml: each profile as a `|-` block, so without its
final newline), and Helm keeps the release, values and rendered manifest included, in one Secret: JSON, gzip at best
compression, base64 (helm pkg/storage/driver/util.go, encodeRelease). The API server refuses a ConfigMap or a Secret
whose values total more than 1 MiB (ValidateConfigMap and ValidateSecret, kubernetes
pkg/apis/core/validation/validation.go, core.MaxSecretSize), and etcd refuses a request above 1.5 MiB (its
--max-request-bytes default), which the ConfigMap as stored must fit with its keys and its managedFields, where each key
appears once more. The worst case is the longest lab names, random so that they do not compress, and the largest
profiles.
"""

import base64
import gzip
import json
import random
import string

import pytest
import yaml

import domain.stack
from components.nvidia.device_plugin import RELEASE, helm_values
from domain.stack.limits import MAX_LABS
from domain.stack.model import Lab, NvidiaDevicePlugin
from domain.upstream.versions import NVIDIA_DEVICE_PLUGIN_CHART_VERSION
from render.object_size import MAX_DATA_BYTES, data_bytes
from tests.conftest import BASE, ROOT, run_values, stack_values
from tests.support import upstream_data

ETCD_MAX_REQUEST = 3 * 1024 * 1024 // 2  # etcd's --max-request-bytes default: 1.5 MiB
CHART = upstream_data.NVIDIA_DEVICE_PLUGIN / "charts" / "nvidia-device-plugin"
# The largest profile: time-slicing with two-digit replicas.
WORST_LAB = Lab.model_validate(
    {"instanceTypes": ["g4dn.12xlarge"], "slicesPerGpu": 48, "maxGpus": 4, "ami": "al2023@latest"}
)


def worst_case_values(labs: int) -> dict:
    rng = random.Random(labs)
    alphabet = string.ascii_lowercase + string.digits + "-"
    names = {rng.choice(string.ascii_lowercase) + "".join(rng.choices(alphabet, k=61)) + "0" for _ in range(labs)}
    assert len(names) == labs
    return helm_values(NvidiaDevicePlugin(), dict.fromkeys(names, WORST_LAB))


def rendered_config_map(values: dict) -> dict:
    """The chart's ConfigMap as Helm renders it into the release's manifest."""
    version = NVIDIA_DEVICE_PLUGIN_CHART_VERSION
    labels = {
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/name": "nvidia-device-plugin",
        "app.kubernetes.io/version": version,
        "helm.sh/chart": f"nvidia-device-plugin-{version}",
    }
    metadata = {"name": f"{RELEASE}-configs", "namespace": NvidiaDevicePlugin().namespace, "labels": labels}
    data = {name: profile.rstrip("\n") for name, profile in values["config"]["map"].items()}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def stored_config_map(values: dict) -> dict:
    """The same ConfigMap as the API server stores it: with Helm's annotations, and the fields Helm set."""
    rendered = rendered_config_map(values)
    annotations = {
        "meta.helm.sh/release-name": RELEASE,
        "meta.helm.sh/release-namespace": NvidiaDevicePlugin().namespace,
    }
    # FieldsV1 names every key the manager set: each data key appears here once more.
    fields = {
        "f:data": {".": {}} | {f"f:{key}": {} for key in rendered["data"]},
        "f:metadata": {
            "f:annotations": {".": {}} | {f"f:{key}": {} for key in annotations},
            "f:labels": {".": {}} | {f"f:{key}": {} for key in rendered["metadata"]["labels"]},
        },
    }
    managed = {"manager": "helm", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z"}
    metadata = rendered["metadata"] | {
        "uid": "00000000-0000-0000-0000-000000000000",
        "resourceVersion": "12345678",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": annotations,
        "managedFields": [managed | {"fieldsType": "FieldsV1", "fieldsV1": fields}],
    }
    return rendered | {"metadata": metadata}


def config_map_stored_bytes(values: dict) -> int:
    # JSON is larger than the protobuf etcd stores, so this errs on the safe side.
    return len(json.dumps(stored_config_map(values), separators=(",", ":")).encode())


def fits(labs: int) -> bool:
    values = worst_case_values(labs)
    return (
        data_bytes(rendered_config_map(values)) <= MAX_DATA_BYTES
        and config_map_stored_bytes(values) <= ETCD_MAX_REQUEST
    )


def test_max_labs_is_the_most_whose_plugin_config_map_fits():
    assert fits(MAX_LABS)
    assert not fits(MAX_LABS + 1), "more labs fit now: set MAX_LABS to the largest count that fits"


@pytest.mark.skipif(not CHART.is_dir(), reason=upstream_data.absent(CHART))
def test_the_largest_stack_fits_helms_release_secret():
    values = worst_case_values(MAX_LABS)
    chart_files = [p for p in sorted(CHART.rglob("*")) if p.is_file() and p.suffix != ".tgz"]
    release = {
        "name": RELEASE,
        "chart": {"files": [{"name": str(p), "data": base64.b64encode(p.read_bytes()).decode()} for p in chart_files]},
        "config": values,
        # The ConfigMap stands in for the manifest; the chart's other objects add a few kB to it.
        "manifest": yaml.safe_dump(rendered_config_map(values)),
    }
    secret = base64.b64encode(gzip.compress(json.dumps(release).encode(), compresslevel=9))
    assert len(secret) <= MAX_DATA_BYTES


def test_one_lab_more_than_fits_is_refused_naming_the_limit():
    lab = BASE["gpulab:labs"]["intro"]
    values = stack_values(**{"gpulab:labs": {f"lab-{i}": lab for i in range(MAX_LABS + 1)}})
    with pytest.raises(
        domain.stack.ConfigError, match=rf"^gpulab:labs: at most {MAX_LABS} labs fit in one stack, got "
    ):
        run_values(values)


def test_the_configuration_reference_states_the_limit():
    assert f"A stack holds at most {MAX_LABS} labs." in (ROOT / "docs" / "configuration.md").read_text()
