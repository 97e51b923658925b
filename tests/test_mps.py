"""Labs that share GPUs through MPS: what the device plugin gets, what gpulab refuses, and what learners are told."""

import pytest
import yaml

import domain.stack
from domain.capacity.instance_types import COMPUTE_CAPABILITIES, GPU_INSTANCE_TYPES
from domain.capacity.sharing import learner_share, mps_max_clients
from reports.summary import LEARNER_LEAD_IN, summary
from tests.conftest import BASE, run_values, stack_values
from tests.support import tables
from tests.support.synthetic import SYNTHETIC

RELEASE = "kubernetes:helm.sh/v3:Release"


def with_lab(**changes):
    return stack_values(**{"gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], **changes}}})


@pytest.fixture(scope="module")
def mixed_run():
    return run_values(SYNTHETIC["mps-beside-time-slicing"])


def test_every_gpu_model_has_a_compute_capability_entry():
    assert set(COMPUTE_CAPABILITIES) == {t.gpu_model for t in GPU_INSTANCE_TYPES.values()}


@pytest.mark.parametrize(("gpu_model", "limit"), [("t4", 48), ("l40s", 48), ("b300", 48), ("v100", 16), ("a10g", 16)])
def test_mps_clients_are_48_from_cc_7_5_else_16_or_unconfirmed(gpu_model, limit):
    assert mps_max_clients(gpu_model) == limit


def test_an_mps_lab_gets_an_mps_profile_of_its_slices_only(mixed_run):
    profiles = mixed_run.one(RELEASE, "nvidia-device-plugin").inputs["values"]["config"]["map"]
    assert yaml.safe_load(profiles["isolated"])["sharing"] == {
        "mps": {
            "renameByDefault": False,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
        }
    }


@pytest.mark.parametrize(
    ("lab", "expected"),
    [
        (
            {"sharing": "mps", "slicesPerGpu": 1},
            "gpulab:labs.intro.slicesPerGpu: must be at least 2 with sharing 'mps'",
        ),
        (
            {"sharing": "mps", "slicesPerGpu": 17, "instanceTypes": ["p3dn.24xlarge"], "maxGpus": 8},
            "gpulab:labs.intro.slicesPerGpu: must be at most 16 with sharing 'mps' on p3dn.24xlarge: NVIDIA's MPS "
            "daemon serves 16 clients per GPU below compute capability 7.5, and v100 has compute capability 7.0",
        ),
        (
            {"sharing": "mps", "slicesPerGpu": 20, "instanceTypes": ["g4dn.xlarge", "g5.xlarge"]},
            "gpulab:labs.intro.slicesPerGpu: must be at most 16 with sharing 'mps' on g5.xlarge: .* gpulab cannot "
            "confirm the compute capability of a10g",
        ),
        ({"sharing": "MPS"}, "gpulab:labs.intro.sharing: must be one of 'timeSlicing' or 'mps', got 'MPS'"),
    ],
)
def test_mps_settings_the_daemon_would_refuse_are_reported(lab, expected):
    with pytest.raises(domain.stack.ConfigError, match=expected):
        run_values(with_lab(**lab))


@pytest.mark.parametrize(("instance_type", "slices"), [("g4dn.12xlarge", 48), ("g5.xlarge", 16), ("p3dn.24xlarge", 16)])
def test_mps_accepts_as_many_slices_as_the_daemon_serves(instance_type, slices):
    run = run_values(with_lab(sharing="mps", slicesPerGpu=slices, instanceTypes=[instance_type], maxGpus=8))
    assert run.outputs["labs"]["intro"]["learnerSeats"] == 8 * slices


@pytest.mark.parametrize("slices", [2, 3, 7, 16])
def test_mps_cap_never_overstates_the_share_compute_is_daemons(slices):
    for instance_type, gpu in GPU_INSTANCE_TYPES.items():
        share = learner_share("mps", slices, [instance_type])
        assert share.memory_cap_gib is not None
        low, high = share.memory_cap_gib
        assert low == high
        assert low * slices <= gpu.gpu_memory_gib < (low + 0.1) * slices, instance_type
        assert share.compute_percent == 100 // slices


@pytest.mark.parametrize(("slices", "percent"), [(2, 50), (3, 33), (6, 16), (7, 14), (15, 6), (16, 6), (48, 2)])
def test_mps_compute_share_is_floored_as_the_daemon_floors_it(slices, percent):
    # The daemon's activeThreadPercentage is 100 / replicas in integer division: 6 slices get 16%, 15 get 6%, where
    # rounding would say 17% and 7%.
    assert learner_share("mps", slices, ["g4dn.xlarge"]).compute_percent == percent


def test_a_mixed_gpu_lab_reports_its_caps_and_exports_the_least(mixed_run):
    lab = mixed_run.stack.settings.labs["isolated"]
    caps = [GPU_INSTANCE_TYPES[t].gpu_memory_gib / lab.slices_per_gpu for t in lab.instance_types]
    assert lab.learner_share.memory_cap_gib == (min(caps), max(caps))
    assert min(caps) < max(caps)
    expected = {
        "nodePool": "isolated",
        "slicesPerGpu": 4,
        "learnerSeats": 32,
        "sharing": "mps",
        "gpuMemoryCapGib": min(caps),
        "computePercent": 25,
    }
    assert mixed_run.outputs["labs"]["isolated"].items() >= expected.items()


def test_outputs_say_time_sliced_or_unshared_memory_is_uncapped(mixed_run):
    labs = mixed_run.outputs["labs"]
    assert [(labs[n]["sharing"], labs[n]["gpuMemoryCapGib"], labs[n]["computePercent"]) for n in ("turns", "solo")] == [
        ("timeSlicing", None, None),
        ("none", None, None),
    ]


def test_summary_says_what_each_learner_gets():
    run = run_values(
        stack_values(
            **{
                "gpulab:labs": {
                    "isolated": {**BASE["gpulab:labs"]["intro"], "sharing": "mps"},
                    "mixed": {
                        **BASE["gpulab:labs"]["intro"],
                        "sharing": "mps",
                        "instanceTypes": ["g4dn.xlarge", "g6e.xlarge"],
                    },
                    "turns": BASE["gpulab:labs"]["intro"],
                    "solo": {**BASE["gpulab:labs"]["intro"], "slicesPerGpu": 1},
                }
            }
        )
    )
    rows = {
        row["lab"]: (row["sharing"], row["GPU memory"], row["GPU compute"])
        for row in tables.table(summary(run), LEARNER_LEAD_IN)
    }
    # The sharing as the key takes it.
    assert rows == {
        "isolated": ("mps", "at most 5.3 GiB", "33%"),
        "mixed": ("mps", "at most 5.3-14.6 GiB (by GPU model)", "33%"),
        "turns": ("timeSlicing", "shared, uncapped", "in turns"),
        "solo": ("none (slicesPerGpu 1)", "the whole GPU's", "all of it"),
    }


def smoke_command(lab):
    run = run_values(with_lab(smokeTest=True, **lab))
    (deployment,) = run.of_type("kubernetes:apps/v1:Deployment")
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    return container["command"]


def test_mps_smoke_prints_expected_cap_asks_daemon_for_real_one():
    shell, flag, script = smoke_command({"sharing": "mps"})
    assert (shell, flag) == ("sh", "-c")
    assert script.startswith("nvidia-smi -L && nvidia-smi && ")
    assert "gpulab expects each learner: MPS, at most 5.3 GiB of GPU memory and 33% of the GPU compute" in script
    assert "echo get_default_device_pinned_mem_limit 0 | nvidia-cuda-mps-control" in script
    assert "echo get_default_active_thread_percentage | nvidia-cuda-mps-control" in script
    assert script.endswith(" && sleep infinity")


def test_time_slicing_smoke_asks_no_mps_daemon():
    assert smoke_command({})[2] == "nvidia-smi -L && nvidia-smi && sleep infinity"
