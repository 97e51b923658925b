"""The CrossGuard policy pack in policy/: every stack passes it, each rule fires on a bad resource, the pack loads."""

import ast
import copy
import importlib
import importlib.util
import inspect
import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pulumi_aws
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime import proto
from pulumi.runtime.proto import analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel, ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

from components import labels
from components.karpenter import iam_policies, manifests
from domain.capacity.instance_types import GPU_INSTANCE_TYPES
from domain.stack import endpoint
from render.harness import Registration, Run
from tests.conftest import ROOT, STACK_FILES, run_stack_file

POLICY_DIR = ROOT / "policy"
# CrossGuard runs the pack with policy/ on sys.path (runpy of the folder), so its modules import each other by bare
# name; the tests see them the same way.
if str(POLICY_DIR) not in sys.path:
    sys.path.append(str(POLICY_DIR))
rules = importlib.import_module("rules")


def load_pack_module() -> ModuleType:
    """policy/__main__.py under another name, so that its `if __name__ == "__main__"` PolicyPack() does not run."""
    spec = importlib.util.spec_from_file_location("gpulab_policy_pack", POLICY_DIR / "__main__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def violations(resource: Registration | tuple[str, dict], stack: str = "staging") -> dict[str, list[str]]:
    """Every rule's messages for one resource, keyed by policy name; rules with nothing to say are left out."""
    resource_type, props = (resource.type, resource.inputs) if isinstance(resource, Registration) else resource
    found = {name: rule(resource_type, props, stack) for name, rule in rules.RULES.items()}
    return {name: messages for name, messages in found.items() if messages}


def mutated(run: Run, type_token: str, name: str) -> dict[str, Any]:
    """A deep copy of a recorded resource's inputs, for a test to break."""
    return copy.deepcopy(run.one(type_token, name).inputs)


def only(found: dict[str, list[str]], policy: str) -> str:
    """The single message of the single rule that fired."""
    assert list(found) == [policy], found
    (message,) = found[policy]
    return message


# --- (a) every stack file in the repository passes every rule -------------------------------------------------------


@pytest.fixture(scope="module", params=STACK_FILES, ids=lambda path: path.name)
def stack_file_run(request: pytest.FixtureRequest) -> tuple[str, Run]:
    path: Path = request.param
    return path.name.split(".")[1], run_stack_file(path)


def test_every_resource_of_every_stack_file_passes_every_rule(stack_file_run: tuple[str, Run]) -> None:
    stack, run = stack_file_run
    failing = {f"{r.type}::{r.name}": found for r in run.resources if (found := violations(r, stack))}
    assert failing == {}


def test_the_base_stack_has_a_resource_for_each_rule_to_judge(base_run: Run) -> None:
    # Otherwise the check above would pass for a rule whose type token matches nothing the program registers.
    recorded = {r.type for r in base_run.resources}
    judged = {
        rules.NODE_POOL,
        rules.EC2_NODE_CLASS,
        rules.SQS_QUEUE,
        rules.SQS_QUEUE_POLICY,
        rules.IAM_POLICY,
        rules.EKS_COMPONENT,
        rules.LOG_GROUP,
        rules.IAM_ROLE,
    }
    assert judged <= recorded


# --- (b) each rule fires on a bad resource, starting from the base stack's real one -------------------------------

NODE_POOL_NAME = "nodepool-intro"
NODE_CLASS_NAME = "ec2nodeclass-intro"


def test_gpu_nodepool_without_the_gpu_taint_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.NODE_POOL, NODE_POOL_NAME)
    props["spec"]["template"]["spec"]["taints"] = []
    message = only(violations((rules.NODE_POOL, props)), "gpu-nodepool-isolation")
    assert re.search(r"^spec\.template\.spec\.taints has no nvidia\.com/gpu:NoSchedule taint", message)


def test_gpu_nodepool_whose_gpu_taint_only_prefers_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.NODE_POOL, NODE_POOL_NAME)
    props["spec"]["template"]["spec"]["taints"][0]["effect"] = "PreferNoSchedule"
    message = only(violations((rules.NODE_POOL, props)), "gpu-nodepool-isolation")
    assert re.search(r"taints has no nvidia\.com/gpu:NoSchedule taint", message)


