"""The stack configuration contract: what users may write, and the one-line messages for what they may not."""

import json

import pulumi
import pytest

import domain.stack
import program
import render.run
from tests.conftest import BASE, STACK_FILES, as_cli_config, stack_values


def parsed(values: dict) -> domain.stack.StackConfig:
    """Loads the values the way the program does: from the Pulumi runtime's configuration."""
    pulumi.runtime.set_all_config(as_cli_config(values))
    return domain.stack.load()


def problems(values: dict) -> list[str]:
    with pytest.raises(domain.stack.ConfigError) as caught:
        parsed(values)
    return caught.value.lines


def with_cluster(**changes) -> dict:
    return stack_values(**{"gpulab:cluster": {**BASE["gpulab:cluster"], **changes}})


def with_lab(**changes) -> dict:
    lab = {**BASE["gpulab:labs"]["intro"], **changes}
    return stack_values(**{"gpulab:labs": {"intro": {k: v for k, v in lab.items() if v is not None}}})


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.name)
def test_every_stack_file_in_the_repo_validates(path):
    pulumi.runtime.set_all_config(render.run.read_stack_file(path))
    assert domain.stack.load().settings.cluster.name


def test_lab_defaults_are_no_sharing_one_gpu_and_on_demand():
    lab = parsed(with_lab(slicesPerGpu=None, maxGpus=None)).settings.labs["intro"]
    assert (lab.capacity_types, lab.slices_per_gpu, lab.max_gpus) == (["on-demand"], 1, 1)


@pytest.mark.parametrize("name", ["a", "lab-1", "a" * 80])
def test_cluster_names_eks_and_sqs_both_accept_are_valid(name):
    assert parsed(with_cluster(name=name)).settings.cluster.name == name


def test_an_environment_without_labs_is_valid():
    assert parsed(stack_values(**{"gpulab:labs": {}})).settings.labs == {}
    values = stack_values()
    del values["gpulab:labs"]
    assert parsed(values).settings.labs == {}


def test_lab_defaults_are_the_origin_node_settings_but_disks():
    lab = parsed(stack_values()).settings.labs["intro"]
    # A g4dn.xlarge has 125 GB of NVMe, which takes the images (tests/test_disks.py): the root volume keeps the OS only.
    volume = lab.disk.root
    assert (volume.size_gib, volume.iops, volume.throughput_mibps, volume.encrypted) == (20, 3000, 125, True)
    # maxPods is the exception: the origin's 110 is more pods than the VPC CNI has addresses for on a g4dn.xlarge.
    assert (lab.pod_pids_limit, lab.max_pods, lab.cpu_limit) == (32768, None, None)
    # Without cpuLimit, the NodePool's is what maxGpus needs: 4 g4dn.xlarge of 4 vCPUs (tests/test_lab_limits.py).
    assert lab.node_pool_cpu_limit == 16


def test_default_disruption_spares_learners_one_node_at_a_time():
    disruption = parsed(stack_values()).settings.labs["intro"].disruption
    assert disruption.consolidation_policy == "WhenEmpty"
    assert [budget.nodes for budget in disruption.budgets] == ["1"]


def test_prepull_images_are_stored_fully_qualified():
    lab = parsed(with_lab(prepullImages=["tensorflow/tensorflow:2.12.0-gpu"])).settings.labs["intro"]
    assert lab.prepull_images == ["docker.io/tensorflow/tensorflow:2.12.0-gpu"]


def test_karpenter_defaults_pinned_chart_kube_system_1cpu_1gib():
    karpenter = parsed(stack_values()).settings.karpenter
    assert (karpenter.chart_version, karpenter.namespace) == ("1.14.1", "kube-system")
    assert (karpenter.controller_resources.cpu, karpenter.controller_resources.memory) == ("1", "1Gi")


