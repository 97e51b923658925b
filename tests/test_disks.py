"""Where a lab's images land (instance store or root volume), its root volume, parallel pull, and what the disk costs:
the plan from the configuration, the EC2NodeClass and user data a lab on NVMe, EBS-only and mixed types renders, and
the disk's part of the cost figures against hand-worked examples."""

from decimal import Decimal

import pytest
import yaml

import domain.stack
from components.karpenter.user_data import NODECONFIG_CONTENT_TYPE
from domain.capacity.disks import FAST_PULL_MIN_MEMORY_MIB, FAST_PULL_MIN_VCPUS, Volume
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.cost.lab_cost import lab_cost, root_volume_per_hour, warmup_cost
from reports.summary import NODES_LEAD_IN, TYPES_LEAD_IN, summary
from tests.conftest import BASE, run_values, stack_values
from tests.support import tables
from tests.support.crd_schema import crd_problems, requires_upstream
from tests.support.synthetic import lab
from tests.support.user_data_parts import flag, mime_parts, prepull_script, pull_command

NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
TENSORFLOW = "tensorflow/tensorflow:2.12.0-gpu"

# g6.xlarge has 250 GB of NVMe, g5g.xlarge none (domain/capacity/instance_types.py); both clear nodeadm's 4 vCPU / 7
# GiB.
NVME, EBS_ONLY, MIXED = ["g6.xlarge"], ["g5g.xlarge"], ["g4dn.xlarge", "g5g.xlarge"]


def parse_lab(instance_types, **keys):
    settings = domain.stack.parse(
        {"cluster": BASE["gpulab:cluster"], "labs": {"x": lab(instance_types, 2, **keys)}}, "eu-west-1"
    )
    return settings.settings.labs["x"]


def refusal(instance_types, **keys) -> list[str]:
    with pytest.raises(domain.stack.ConfigError, match=r"^gpulab:labs\.x\.") as refused:
        parse_lab(instance_types, **keys)
    return refused.value.lines


# --- the plan -----------------------------------------------------------------------------------------------------


def test_nvme_labs_keep_images_on_instance_store_os_on_root():
    disk = parse_lab(NVME).disk
    assert (disk.raid0, disk.root, disk.fast_image_pull) == (True, Volume(20, 3000, 125, True), True)
    assert disk.image_disk == {"g6.xlarge": "instance store (250 GB NVMe)"}


def test_ebs_only_labs_keep_the_seed_root_and_pull_serially():
    disk = parse_lab(EBS_ONLY).disk
    # 125 MiB/s is below the 600 nodeadm recommends for parallel pull: it could only be slower.
    assert (disk.raid0, disk.root, disk.fast_image_pull) == (False, Volume(100, 10000, 125, True), False)
    assert disk.image_disk == {"g5g.xlarge": "root volume"}


def test_a_mixed_lab_gets_raid0_on_nvme_and_full_root_on_ebs():
    # RAID0 is a no-op without instance store (setup-local-disks exits 0), so one EC2NodeClass serves both kinds.
    disk = parse_lab(MIXED).disk
    assert (disk.raid0, disk.root, disk.fast_image_pull) == (True, Volume(100, 10000, 125, True), False)
    assert disk.image_disk == {
        "g4dn.xlarge": "instance store (125 GB NVMe)",
        "g5g.xlarge": "root volume",
    }


def test_a_fast_enough_root_turns_parallel_pull_on_for_ebs_only():
    disk = parse_lab(EBS_ONLY, rootVolume={"iops": 3000, "throughputMibps": 600}).disk
    assert (disk.root, disk.fast_image_pull) == (Volume(100, 3000, 600, True), True)


def test_strategy_root_volume_keeps_nvme_on_the_seed_root():
    disk = parse_lab(NVME, diskStrategy="rootVolume").disk
    assert (disk.raid0, disk.root, disk.fast_image_pull) == (False, Volume(100, 10000, 125, True), False)


def test_a_labs_keys_override_the_strategy_defaults_one_by_one():
    disk = parse_lab(NVME, rootVolume={"sizeGib": 40, "encrypted": False}).disk
    assert disk.root == Volume(40, 3000, 125, False)


@pytest.mark.parametrize(("instance_types", "setting"), [(NVME, False), (EBS_ONLY, True)])
def test_fast_image_pull_is_a_lab_setting_either_way(instance_types, setting):
    assert parse_lab(instance_types, fastImagePull=setting).disk.fast_image_pull is setting