def test_gpu_nodepool_without_a_gpu_limit_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.NODE_POOL, NODE_POOL_NAME)
    del props["spec"]["limits"]["nvidia.com/gpu"]
    message = only(violations((rules.NODE_POOL, props)), "gpu-nodepool-isolation")
    assert re.search(r"^spec\.limits has no nvidia\.com/gpu entry", message)


def test_gpu_nodepool_without_a_consolidation_policy_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.NODE_POOL, NODE_POOL_NAME)
    del props["spec"]["disruption"]["consolidationPolicy"]
    message = only(violations((rules.NODE_POOL, props)), "gpu-nodepool-isolation")
    assert re.search(r"^spec\.disruption\.consolidationPolicy is not set: .*WhenEmptyOrUnderutilized", message)


def test_gpu_nodepool_without_a_termination_grace_period_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.NODE_POOL, NODE_POOL_NAME)
    del props["spec"]["template"]["spec"]["terminationGracePeriod"]
    message = only(violations((rules.NODE_POOL, props)), "gpu-nodepool-isolation")
    assert re.search(r"^spec\.template\.spec\.terminationGracePeriod is not set: .*billed without bound", message)


def cpu_node_pool(run: Run) -> dict[str, Any]:
    """The base stack's NodePool stripped of every sign that it is for GPUs."""
    props = mutated(run, rules.NODE_POOL, NODE_POOL_NAME)
    template = props["spec"]["template"]
    template["spec"]["taints"] = []
    del props["spec"]["limits"]["nvidia.com/gpu"]
    del template["metadata"]["labels"]["nvidia.com/gpu.present"]
    template["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m7i.large"]},
    ]
    return props


def test_a_nodepool_asking_no_gpu_is_not_judged_as_a_gpu_one(base_run: Run) -> None:
    assert violations((rules.NODE_POOL, cpu_node_pool(base_run))) == {}


@pytest.mark.parametrize(
    "requirement",
    [
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
        {"key": "karpenter.k8s.aws/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p4d"]},
    ],
    ids=lambda r: r["key"].rsplit("/", 1)[-1],
)
def test_a_nodepool_selecting_gpus_any_way_must_be_isolated(base_run: Run, requirement: dict[str, Any]) -> None:
    props = cpu_node_pool(base_run)
    props["spec"]["template"]["spec"]["requirements"].append(requirement)
    messages = violations((rules.NODE_POOL, props))["gpu-nodepool-isolation"]
    assert [m.split(" ")[0] for m in messages] == ["spec.template.spec.taints", "spec.limits"]


def test_latest_ami_alias_fires_in_prod_but_not_in_staging(base_run: Run) -> None:
    props = mutated(base_run, rules.EC2_NODE_CLASS, NODE_CLASS_NAME)
    props["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    message = only(violations((rules.EC2_NODE_CLASS, props), stack="prod"), "no-latest-ami-in-production")
    assert re.search(r"^spec\.amiSelectorTerms\[0\]\.alias is 'al2023@latest' in production stack 'prod'", message)
    assert violations((rules.EC2_NODE_CLASS, props), stack="staging") == {}


@pytest.mark.parametrize(
    ("stack", "production"),
    [
        ("prod", True),
        ("production", True),
        ("prod-eu", True),
        ("PROD", True),
        ("acme/gpulab/prod", True),
        ("", True),  # the CLI did not name the stack: fail closed
        ("staging", False),
        ("preprod", False),
        ("dev-prod-copy", False),
    ],
)
def test_production_is_a_stack_named_prod_or_starting_with_prod(stack: str, production: bool) -> None:
    assert rules.is_production(stack) is production


ROOT_VOLUME_ENCRYPTED = ("blockDeviceMappings", 0, "ebs", "encrypted")
NOT_ENCRYPTED = r"^spec\.blockDeviceMappings\[0\]\.ebs\.encrypted is not true$"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (ROOT_VOLUME_ENCRYPTED, False, NOT_ENCRYPTED),
        (ROOT_VOLUME_ENCRYPTED, "true", NOT_ENCRYPTED),
        (("metadataOptions", "httpTokens"), "optional", r"^spec\.metadataOptions\.httpTokens is 'optional', not "),
        (("metadataOptions", "httpPutResponseHopLimit"), 2, r"^spec\.metadataOptions\.httpPutResponseHopLimit is 2, "),
    ],
    ids=["unencrypted-volume", "encrypted-as-a-string", "imdsv1-allowed", "hop-limit-2"],
)
def test_ec2nodeclass_with_weak_volume_or_metadata_fires(
    base_run: Run, path: tuple[Any, ...], value: Any, expected: str
) -> None:
    props = mutated(base_run, rules.EC2_NODE_CLASS, NODE_CLASS_NAME)
    target = props["spec"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    message = only(violations((rules.EC2_NODE_CLASS, props)), "ec2nodeclass-hardening")
    assert re.search(expected, message)


def test_ec2nodeclass_with_default_metadata_options_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.EC2_NODE_CLASS, NODE_CLASS_NAME)
    del props["spec"]["metadataOptions"]
    messages = violations((rules.EC2_NODE_CLASS, props))["ec2nodeclass-hardening"]
    assert len(messages) == 2
    assert re.search(r"httpTokens is None, not 'required'", messages[0])
    assert re.search(r"httpPutResponseHopLimit is None, not 1", messages[1])