def test_learner_seats_are_max_gpus_times_slices():
    assert parsed(with_lab(maxGpus=4, slicesPerGpu=3)).settings.labs["intro"].learner_seats == 12


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (with_lab(slicesPerGpu=0), "gpulab:labs.intro.slicesPerGpu: must be between 1 and 48, got 0"),
        (with_lab(slicesPerGpu=49), "gpulab:labs.intro.slicesPerGpu: must be between 1 and 48, got 49"),
        (with_lab(maxGpus=0), "gpulab:labs.intro.maxGpus: must be at least 1, got 0"),
        (with_lab(slicesPerGpu="3"), "gpulab:labs.intro.slicesPerGpu: must be a whole number, got '3'"),
        (with_lab(slicesPerGpu=2.5), "gpulab:labs.intro.slicesPerGpu: must be a whole number, got 2.5"),
        (
            with_lab(slicesPerGPU=2),
            "gpulab:labs.intro.slicesPerGPU: unknown key; did you mean slicesPerGpu? allowed keys: ami, "
            "budget, capacityReservationIds, capacityTypes, classes, cpuLimit, diskStrategy, disruption, expireAfter, "
            "fastImagePull, gpuIdleTimeout, instanceTypes, internet, learnerPod, maxGpus, maxHourlyCost, maxPods, "
            "notebookImage, onSpawnPage, podPidsLimit, prepullImages, "
            "rootVolume, sharing, slicesPerGpu",
        ),
        (
            with_lab(instanceTypes=["m5.large"]),
            "gpulab:labs.intro.instanceTypes[0]: 'm5.large' is not an NVIDIA GPU instance type",
        ),
        (
            with_lab(instanceTypes=["g4ad.xlarge"]),
            "gpulab:labs.intro.instanceTypes[0]: 'g4ad.xlarge' is not an NVIDIA GPU instance type",
        ),
        (with_lab(instanceTypes=[]), "gpulab:labs.intro.instanceTypes: must not be empty"),
        (with_lab(instanceTypes="g4dn.xlarge"), "gpulab:labs.intro.instanceTypes: must be a list, got 'g4dn.xlarge'"),
        (
            with_lab(capacityTypes=["spots"]),
            "gpulab:labs.intro.capacityTypes[0]: must be one of 'on-demand', 'spot' or 'reserved', got 'spots'",
        ),
        (with_lab(capacityTypes=["spot", "spot"]), "gpulab:labs.intro.capacityTypes: must not repeat spot"),
        (with_lab(ami=None), "gpulab:labs.intro.ami: required key is missing"),
        (with_lab(ami="al2023"), "gpulab:labs.intro.ami: must be an AL2023 AMI alias"),
        (with_lab(ami="al2023@20251117"), "gpulab:labs.intro.ami: must be an AL2023 AMI alias"),
        (with_lab(ami="al2@v20260714"), "gpulab:labs.intro.ami: must be an AL2023 AMI alias"),
        (with_lab(ami="bottlerocket@latest"), "gpulab:labs.intro.ami: must be an AL2023 AMI alias"),
        (
            stack_values(**{"gpulab:labs": {"Intro_Lab": BASE["gpulab:labs"]["intro"]}}),
            "gpulab:labs.Intro_Lab: must be a DNS-1123 label",
        ),
        (
            stack_values(**{"gpulab:labs": ["intro"]}),
            "gpulab:labs: must be a mapping of keys to values, got a list",
        ),
        (stack_values(**{"gpulab:labs": {"intro": None}}), "gpulab:labs.intro: must be a mapping of keys to values"),
        (with_cluster(name="Learning_Lab"), "gpulab:cluster.name: must be lowercase letters, digits and '-'"),
        (with_cluster(name="-lab"), "gpulab:cluster.name: must be lowercase letters, digits and '-'"),
        (with_cluster(name="a" * 81), "gpulab:cluster.name: must be lowercase letters, digits and '-'"),
        (
            with_cluster(kubernetesVersion=1.3),
            'gpulab:cluster.kubernetesVersion: must be a quoted string such as "1.34"',
        ),
        (
            with_cluster(kubernetesVersion="v1.34"),
            "gpulab:cluster.kubernetesVersion: must be a Kubernetes minor version",
        ),
        (with_cluster(vpcId="vpc-1"), "gpulab:cluster.vpcId: must be a VPC ID"),
        (
            with_cluster(privateSubnetIds=["subnet-0a1b2c3d4e5f60001"]),
            "gpulab:cluster.privateSubnetIds: needs at least two subnets in different availability zones, got 1",
        ),
        (
            with_cluster(privateSubnetIds=["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60001"]),
            "gpulab:cluster.privateSubnetIds: must not repeat subnet-0a1b2c3d4e5f60001",
        ),
        # Keys are matched as users mistype them, case and all: maxGPUs is maxGpus, not the closer-cased maxPods.
        (with_lab(maxGPUs=2), "gpulab:labs.intro.maxGPUs: unknown key; did you mean maxGpus? allowed keys: "),
        (with_lab(LEARNERPOD={}), "gpulab:labs.intro.LEARNERPOD: unknown key; did you mean learnerPod? allowed keys: "),
        (with_cluster(privateSubnetIds=["sub-1", "sub-2"]), "gpulab:cluster.privateSubnetIds[0]: must be a subnet ID"),
        (with_cluster(systemNodes={"size": 1}), "gpulab:cluster.systemNodes.size: must be between 2 and 10, got 1"),
        (with_cluster(endpoint="public"), "gpulab:cluster.endpoint: unknown key; did you mean privateEndpoint?"),
        (
            stack_values(**{"gpulab:lab": {}}),
            "gpulab:lab: unknown key; did you mean labs? allowed keys: budget, budgetAlerts, cluster, "
            "costAlertThreshold, costAllocationTag, jupyterhub, karpenter, labs",
        ),
        (stack_values(**{"aws:region": ""}), "aws:region: required"),
        (
            with_lab(rootVolume={"sizeGiB": 100, "iops": 60000}),
            "gpulab:labs.intro.rootVolume.sizeGiB: unknown key; did you mean sizeGib?",
        ),
        (
            with_lab(rootVolume={"sizeGib": 20, "iops": 16000}),
            "gpulab:labs.intro.rootVolume.iops: must be at most 500 per GiB, so 10000 for 20 GiB",
        ),
        (
            with_lab(rootVolume={"iops": 3000, "throughputMibps": 1000}),
            "gpulab:labs.intro.rootVolume.throughputMibps: must be at most iops / 4, so 750 for 3000 IOPS",
        ),
        (with_lab(rootVolume={"encrypted": "yes"}), "gpulab:labs.intro.rootVolume.encrypted: must be true or false"),
        (
            with_lab(prepullImages=["tensorflow/tensorflow"]),
            "gpulab:labs.intro.prepullImages[0]: image reference 'tensorflow/tensorflow' needs an explicit tag",
        ),
        (with_lab(podPidsLimit=100), "gpulab:labs.intro.podPidsLimit: must be between 1024 and 4194304, got 100"),
        (with_lab(maxPods=0), "gpulab:labs.intro.maxPods: must be at least 1, got 0"),
        (
            with_lab(disruption={"budgets": [{"nodes": "0", "schedule": "@daily", "duration": ""}]}),
            "gpulab:labs.intro.disruption.budgets[0].duration: must be hours and minutes such as 45m, 2h or 1h30m",
        ),
        (
            with_lab(disruption={"budgets": [{"nodes": "0", "schedule": "0 13 * * monday-friday", "duration": "8h"}]}),
            "gpulab:labs.intro.disruption.budgets[0].schedule: '0 13 * * monday-friday' is not a Go cron schedule: "
            "day-of-week field 'monday-friday': 'monday' is not a number or a three-letter name",
        ),
        (
            with_lab(
                disruption={"budgets": [{"nodes": "1"}, {"nodes": "0", "schedule": "@every 1h", "duration": "8h"}]}
            ),
            "gpulab:labs.intro.disruption.budgets[1].schedule: '@every 1h' is not a Go cron schedule: @every is not",
        ),
        (
            with_lab(disruption={"budgets": [{"nodes": "0", "schedule": "0 0 30 2 *", "duration": "8h"}]}),
            "gpulab:labs.intro.disruption.budgets[0].schedule: '0 0 30 2 *' never fires (no day or time matches it), "
            "and Karpenter would treat the budget as always active",
        ),
        (
            with_lab(disruption={"budgets": [{"nodes": "0", "schedule": " @daily", "duration": "8h"}]}),
            "gpulab:labs.intro.disruption.budgets[0].schedule: ' @daily' does not match the NodePool CRD's schedule",
        ),
        (with_lab(expireAfter="30d"), "gpulab:labs.intro.expireAfter: must be a duration such as 720h, or Never"),
        (
            with_lab(disruption={"consolidationPolicy": "WhenUnderutilized"}),
            "gpulab:labs.intro.disruption.consolidationPolicy: must be one of 'WhenEmpty' or "
            "'WhenEmptyOrUnderutilized'",
        ),
        (
            with_lab(disruption={"budgets": [{"nodes": "10%", "schedule": "0 9 * * mon-fri"}]}),
            "gpulab:labs.intro.disruption.budgets[0].duration: schedule and duration go together",
        ),
        (
            with_lab(capacityTypes=["reserved"]),
            "gpulab:labs.intro.capacityReservationIds: required with capacity type 'reserved'",
        ),
        (
            with_lab(capacityReservationIds=["cr-0123456789abcdef0"]),
            "gpulab:labs.intro.capacityReservationIds: only used with capacity type 'reserved'",
        ),
        (
            stack_values(**{"gpulab:karpenter": {"controllerResources": {"cpu": "one"}}}),
            "gpulab:karpenter.controllerResources.cpu: must be a Kubernetes quantity",
        ),
        (stack_values(**{"gpulab:karpenter": {"chartVersion": "v1.14"}}), "gpulab:karpenter.chartVersion: must be a"),
        (stack_values(**{"gpulab:karpenter": {"namespace": "Kube"}}), "gpulab:karpenter.namespace: must be a"),
    ],
)
def test_a_bad_key_is_reported_on_one_line_naming_it(values, expected):
    assert any(line.startswith(expected) for line in problems(values)), problems(values)


