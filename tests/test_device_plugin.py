"""gpulab:nvidia:DevicePlugin: the Helm release, its per-lab profiles, and the optional smoke workload."""

import pytest
import yaml

import domain.stack
from tests.conftest import BASE, run_values, stack_values

RELEASE = "kubernetes:helm.sh/v3:Release"


def plugin_values(run):
    return run.one(RELEASE, "nvidia-device-plugin").inputs["values"]


def test_release_is_the_pinned_chart_in_its_own_namespace(base_run):
    release = base_run.one(RELEASE, "nvidia-device-plugin").inputs
    assert release["chart"] == "nvidia-device-plugin"
    assert release["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert (release["name"], release["version"], release["namespace"]) == (
        "nvidia-device-plugin",
        "0.20.0",
        "nvidia-device-plugin",
    )
    namespace = base_run.one("kubernetes:core/v1:Namespace", "nvidia-device-plugin-namespace")
    assert namespace.inputs["metadata"]["name"] == "nvidia-device-plugin"
    assert (
        "kubernetes:core/v1:Namespace::nvidia-device-plugin-namespace"
        in base_run.one(RELEASE, "nvidia-device-plugin").dependencies
    )


def test_each_lab_has_a_sharing_profile_the_default_shares_none(base_run):
    config = plugin_values(base_run)["config"]
    assert config["default"] == "default"
    profiles = {name: yaml.safe_load(text) for name, text in config["map"].items()}
    assert profiles["default"] == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert profiles["intro"]["sharing"]["timeSlicing"] == {
        "renameByDefault": False,
        "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 3}],
    }


def test_an_unshared_lab_gets_a_profile_without_time_slicing():
    lab = {**BASE["gpulab:labs"]["intro"], "slicesPerGpu": 1}
    run = run_values(stack_values(**{"gpulab:labs": {"solo": lab}}))
    profile = yaml.safe_load(plugin_values(run)["config"]["map"]["solo"])
    assert "sharing" not in profile


def test_plugin_runs_only_on_gpu_nodes_tolerating_their_taint(base_run):
    values = plugin_values(base_run)
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_plugin_settings_come_from_config():
    run = run_values(
        stack_values(
            **{
                "gpulab:nvidiaDevicePlugin": {
                    "chartVersion": "0.20.1",
                    "namespace": "gpu",
                    "resources": {"cpu": "100m", "memory": "256Mi"},
                }
            }
        )
    )
    release = run.one(RELEASE, "nvidia-device-plugin").inputs
    assert (release["version"], release["namespace"]) == ("0.20.1", "gpu")
    assert release["values"]["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "256Mi"},
    }


def test_there_is_no_smoke_workload_unless_asked(base_run):
    assert base_run.of_type("kubernetes:apps/v1:Deployment") == []


def test_smoke_workload_asks_for_one_more_slice_than_a_gpu_has():
    lab = {**BASE["gpulab:labs"]["intro"], "smokeTest": True}
    run = run_values(stack_values(**{"gpulab:labs": {"intro": lab}}))
    (deployment,) = run.of_type("kubernetes:apps/v1:Deployment")
    spec = deployment.inputs["spec"]
    assert spec["replicas"] == 4
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"gpulab.dev/lab": "intro"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (container,) = pod["containers"]
    # Requested too: Kubernetes fills requests from limits only in the Pods it creates, not in the stored template.
    assert container["resources"] == {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}
    assert "nvidia-smi" in " ".join(container["command"])
    assert deployment.inputs["metadata"]["namespace"] == "nvidia-device-plugin"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            stack_values(**{"gpulab:nvidiaDevicePlugin": {"namespace": "default"}}),
            "gpulab:nvidiaDevicePlugin.namespace: must not be 'default'",
        ),
        (
            stack_values(**{"gpulab:labs": {"default": BASE["gpulab:labs"]["intro"]}}),
            "gpulab:labs.default: 'default' is reserved",
        ),
        (
            stack_values(**{"gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], "smokeTest": "yes"}}}),
            "gpulab:labs.intro.smokeTest: must be true or false",
        ),
    ],
)
def test_device_plugin_config_mistakes_are_reported(values, expected):
    with pytest.raises(domain.stack.ConfigError, match=expected):
        run_values(values)


def test_stack_exports_each_labs_pool_slices_seats_and_share(base_run):
    labs = base_run.outputs["labs"]
    assert list(labs) == ["intro"]
    expected = {
        "nodePool": "intro",
        "slicesPerGpu": 3,
        "learnerSeats": 12,
        "sharing": "timeSlicing",
        "gpuMemoryCapGib": None,
        "computePercent": None,
    }
    assert labs["intro"].items() >= expected.items()