def test_ec2nodeclass_hop_limit_sent_as_a_float_passes(base_run: Run) -> None:
    # The engine sends numbers as protobuf doubles: CrossGuard sees 1.0 where the harness records 1.
    props = mutated(base_run, rules.EC2_NODE_CLASS, NODE_CLASS_NAME)
    props["spec"]["metadataOptions"]["httpPutResponseHopLimit"] = 1.0
    assert violations((rules.EC2_NODE_CLASS, props)) == {}


QUEUE_NAME = "karpenter-interruption"


def test_queue_without_server_side_encryption_fires(base_run: Run) -> None:
    props = mutated(base_run, rules.SQS_QUEUE, QUEUE_NAME)
    props["sqsManagedSseEnabled"] = False
    message = only(violations((rules.SQS_QUEUE, props)), "sqs-queue-encrypted")
    assert re.search(r"^neither sqsManagedSseEnabled is true nor kmsMasterKeyId is set", message)


def test_queue_encrypted_with_a_kms_key_instead_passes(base_run: Run) -> None:
    props = mutated(base_run, rules.SQS_QUEUE, QUEUE_NAME)
    del props["sqsManagedSseEnabled"]
    props["kmsMasterKeyId"] = "alias/aws/sqs"
    assert violations((rules.SQS_QUEUE, props)) == {}


def queue_policy(run: Run) -> dict[str, Any]:
    """The base stack's queue policy document, decoded."""
    return json.loads(run.one(rules.SQS_QUEUE_POLICY, QUEUE_NAME).inputs["policy"])


def with_policy(run: Run, type_token: str, name: str, document: Any) -> tuple[str, dict[str, Any]]:
    props = mutated(run, type_token, name)
    props["policy"] = document if isinstance(document, str) else json.dumps(document)
    return type_token, props


@pytest.mark.parametrize(
    "breakage",
    [
        lambda deny: deny.clear(),
        lambda deny: deny.update(Effect="Allow"),
        lambda deny: deny["Condition"]["Bool"].update({"aws:SecureTransport": "true"}),
        lambda deny: deny.update(Action="sqs:SendMessage"),
        lambda deny: deny.update(Principal={"Service": "events.amazonaws.com"}),
    ],
    ids=["no-deny-statement", "allow-instead-of-deny", "denies-tls", "denies-one-action", "denies-one-principal"],
)
def test_queue_policy_without_a_tls_only_deny_fires(base_run: Run, breakage: Any) -> None:
    document = queue_policy(base_run)
    breakage(document["Statement"][1])
    found = violations(with_policy(base_run, rules.SQS_QUEUE_POLICY, QUEUE_NAME, document))
    message = only(found, "sqs-queue-policy-tls-only")
    assert re.search(r'^policy has no statement with Effect "Deny".*aws:SecureTransport', message)


def test_a_single_statement_lowercase_key_queue_policy_passes(base_run: Run) -> None:
    deny = queue_policy(base_run)["Statement"][1]
    deny["Condition"] = {"Bool": {"aws:securetransport": False}}
    document = {"Version": "2012-10-17", "Statement": deny}
    assert violations(with_policy(base_run, rules.SQS_QUEUE_POLICY, QUEUE_NAME, document)) == {}


def test_queue_policy_that_is_not_json_fires(base_run: Run) -> None:
    found = violations(with_policy(base_run, rules.SQS_QUEUE_POLICY, QUEUE_NAME, "{not json"))
    message = only(found, "sqs-queue-policy-tls-only")
    assert re.search(r"^policy is not valid JSON \(.+\), so it cannot be checked$", message)