@pytest.mark.parametrize("schedule", ["0 13 * * mon-fri", "0 13 * * MON-FRI", "@daily", "*/30 9-17 ? * 1-5"])
def test_budget_schedules_karpenter_parses_are_accepted(schedule):
    budget = {"nodes": "0", "schedule": schedule, "duration": "1h"}
    lab = parsed(with_lab(disruption={"budgets": [budget]})).settings.labs["intro"]
    assert lab.disruption.budgets[0].schedule == schedule


def test_a_missing_cluster_is_reported():
    values = stack_values()
    del values["gpulab:cluster"]
    assert problems(values) == ["gpulab:cluster: required key is missing"]


def test_every_problem_is_reported_at_once_one_line_each():
    values = stack_values(
        **{
            "gpulab:cluster": {**BASE["gpulab:cluster"], "vpcId": "vpc-1"},
            "gpulab:labs": {"intro": {**BASE["gpulab:labs"]["intro"], "slicesPerGpu": 0, "maxGpus": 0}},
        }
    )
    lines = problems(values)
    assert len(lines) == 3
    assert all(line.startswith("gpulab:") and "\n" not in line for line in lines)


def test_pulumi_up_on_a_bad_stack_stops_with_problems_no_trace():
    # RunError is the exception the Pulumi language host prints as a plain message, without a stack trace.
    pulumi.runtime.set_all_config(as_cli_config(with_lab(slicesPerGpu=0)))
    with pytest.raises(pulumi.RunError, match=r"gpulab:labs\.intro\.slicesPerGpu: must be between 1 and 48, got 0"):
        program.main()


