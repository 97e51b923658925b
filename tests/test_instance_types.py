import pytest

from domain.capacity.instance_types import GPU_INSTANCE_TYPES, GpuInstanceType


def test_g4dn_xlarge_has_one_t4_4_vcpus_16_gib_125_gb_nvme():
    assert GPU_INSTANCE_TYPES["g4dn.xlarge"] == GpuInstanceType(
        1,
        "t4",
        16384,
        "amd64",
        vcpus=4,
        max_pods=29,
        memory_mib=16384,
        local_nvme_gb=125,
        cpu_manufacturer="intel",
        cpu_clock_mhz=2500,
    )


def test_graviton_is_aws_and_every_cpu_maker_a_karpenter_label():
    assert {GPU_INSTANCE_TYPES[t].cpu_manufacturer for t in GPU_INSTANCE_TYPES if t.startswith("g5g.")} == {"aws"}
    assert {t.cpu_manufacturer for t in GPU_INSTANCE_TYPES.values()} <= {"aws", "intel", "amd"}


def test_g5g_is_ebs_only_and_8_gpu_hoppers_carry_30400_gb_nvme():
    assert {GPU_INSTANCE_TYPES[t].local_nvme_gb for t in GPU_INSTANCE_TYPES if t.startswith("g5g.")} == {0}
    assert {GPU_INSTANCE_TYPES[t].local_nvme_gb for t in ("p5.48xlarge", "p5en.48xlarge")} == {30400}


def test_g6_12xlarge_has_48_vcpus_and_room_for_234_pods():
    g6 = GPU_INSTANCE_TYPES["g6.12xlarge"]
    assert (g6.gpus, g6.vcpus, g6.max_pods) == (4, 48, 234)


def test_g4dn_12xlarge_has_four_gpus():
    assert GPU_INSTANCE_TYPES["g4dn.12xlarge"].gpus == 4


def test_p4d_24xlarge_has_eight_a100s():
    p4d = GPU_INSTANCE_TYPES["p4d.24xlarge"]
    assert (p4d.gpus, p4d.gpu_model) == (8, "a100")


def test_g5g_xlarge_is_arm64():
    assert GPU_INSTANCE_TYPES["g5g.xlarge"].architecture == "arm64"


@pytest.mark.parametrize(
    "instance_type",
    ["g6f.large", "g6f.4xlarge", "gr6f.4xlarge", "g4ad.xlarge", "inf2.xlarge", "trn1.2xlarge", "dl1.24xlarge"],
)
def test_fractional_and_non_nvidia_types_are_absent(instance_type):
    assert instance_type not in GPU_INSTANCE_TYPES


def test_every_entry_has_at_least_one_whole_gpu():
    assert all(isinstance(it.gpus, int) and it.gpus >= 1 for it in GPU_INSTANCE_TYPES.values())


def test_every_entry_uses_a_kubernetes_arch_label_value():
    assert {it.architecture for it in GPU_INSTANCE_TYPES.values()} <= {"amd64", "arm64"}


def test_gpu_model_is_karpenter_lower_kebab_case():
    assert all(it.gpu_model == it.gpu_model.lower() and " " not in it.gpu_model for it in GPU_INSTANCE_TYPES.values())


def test_mapping_is_read_only():
    with pytest.raises(TypeError, match="does not support item assignment"):
        GPU_INSTANCE_TYPES["x1.large"] = GpuInstanceType(1, "t4", 16384, "amd64", 4, 29, 16384, 125, "intel", 2500)  # type: ignore[index]


def test_entries_are_immutable():
    with pytest.raises(AttributeError, match="cannot assign"):
        GPU_INSTANCE_TYPES["g5.xlarge"].gpus = 2  # type: ignore[misc]


@pytest.mark.parametrize("gpus", [0, -1])
def test_zero_or_negative_gpu_count_is_rejected(gpus):
    with pytest.raises(ValueError, match="whole number >= 1"):
        GpuInstanceType(gpus, "t4", 16384, "amd64", 4, 29, 16384, 125, "intel", 2500)