LIFECYCLE = "karpenter-node-lifecycle"  # holds ec2:TerminateInstances, scoped by ARN and tag condition
DISCOVERY = "karpenter-resource-discovery"  # holds ec2:Describe* on "*", conditioned on the region


def iam_statement(run: Run, policy_name: str, sid: str) -> dict[str, Any]:
    document = json.loads(run.one(rules.IAM_POLICY, policy_name).inputs["policy"])
    (statement,) = [s for s in document["Statement"] if s["Sid"] == sid]
    return statement


def judge_statement(run: Run, statement: dict[str, Any], type_token: str = rules.IAM_POLICY) -> dict[str, list[str]]:
    """Violations of the lifecycle policy with its statements replaced by this one."""
    document = {"Version": "2012-10-17", "Statement": [statement]}
    _, props = with_policy(run, rules.IAM_POLICY, LIFECYCLE, document)
    return violations((type_token, props))


def test_terminate_instances_anywhere_without_condition_fires(base_run: Run) -> None:
    statement = iam_statement(base_run, LIFECYCLE, "AllowScopedDeletion")
    statement.update(Action=["ec2:TerminateInstances"], Resource="*")
    del statement["Condition"]
    message = only(judge_statement(base_run, statement), "no-unconditioned-ec2-mutation")
    expected = (
        r'^Statement\[0\] \(AllowScopedDeletion\) allows ec2:TerminateInstances on Resource "\*" with no Condition'
    )
    assert re.search(expected, message)


def test_terminate_instances_anywhere_with_a_condition_passes(base_run: Run) -> None:
    statement = iam_statement(base_run, LIFECYCLE, "AllowScopedDeletion")
    statement.update(Action=["ec2:TerminateInstances"], Resource="*")
    assert statement["Condition"]
    assert judge_statement(base_run, statement) == {}


def test_describe_instances_anywhere_without_condition_passes(base_run: Run) -> None:
    statement = iam_statement(base_run, DISCOVERY, "AllowRegionalReadActions")
    assert "ec2:DescribeInstances" in statement["Action"] and statement["Resource"] == "*"
    del statement["Condition"]
    assert judge_statement(base_run, statement) == {}


@pytest.mark.parametrize(
    ("action", "resource"),
    [
        ("ec2:*", "*"),
        ("*", "*"),
        ("ec2:Delete*", ["*"]),
        ("EC2:terminateinstances", "*"),
        ("ec2:CreateTags", ["arn:aws:ec2:*:*:instance/*", "*"]),
    ],
)
def test_any_mutating_ec2_anywhere_without_a_condition_fires(base_run: Run, action: str, resource: Any) -> None:
    statement = {"Sid": "TooBroad", "Effect": "Allow", "Action": action, "Resource": resource}
    message = only(judge_statement(base_run, statement), "no-unconditioned-ec2-mutation")
    assert re.search(rf"^Statement\[0\] \(TooBroad\) allows {re.escape(action)} on Resource", message)


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": ["ec2:Describe*", "ec2:GetConsoleOutput", "ec2:ListImagesInRecycleBin"]},
        {"Effect": "Deny", "Action": "ec2:*"},
        {"Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "arn:aws:ec2:eu-west-1:1:instance/i-0abc"},
        {"Effect": "Allow", "Action": "s3:*"},
    ],
    ids=["read-only", "deny", "one-instance", "not-ec2"],
)
def test_read_only_denied_scoped_or_non_ec2_statements_pass(base_run: Run, statement: dict[str, Any]) -> None:
    assert judge_statement(base_run, {"Resource": "*"} | statement) == {}


def test_not_action_leaving_ec2_allowed_anywhere_fires(base_run: Run) -> None:
    statement = {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}
    message = only(judge_statement(base_run, statement), "no-unconditioned-ec2-mutation")
    assert re.search(r"^Statement\[0\] allows every action but \['iam:\*'\]", message)


def test_inline_role_policy_is_held_to_the_same_rule(base_run: Run) -> None:
    statement = {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "*"}
    message = only(judge_statement(base_run, statement, rules.IAM_ROLE_POLICY), "no-unconditioned-ec2-mutation")
    assert re.search(r"allows ec2:RunInstances on Resource", message)


CLUSTER_NAME = "cluster-eks"