def test_a_labs_field_and_cross_field_errors_are_both_reported():
    # Pydantic skips a model's cross-field validators once one of its fields fails; gpulab's run anyway.
    lines = problems(with_lab(maxPods=1000, capacityTypes=["reserved"]))
    assert lines == [
        "gpulab:labs.intro.capacityReservationIds: required with capacity type 'reserved', and only then",
        "gpulab:labs.intro.maxPods: must be at most 29: the VPC CNI has IP addresses for 29 pods on g4dn.xlarge "
        "(no prefix delegation); unset, each type gets its own",
    ]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"rootVolume": {"sizeGib": 20, "iops": 16000, "encrypted": "yes"}},
            [
                "gpulab:labs.intro.rootVolume.iops: must be at most 500 per GiB, so 10000 for 20 GiB",
                "gpulab:labs.intro.rootVolume.encrypted: must be true or false, got 'yes'",
            ],
        ),
        (
            {"disruption": {"budgets": [{"nodes": "ten", "duration": "8h"}]}},
            [
                "gpulab:labs.intro.disruption.budgets[0].nodes: must be a node count or percentage such as 1 or 10%, "
                "got 'ten'",
                "gpulab:labs.intro.disruption.budgets[0].duration: schedule and duration go together",
            ],
        ),
    ],
)
def test_cross_field_checks_run_beside_the_blocks_field_errors(changes, expected):
    assert problems(with_lab(**changes)) == expected


