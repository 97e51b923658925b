"""Labs Karpenter could never give a node are refused where the user writes them, naming the instance type."""

import pulumi
import pytest

import domain.stack
from tests.conftest import as_cli_config, run_values, stack_values
from tests.support.synthetic import lab


def problems(labs: dict) -> list[str]:
    pulumi.runtime.set_all_config(as_cli_config(stack_values(**{"gpulab:labs": labs})))
    with pytest.raises(domain.stack.ConfigError) as caught:
        domain.stack.load()
    return caught.value.lines


@pytest.mark.parametrize(
    ("bad_lab", "message"),
    [
        (
            lab(["g6.12xlarge"], 3, max_gpus=2),
            "gpulab:labs.x.maxGpus: must be at least 4: g6.12xlarge has 4 GPUs, and Karpenter never launches a node "
            "that exceeds the NodePool's nvidia.com/gpu limit (maxGpus x slicesPerGpu)",
        ),
        (
            {"instanceTypes": ["g4dn.xlarge", "g5.48xlarge"], "ami": "al2023@latest"},  # maxGpus defaults to 1
            "gpulab:labs.x.maxGpus: must be at least 8: g5.48xlarge has 8 GPUs",
        ),
        (
            # Karpenter launches one node of 4 GPUs (8 seats) and refuses the rest: 12 seats would exist on paper only.
            lab(["g4dn.12xlarge"], 2, max_gpus=6),
            "gpulab:labs.x.maxGpus: must be a multiple of 4: g4dn.12xlarge has 4 GPUs, and Karpenter launches whole "
            "nodes, so a lab of g4dn.12xlarge reaches 4 of its 6 GPUs; use 4 or 8",
        ),
        (
            lab(["g4dn.xlarge", "g4dn.12xlarge"], 2, max_gpus=6),
            "gpulab:labs.x.maxGpus: must be a multiple of 4: g4dn.12xlarge has 4 GPUs",
        ),
        (
            # maxGpus 2 of g4dn.2xlarge, the type of most vCPUs per GPU: 2 nodes of 8 vCPUs.
            lab(["g4dn.xlarge", "g4dn.2xlarge"], 3, cpuLimit=6),
            "gpulab:labs.x.cpuLimit: must be at least 16 for maxGpus 2, got 6: Karpenter launches no node past the "
            "NodePool's cpu limit, the sum of its nodes' vCPUs, and maxGpus 2 of g4dn.2xlarge (1 GPU, 8 vCPUs a node) "
            "are 2 nodes of 16 vCPUs; raise cpuLimit to 16, or leave it out (by default it is what maxGpus needs)",
        ),
        (
            lab(["g5.xlarge", "g4dn.xlarge"], 3, maxPods=110),
            "gpulab:labs.x.maxPods: must be at most 58: the VPC CNI has IP addresses for 58 pods on g5.xlarge",
        ),
    ],
    ids=[
        "four-gpu-type-over-max-gpus",
        "default-max-gpus",
        "max-gpus-between-whole-nodes",
        "max-gpus-between-whole-nodes-of-one-type",
        "cpu-limit",
        "max-pods-over-eni-limit",
    ],
)
def test_a_lab_with_a_type_that_could_never_launch_is_refused(bad_lab, message):
    assert len(problems({"x": bad_lab})) == 1
    assert problems({"x": bad_lab})[0].startswith(message)


def test_a_multi_gpu_lab_whose_limit_holds_a_whole_node_renders():
    run = run_values(stack_values(**{"gpulab:labs": {"big": lab(["g6.12xlarge"], 3, max_gpus=8)}}))
    limits = run.one("kubernetes:karpenter.sh/v1:NodePool", "nodepool-big").inputs["spec"]["limits"]
    # Without cpuLimit, what maxGpus needs: 2 nodes of 48 vCPUs.
    assert limits == {"nvidia.com/gpu": "24", "cpu": "96"}


NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def test_a_cpu_limit_short_of_max_gpus_is_refused_naming_both():
    # The old default: 1,000 vCPUs are 250 g4dn.xlarge nodes, and the lab's maxGpus asks for 256.
    (line,) = problems({"x": lab(["g4dn.xlarge"], 3, max_gpus=256, cpuLimit=1000)})
    assert line == (
        "gpulab:labs.x.cpuLimit: must be at least 1024 for maxGpus 256, got 1000: Karpenter launches no node past the "
        "NodePool's cpu limit, the sum of its nodes' vCPUs, and maxGpus 256 of g4dn.xlarge (1 GPU, 4 vCPUs a node) "
        "are 256 nodes of 1024 vCPUs; raise cpuLimit to 1024, or leave it out (by default it is what maxGpus needs)"
    )


def test_the_cpu_limit_follows_most_vcpus_per_gpu_not_size():
    # g5.48xlarge has the most vCPUs (192 for 8 GPUs), g5.16xlarge the most per GPU (64): Karpenter may fill maxGpus 8
    # with eight g5.16xlarge, 512 vCPUs.
    types = ["g5.xlarge", "g5.16xlarge", "g5.48xlarge"]
    (line,) = problems({"x": lab(types, 2, max_gpus=8, cpuLimit=511)})
    assert line.startswith(
        "gpulab:labs.x.cpuLimit: must be at least 512 for maxGpus 8, got 511: Karpenter launches no node past the "
        "NodePool's cpu limit, the sum of its nodes' vCPUs, and maxGpus 8 of g5.16xlarge (1 GPU, 64 vCPUs a node) "
        "are 8 nodes of 512 vCPUs"
    )
    run = run_values(stack_values(**{"gpulab:labs": {"x": lab(types, 2, max_gpus=8, cpuLimit=512)}}))
    assert run.one(NODE_POOL, "nodepool-x").inputs["spec"]["limits"]["cpu"] == "512"


def test_without_a_cpu_limit_the_pool_holds_all_max_gpus():
    labs = {"big": lab(["g4dn.xlarge"], 3, max_gpus=256), "roomy": lab(["g4dn.xlarge"], 3, max_gpus=4, cpuLimit=64)}
    run = run_values(stack_values(**{"gpulab:labs": labs}))
    limits = {name: run.one(NODE_POOL, f"nodepool-{name}").inputs["spec"]["limits"] for name in labs}
    # 256 nodes of 4 vCPUs; a cpuLimit above what maxGpus needs is the NodePool's as written.
    assert limits == {
        "big": {"nvidia.com/gpu": "768", "cpu": "1024"},
        "roomy": {"nvidia.com/gpu": "12", "cpu": "64"},
    }


def test_max_pods_unset_is_karpenters_and_set_reaches_kubelet():
    labs = {"eni": lab(["g4dn.xlarge"], 3), "capped": lab(["g4dn.xlarge"], 3, maxPods=20)}
    run = run_values(stack_values(**{"gpulab:labs": labs}))
    eni = run.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "ec2nodeclass-eni").inputs["spec"]
    capped = run.one("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "ec2nodeclass-capped").inputs["spec"]
    assert "kubelet" not in eni
    assert capped["kubelet"] == {"maxPods": 20}


def test_limit_checks_report_beside_field_errors_in_one_pass():
    bad = lab(["g6.12xlarge"], 3, max_gpus=2, rootVolume={"iops": 1}, learnerPod={"cpu": "64"})
    assert [line.split(":")[1] for line in problems({"x": bad})] == [
        "labs.x.maxGpus",
        "labs.x.rootVolume.iops",
        "labs.x.learnerPod.cpu",
    ]