@pytest.mark.parametrize("key_arn", [None, ""], ids=["unset", "empty"])
def test_eks_component_without_a_secrets_key_fires(base_run: Run, key_arn: str | None) -> None:
    props = mutated(base_run, rules.EKS_COMPONENT, CLUSTER_NAME)
    if key_arn is None:
        del props["encryptionConfigKeyArn"]
    else:
        props["encryptionConfigKeyArn"] = key_arn
    message = only(violations((rules.EKS_COMPONENT, props)), "eks-secrets-encryption")
    assert re.search(r"^encryptionConfigKeyArn is not set", message)


def test_eks_component_registered_without_inputs_is_not_judged() -> None:
    # What the engine sees of a remote component: the provider's Construct registers it with no inputs.
    assert violations((rules.EKS_COMPONENT, {})) == {}


def eks_cluster(run: Run) -> dict[str, Any]:
    """The aws.eks.Cluster that pulumi-eks creates from the component (not built under mocks), as its inputs.

    pulumi-eks 4.4.0 (nodejs/eks/cluster/cluster.ts) copies the endpoint settings into vpcConfig and deletion
    protection and the upgrade policy as they are; what the component leaves unset stays unset.
    """
    component = run.one(rules.EKS_COMPONENT, CLUSTER_NAME).inputs
    endpoint_keys = ("endpointPublicAccess", "publicAccessCidrs", "endpointPrivateAccess")
    return {
        "name": component["name"],
        "version": component["version"],
        "encryptionConfig": {"provider": {"keyArn": component["encryptionConfigKeyArn"]}, "resources": ["secrets"]},
        "vpcConfig": {key: component[key] for key in endpoint_keys if key in component},
        **{key: component[key] for key in ("deletionProtection", "upgradePolicy") if key in component},
    }


def test_secrets_encrypted_with_a_key_pass_as_object_or_list(base_run: Run) -> None:
    props = eks_cluster(base_run)
    assert violations((rules.EKS_CLUSTER, props)) == {}
    props["encryptionConfig"] = [props["encryptionConfig"]]
    assert violations((rules.EKS_CLUSTER, props)) == {}


NO_SECRETS_ENCRYPTION = r'^encryptionConfig does not cover resources \["secrets"\]'


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda props: props.pop("encryptionConfig"), NO_SECRETS_ENCRYPTION),
        (lambda props: props["encryptionConfig"].update(resources=[]), NO_SECRETS_ENCRYPTION),
        (
            lambda props: props["encryptionConfig"].update(provider={}),
            r"^encryptionConfig for secrets has no provider\.keyArn$",
        ),
    ],
    ids=["no-encryption-config", "no-secrets", "no-key"],
)
def test_eks_cluster_without_kms_encryption_of_secrets_fires(base_run: Run, breakage: Any, expected: str) -> None:
    props = eks_cluster(base_run)
    breakage(props)
    assert re.search(expected, only(violations((rules.EKS_CLUSTER, props)), "eks-secrets-encryption"))


# --- the pack is self-contained, and its copies of the project's constants are the project's ---------------------


def test_the_pack_imports_only_stdlib_pulumi_policy_and_itself() -> None:
    allowed = set(sys.stdlib_module_names) | {"pulumi_policy", "rules"}
    for path in sorted(POLICY_DIR.glob("*.py")):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
        assert imported <= allowed, f"{path.name} imports {sorted(imported - allowed)}"


def test_rules_module_is_the_one_in_policy() -> None:
    assert Path(rules.__file__).resolve().parent == POLICY_DIR


def test_pack_label_and_taint_constants_equal_the_projects() -> None:
    assert rules.GPU_RESOURCE == labels.GPU_RESOURCE
    assert rules.GPU_TAINT == labels.GPU_TAINT
    assert rules.GPU_PRESENT_LABEL == labels.GPU_PRESENT_LABEL
    assert manifests.GPU_COUNT_LABEL.startswith(rules.GPU_REQUIREMENT_PREFIX)