def test_a_cross_check_names_an_absent_key_as_spelled():
    assert problems(with_lab(capacityTypes=["spot", "reserved"])) == [
        "gpulab:labs.intro.capacityReservationIds: required with capacity type 'reserved', and only then"
    ]


def test_an_unknown_budget_key_is_named_with_the_allowed_keys():
    assert problems(with_lab(disruption={"budgets": [{"nodes": "1", "node": "2"}]})) == [
        "gpulab:labs.intro.disruption.budgets[0].node: unknown key; did you mean nodes? allowed keys: duration, "
        "nodes, reasons, schedule"
    ]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("gpulb:labs", "gpulb:labs: unknown namespace 'gpulb'; did you mean gpulab:labs?"),
        ("gpulabs:labs", "gpulabs:labs: unknown namespace 'gpulabs'; did you mean gpulab:labs?"),
        ("GPULab:labs", "GPULab:labs: unknown namespace 'GPULab'; did you mean gpulab:labs?"),
        ("gpu-lab:labs", "gpu-lab:labs: unknown namespace 'gpu-lab'; did you mean gpulab:labs?"),
        ("gpulba:labs", "gpulba:labs: unknown namespace 'gpulba'; did you mean gpulab:labs?"),
        (
            "labs",
            "labs: no namespace; Pulumi keys are <namespace>:<name>; did you mean gpulab:labs?",
        ),
        (
            "region",
            "region: no namespace; Pulumi keys are <namespace>:<name>; did you mean aws:region?",
        ),
        ("Labs", "Labs: no namespace; Pulumi keys are <namespace>:<name>; did you mean gpulab:labs?"),
    ],
)
def test_an_unread_key_is_refused_naming_the_key_gpulab_reads(key, expected):
    values = stack_values(**{key: {"intro": BASE["gpulab:labs"]["intro"]}})
    assert problems(values) == [expected]


@pytest.mark.parametrize(
    "key", ["aws:profile", "pulumi:tags", "kubernetes:context", "eks:anything", "gitlab:token", "random:seed"]
)
def test_keys_of_pulumi_and_of_provider_namespaces_pass(key):
    assert parsed(stack_values(**{key: "value"})).settings.labs.keys() == {"intro"}


def test_pulumi_up_refuses_a_near_miss_namespace_from_the_env(monkeypatch):
    # The Pulumi CLI hands `pulumi up` its configuration in PULUMI_CONFIG, which load() reads as well.
    pulumi.runtime.set_all_config({})
    environment = {**as_cli_config(stack_values()), "gpulb:labs": "{}"}
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(environment))
    with pytest.raises(pulumi.RunError, match=r"gpulb:labs: unknown namespace 'gpulb'; did you mean gpulab:labs\?"):
        program.main()