def test_fast_pull_before_the_gate_is_off_and_refused_if_asked():
    assert parse_lab(NVME, ami="al2023@v20250819").disk.fast_image_pull is False
    assert refusal(NVME, ami="al2023@v20250819", fastImagePull=True) == [
        "gpulab:labs.x.fastImagePull: the nodeadm of AMI release al2023@v20250819 has no FastImagePull feature gate "
        "(amazon-eks-ami releases have it from v20250821); choose a later ami or leave fastImagePull out"
    ]


@pytest.mark.parametrize("ami", ["al2023@v20250821", "al2023@latest"])
def test_fast_pull_is_accepted_from_the_gates_release_on(ami):
    assert parse_lab(NVME, ami=ami, fastImagePull=True).disk.fast_image_pull is True


def test_instance_store_is_refused_naming_an_ebs_only_type():
    assert refusal(MIXED, diskStrategy="instanceStore") == [
        "gpulab:labs.x.diskStrategy: instanceStore needs NVMe instance storage on every instance type, and "
        "g5g.xlarge has none (EBS only); leave diskStrategy out to keep images on the NVMe where a type has it and on "
        "a full root volume elsewhere, or leave those types out"
    ]


def test_a_throughput_over_the_default_iops_is_refused_with_it():
    assert refusal(NVME, rootVolume={"throughputMibps": 1000}) == [
        "gpulab:labs.x.rootVolume.throughputMibps: must be at most iops / 4, so 750 for the 3000 IOPS this lab's "
        "root volume gets; set iops too"
    ]


def test_iops_over_the_default_size_are_refused_with_the_size():
    assert refusal(NVME, rootVolume={"iops": 16000}) == [
        "gpulab:labs.x.rootVolume.iops: must be at most 500 per GiB, so 10000 for the 20 GiB this lab's root volume "
        "gets; set sizeGib too"
    ]


def test_every_type_clears_nodeadms_threshold_the_gate_decides():
    # nodeadm applies FastImagePull only from 4 vCPUs and 7 GiB (UseSOCISnapshotter); below, the CRI would stay on
    # overlayfs while the pre-pull went to soci. No type gpulab knows is below, with a GiB of margin for the memory the
    # kernel does not show online.
    assert all(
        t.vcpus >= FAST_PULL_MIN_VCPUS and t.memory_mib >= FAST_PULL_MIN_MEMORY_MIB + 1024
        for t in GPU_INSTANCE_TYPES.values()
    )


def test_summary_says_where_each_mixed_lab_type_keeps_images():
    run = run_values(stack_values(**{"gpulab:labs": {"x": lab(MIXED, 2)}}))
    lines = summary(run)
    assert {r["instance type"]: r["images on"] for r in tables.table(lines, TYPES_LEAD_IN) if r["lab"] == "x"} == {
        "g4dn.xlarge": "instance store (125 GB NVMe)",
        "g5g.xlarge": "root volume",
    }
    (row,) = [row for row in tables.table(lines, NODES_LEAD_IN) if row["lab"] == "x"]
    assert (row["root volume"], row["parallel pull"]) == ("100 GiB gp3, 10000 IOPS, 125 MiB/s", "off")


# --- what the lab renders -----------------------------------------------------------------------------------------


def rendered_node_class(instance_types, **keys):
    run = run_values(stack_values(**{"gpulab:labs": {"x": lab(instance_types, 2, prepullImages=[TENSORFLOW], **keys)}}))
    return run.one(NODE_CLASS, "ec2nodeclass-x").inputs


def node_config_and_pull(node_class):
    """The NodeConfig part's spec, and the pre-pull's words up to the image."""
    user_data = node_class["spec"]["userData"]
    parts = mime_parts(user_data)
    (node_config,) = [yaml.safe_load(p.get_payload()) for p in parts if p.get_content_type() == NODECONFIG_CONTENT_TYPE]
    return node_config["spec"], pull_command(prepull_script(user_data))