def test_pack_type_tokens_are_the_programs_and_the_aws_sdks() -> None:
    assert f"kubernetes:{manifests.NODE_POOL_API}:NodePool" == rules.NODE_POOL
    assert f"kubernetes:{manifests.NODE_CLASS_API}:{manifests.NODE_CLASS_KIND}" == rules.EC2_NODE_CLASS
    # Not registered by any stack under mocks: checked against the SDK classes that would register them.
    for token, sdk_class in [
        (rules.IAM_ROLE_POLICY, pulumi_aws.iam.RolePolicy),
        (rules.EKS_CLUSTER, pulumi_aws.eks.Cluster),
        (rules.IAM_POLICY, pulumi_aws.iam.Policy),
        (rules.SQS_QUEUE, pulumi_aws.sqs.Queue),
        (rules.SQS_QUEUE_POLICY, pulumi_aws.sqs.QueuePolicy),
        (rules.LOG_GROUP, pulumi_aws.cloudwatch.LogGroup),
        (rules.IAM_ROLE, pulumi_aws.iam.Role),
    ]:
        assert f"'{token}'" in inspect.getsource(sdk_class), f"{sdk_class.__name__} does not register {token}"


def test_pack_endpoint_and_identity_constants_are_the_projects() -> None:
    assert rules.EVERYWHERE == endpoint.EVERYWHERE
    assert rules.POD_IDENTITY_PRINCIPAL == iam_policies.POD_IDENTITY_PRINCIPAL
    assert rules.POD_IDENTITY_SCOPE_TAGS == (
        iam_policies.POD_IDENTITY_CLUSTER_ARN_TAG,
        iam_policies.POD_IDENTITY_NAMESPACE_TAG,
        iam_policies.POD_IDENTITY_SERVICE_ACCOUNT_TAG,
    )


def test_every_offered_gpu_family_marks_a_gpu_nodepool() -> None:
    families = {instance_type.split(".")[0] for instance_type in GPU_INSTANCE_TYPES}
    assert families <= rules.NVIDIA_GPU_FAMILIES


def test_pack_requirements_pin_policy_and_the_projects_pulumi() -> None:
    def pins(path: Path) -> dict[str, str]:
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        return dict(line.split("==") for line in lines if line)

    pack, project = pins(POLICY_DIR / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert pack["pulumi-policy"] == "1.21.0"
    assert pack["pulumi"] == project["pulumi"]


# --- (c) the pack builds, and its policies run the rules as CrossGuard calls them --------------------------------


@pytest.fixture(scope="module")
def pack() -> ModuleType:
    return load_pack_module()


def test_the_pack_builds_a_mandatory_policy_per_rule_no_server(pack: ModuleType) -> None:
    policies = pack.policies()
    assert [p.name for p in policies] == list(rules.RULES)
    assert all(isinstance(p, ResourceValidationPolicy) for p in policies)
    assert {p.enforcement_level for p in policies} == {EnforcementLevel.MANDATORY}
    assert [p.description for p in policies] == [rules.summary(rule) for rule in rules.RULES.values()]
    assert all(p.description and p.description.endswith(".") for p in policies)
    # pulumi_policy.PolicyPack's own check of the name, which it makes only once it is already serving.
    assert re.fullmatch(r"[a-zA-Z0-9-_.]{1,100}", pack.PACK_NAME)


def test_every_rule_documents_why_beyond_its_summary() -> None:
    for name, rule in rules.RULES.items():
        assert len(inspect.getdoc(rule).split("\n\n")) >= 2, f"{name}: the docstring says what, not why"


def run_policy(pack: ModuleType, name: str, resource_type: str, props: dict[str, Any]) -> list[str]:
    """Runs one policy as pulumi-policy's analyzer does: props behind its unknown-checking proxy."""
    (policy,) = [p for p in pack.policies() if p.name == name]
    reported: list[str] = []
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(props), "urn:test", "test", None, None)
    policy.validate(args, lambda message, urn=None: reported.append(message))
    return reported


