"""One source of truth: everything about a lab's GPU sharing agrees with its slicesPerGpu, in every stack."""

import pytest
import yaml

from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from tests.conftest import STACK_FILES, run_stack_file, run_values
from tests.support.scheduling import Node, unschedulable_because
from tests.support.synthetic import SYNTHETIC

CASES = [(path.name, lambda path=path: run_stack_file(path)) for path in STACK_FILES] + [
    (f"synthetic-{name}", lambda values=values: run_values(values)) for name, values in SYNTHETIC.items()
]


@pytest.fixture(scope="module", params=CASES, ids=[name for name, _ in CASES])
def run(request):
    return request.param[1]()


def manifests(run, kind):
    return [r.inputs for r in run.resources if r.type.startswith("kubernetes:") and r.inputs.get("kind") == kind]


def test_every_lab_agrees_with_its_slices_per_gpu(run):
    labs = run.stack.settings.labs
    plugin = run.one("kubernetes:helm.sh/v3:Release", "nvidia-device-plugin").inputs["values"]
    profiles = {name: yaml.safe_load(text) for name, text in plugin["config"]["map"].items()}
    assert plugin["config"]["default"] in profiles
    pools = {pool["metadata"]["name"]: pool["spec"] for pool in manifests(run, "NodePool")}
    overlays = manifests(run, "NodeOverlay")
    assert sorted(pools) == sorted(labs)

    for name, lab in labs.items():
        pool = pools[name]
        labels = pool["template"]["metadata"]["labels"]

        profile = profiles[labels["nvidia.com/device-plugin.config"]]
        # One strategy per profile, the lab's own: with both, the plugin would silently use MPS.
        sharing = profile.get("sharing", {lab.sharing: {"resources": [{"replicas": 1}]}})
        assert list(sharing) == [lab.sharing], name
        assert [r["replicas"] for r in sharing[lab.sharing]["resources"]] == [lab.slices_per_gpu], name
        # The plugin of an MPS lab waits for the MPS control daemon, which runs only where this label is.
        assert (labels.get("nvidia.com/mps.capable") == "true") is (lab.sharing == "mps"), name

        assert pool["limits"]["nvidia.com/gpu"] == str(lab.max_gpus * lab.slices_per_gpu), name

        lab_overlays = {
            int(req["values"][0]): overlay["spec"]["capacity"]["nvidia.com/gpu"]
            for overlay in overlays
            if {"key": "gpulab.dev/lab", "operator": "In", "values": [name]} in overlay["spec"]["requirements"]
            for req in overlay["spec"]["requirements"]
            if req["key"] == "karpenter.k8s.aws/instance-gpu-count"
        }
        gpu_counts = {GPU_INSTANCE_TYPES[t].gpus for t in lab.instance_types}
        if lab.slices_per_gpu == 1:
            assert lab_overlays == {}, name
        else:
            assert lab_overlays == {n: str(lab.slices_per_gpu * n) for n in gpu_counts}, name

        # The plugin's placement values are shaped like a pod spec's.
        assert unschedulable_because(plugin, Node(name, labels, pool["template"]["spec"]["taints"])) is None, name


def test_synthetics_cover_1_4_8_gpus_both_archs_and_no_sharing():
    labs = [lab for values in SYNTHETIC.values() for lab in values["gpulab:labs"].values()]
    types = [GPU_INSTANCE_TYPES[t] for lab in labs for t in lab["instanceTypes"]]
    assert {1, 4, 8} <= {t.gpus for t in types}
    assert {t.architecture for t in types} == {"amd64", "arm64"}
    assert {lab["slicesPerGpu"] == 1 for lab in labs} == {True, False}


def test_a_synthetic_stack_mixes_mps_sliced_and_unshared_labs():
    labs = SYNTHETIC["mps-beside-time-slicing"]["gpulab:labs"].values()
    assert {(lab.get("sharing", "timeSlicing"), lab["slicesPerGpu"] > 1) for lab in labs} == {
        ("mps", True),
        ("timeSlicing", True),
        ("timeSlicing", False),
    }