@pytest.mark.parametrize(
    ("instance_types", "raid0", "root", "snapshotter"),
    [
        (NVME, True, ("20Gi", 3000, 125), "soci"),
        (EBS_ONLY, False, ("100Gi", 10000, 125), "overlayfs"),
        (MIXED, True, ("100Gi", 10000, 125), "overlayfs"),
    ],
    ids=["nvme", "ebs-only", "mixed"],
)
def test_the_node_class_and_user_data_carry_the_labs_disks(instance_types, raid0, root, snapshotter):
    node_class = rendered_node_class(instance_types)
    spec = node_class["spec"]
    assert ("instanceStorePolicy" in spec, spec.get("instanceStorePolicy", "RAID0")) == (raid0, "RAID0")
    (mapping,) = spec["blockDeviceMappings"]
    assert (mapping["ebs"]["volumeSize"], mapping["ebs"]["iops"], mapping["ebs"]["throughput"]) == root
    node_config, pull = node_config_and_pull(node_class)
    # The CRI unpacks into soci exactly when the NodeConfig turns the gate on (nodeadm's containerd templates), and
    # the pre-pull goes into that snapshotter, in the CRI's namespace.
    assert node_config.get("featureGates", {}).get("FastImagePull", False) is (snapshotter == "soci")
    assert (pull[0], flag(pull, "--namespace"), flag(pull, "--snapshotter")) == ("nerdctl", "k8s.io", snapshotter)


@requires_upstream
@pytest.mark.parametrize("instance_types", [NVME, EBS_ONLY, MIXED], ids=["nvme", "ebs-only", "mixed"])
def test_each_disk_kinds_node_class_passes_the_upstream_crd(instance_types):
    assert crd_problems(rendered_node_class(instance_types)) == []


def test_a_new_disk_strategy_changes_the_spec_and_drifts_nodes():
    # Karpenter's EC2NodeClass drift hash covers instanceStorePolicy, blockDeviceMappings and userData
    # (aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/ec2nodeclass.go, EC2NodeClass.Hash): each change below replaces
    # the lab's nodes within its drift budget.
    before = rendered_node_class(NVME)["spec"]
    after = rendered_node_class(NVME, diskStrategy="rootVolume")["spec"]
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    assert changed == {"instanceStorePolicy", "blockDeviceMappings", "userData"}


# --- what the disk costs, worked by hand from the EBS prices (domain/cost/prices.py) ----------------------------------


def test_seed_root_costs_0_0589_a_node_hour_default_0_0022():
    # Seed: 100 GB x 0.08 = 8.00, (10000 - 3000) IOPS x 0.005 = 35.00: 43.00 a month / 730 hours = 0.058904
    assert root_volume_per_hour(Volume(100, 10000, 125, True)) == Decimal("43.00") / 730
    # Instance store beside: 20 GB x 0.08 = 1.60 a month, no IOPS or throughput above gp3's included: 0.002192
    assert root_volume_per_hour(Volume(20, 3000, 125, True)) == Decimal("1.60") / 730


def test_throughput_above_125_mibps_is_billed_per_mibps():
    # 100 GB x 0.08 = 8.00; (600 - 125) MiB/s x 0.04 = 19.00: 27.00 a month
    assert root_volume_per_hour(Volume(100, 3000, 600, True)) == Decimal("27.00") / 730


def test_seed_volume_adds_a_third_per_seat_max_gpus_to_ceiling():
    # g4dn.xlarge 0.526 + 43.00 / 730 = 0.58490411 per node-hour: / 3 slices = 0.19496804 -> 0.1950 per seat-hour;
    # 4 GPUs x 0.58490411 = 2.33961644, rounded up 2.3397
    cost = lab_cost(["g4dn.xlarge"], 3, 4, root=Volume(100, 10000, 125, True))
    assert (cost.seat_hour, cost.gpu_limit_per_hour, cost.root_volume_per_node_hour) == ((0.195, 0.195), 2.3397, 0.0589)


def test_a_multi_gpu_node_shares_its_root_volume_among_its_gpus():
    # g6.12xlarge (4.6016 + 1.60 / 730) / 4 GPUs = 1.15094795 per GPU-hour: / 2 slices = 0.5755; x 8 = 9.2076
    cost = lab_cost(["g6.12xlarge"], 2, 8, root=Volume(20, 3000, 125, True))
    assert (cost.seat_hour, cost.gpu_limit_per_hour) == ((0.5755, 0.5755), 9.2076)
    assert cost.gpu_limit_basis == "maxGpus 8 x 1.150948 USD per GPU-hour of g6.12xlarge, its root volume included"


def test_warm_nodes_are_billed_with_their_root_volumes():
    # 12 seats / 3 per g4dn.xlarge = 4 nodes x (0.526 + 43.00 / 730 for the seed's volume) x 20/60 h = 0.77987215
    assert warmup_cost(["g4dn.xlarge"], 3, 12, "20m", disk=Decimal("43.00") / 730) == (0.7799, 0.7799)