def test_policy_reads_the_stack_from_the_clis_environment(
    pack: ModuleType, base_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = mutated(base_run, rules.EC2_NODE_CLASS, NODE_CLASS_NAME)
    props["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    monkeypatch.setenv("PULUMI_STACK", "staging")
    assert run_policy(pack, "no-latest-ami-in-production", rules.EC2_NODE_CLASS, props) == []
    monkeypatch.setenv("PULUMI_STACK", "prod")
    (message,) = run_policy(pack, "no-latest-ami-in-production", rules.EC2_NODE_CLASS, props)
    assert re.search(r"alias is 'al2023@latest' in production stack 'prod'", message)
    monkeypatch.delenv("PULUMI_STACK")
    assert pack.current_stack() == ""
    assert run_policy(pack, "no-latest-ami-in-production", rules.EC2_NODE_CLASS, props) != []


def test_policies_pass_every_recorded_resource_behind_the_proxy(
    pack: ModuleType, base_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_STACK", "staging")
    for resource in base_run.resources:
        for name in rules.RULES:
            assert run_policy(pack, name, resource.type, copy.deepcopy(resource.inputs)) == [], (resource.name, name)


def test_a_preview_unknown_reaches_pulumi_policy_as_unknown(pack: ModuleType, base_run: Run) -> None:
    # pulumi-policy reports UnknownValueError as an advisory "can't run policy during preview"; the rule runs for real
    # during `pulumi up`, once the queue's ARN in the document is known.
    props = mutated(base_run, rules.SQS_QUEUE_POLICY, QUEUE_NAME)
    props["policy"] = UNKNOWN_STRING_VALUE
    # UnknownValueError has an empty str(); its text is in .message.
    with pytest.raises(UnknownValueError, match=r"^$") as caught:
        run_policy(pack, "sqs-queue-policy-tls-only", rules.SQS_QUEUE_POLICY, props)
    assert re.fullmatch(r"string value at \.policy can't be known during preview", caught.value.message)


# The analyzer as the CLI starts it: `python -u -m pulumi.policy <engine address> .` in the pack's folder, with the
# stack in the environment. The CLI runs it in policy/venv; this uses the test interpreter, which has the same pins.


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    env = dict(os.environ, PULUMI_STACK="prod", PULUMI_PROJECT="gpulab", PULUMI_DRY_RUN="true")
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=POLICY_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)
        port = process.stdout.readline().strip() if ready else ""
        if not port.isdigit():
            process.kill()
            pytest.fail(f"the policy pack did not start: {process.communicate(timeout=10)[1]}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()


def analyze(analyzer: analyzer_pb2_grpc.AnalyzerStub, resource_type: str, props: dict[str, Any]) -> list[Any]:
    properties = json_format.ParseDict(props, struct_pb2.Struct())
    request = proto.AnalyzeRequest(type=resource_type, properties=properties, urn="urn:test", name="test")
    return list(analyzer.Analyze(request, timeout=30).diagnostics)


def test_analyzer_serves_the_pack_with_every_policy_mandatory(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == "gpulab"
    assert sorted(p.name for p in info.policies) == sorted(rules.RULES)
    assert {p.enforcementLevel for p in info.policies} == {proto.MANDATORY}


def test_the_analyzer_blocks_latest_ami_in_the_clis_prod_stack(
    analyzer: analyzer_pb2_grpc.AnalyzerStub, base_run: Run
) -> None:
    props = mutated(base_run, rules.EC2_NODE_CLASS, NODE_CLASS_NAME)
    assert analyze(analyzer, rules.EC2_NODE_CLASS, props) == []
    props["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    (diagnostic,) = analyze(analyzer, rules.EC2_NODE_CLASS, props)
    assert (diagnostic.policyName, diagnostic.enforcementLevel) == ("no-latest-ami-in-production", proto.MANDATORY)
    assert re.search(r"in production stack 'prod'", diagnostic.message)


def test_an_unknown_policy_document_is_only_advisory(analyzer: analyzer_pb2_grpc.AnalyzerStub, base_run: Run) -> None:
    props = mutated(base_run, rules.IAM_POLICY, LIFECYCLE)
    props["policy"] = UNKNOWN_STRING_VALUE
    (diagnostic,) = analyze(analyzer, rules.IAM_POLICY, props)
    assert (diagnostic.policyName, diagnostic.enforcementLevel) == ("no-unconditioned-ec2-mutation", proto.ADVISORY)
    assert re.search(r"can't run policy 'no-unconditioned-ec2-mutation' .* during preview", diagnostic.message)


def test_the_analyzer_blocks_an_unprotected_prod_cluster(
    analyzer: analyzer_pb2_grpc.AnalyzerStub, base_run: Run
) -> None:
    props = mutated(base_run, rules.EKS_COMPONENT, CLUSTER_NAME)
    props |= {"deletionProtection": False, "endpointPrivateAccess": True}
    (diagnostic,) = analyze(analyzer, rules.EKS_COMPONENT, props)
    policy = "eks-deletion-protection-in-production"
    assert (diagnostic.policyName, diagnostic.enforcementLevel) == (policy, proto.MANDATORY)
    assert re.search(r"in production stack 'prod'", diagnostic.message)
