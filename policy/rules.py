"""gpulab's CrossGuard rules as plain functions: `(resource_type, props, stack) -> [violation message, ...]`.

`props` are a resource's inputs as Pulumi hands them to a policy pack: camelCase keys, the shape that
`render/harness.py` records in `Registration.inputs`. Under CrossGuard they arrive as read-only Mapping and
Sequence proxies that raise pulumi_policy's UnknownValueError when a value read is unknown during a preview, so the
rules only read through the Mapping/Sequence protocols and let that error through: pulumi-policy turns it into an
advisory "can't run policy during preview", and the rule enforces during `pulumi up`, when the value is known.

The module imports nothing from the project or from pulumi: CrossGuard runs `policy/` as a program of its own (from
the pack's folder, in the pack's virtualenv), where neither `components` nor the project's dependencies are
importable, and `pulumi policy publish` ships this folder alone. The constants below mirror the project's;
tests/test_policy.py asserts that they are equal so that the two cannot drift.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
SQS_QUEUE = "aws:sqs/queue:Queue"
SQS_QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
IAM_POLICY = "aws:iam/policy:Policy"
IAM_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
EKS_COMPONENT = "eks:index:Cluster"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
IAM_ROLE = "aws:iam/role:Role"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"

# The zero-to-jupyterhub chart, and the authenticators that let anyone in: JupyterHub's DummyAuthenticator by its
# entry point name and import path (jupyterhub 5.5.0 entry points). The chart's own default is `dummy`
# (values.yaml hub.config.JupyterHub.authenticator_class), so a release that names none lets anyone in too.
JUPYTERHUB_CHART = "jupyterhub"
NO_SIGN_IN_AUTHENTICATORS = frozenset({"dummy", "jupyterhub.auth.DummyAuthenticator"})

# Mirrors of components/labels.py.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

# Mirrors of components/labels.py: what a lab's GPU limit costs and its cap, USD per hour at gpulab's reference prices.
GPU_LIMIT_COST_ANNOTATION = "gpulab.dev/gpu-limit-hourly-cost-usd"
MAX_HOURLY_COST_ANNOTATION = "gpulab.dev/max-hourly-cost-usd"

# A NodePool that selects on any of these well-known Karpenter labels (instance-gpu-count, -name, -manufacturer,
# -memory) asks for GPU instances.
GPU_REQUIREMENT_PREFIX = "karpenter.k8s.aws/instance-gpu-"
# EC2 families with NVIDIA GPUs: a superset of domain/capacity/instance_types.py, which leaves out families Karpenter
# does not count GPUs for or EC2 no longer offers; a NodePool naming any of them is still a GPU NodePool.
NVIDIA_GPU_FAMILIES = frozenset(
    {
        "g3", "g3s", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "g7", "g7e", "gr6", "gr6f",
        "p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200",
    }
)  # fmt: skip
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
INSTANCE_FAMILY_LABEL = "karpenter.k8s.aws/instance-family"

# Mirror of domain/stack/endpoint.py: the block EKS uses when publicAccessCidrs is not set.
EVERYWHERE = "0.0.0.0/0"

# Mirrors of components/karpenter/iam_policies.py: the principal EKS Pod Identity assumes roles as, and the session
# tags it attaches that name the cluster, the namespace and the service account (EKS User Guide, pod-id-abac).
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
POD_IDENTITY_SCOPE_TAGS = ("eks-cluster-arn", "kubernetes-namespace", "kubernetes-service-account")

# EC2 actions that only read; IAM matches action names case-insensitively.
READ_ONLY_EC2_PREFIXES = ("describe", "get", "list")

Rule = Callable[[str, Mapping[str, Any], str], list[str]]


def is_production(stack: str) -> bool:
    """Whether `stack` is a production stack: named "prod" or starting with "prod" ("prod-eu", "production").

    Accepts a fully qualified name ("org/project/prod"). An empty name, which is what the pack sees when the CLI did
    not say which stack it runs for, counts as production, so that a missing stack name never loosens a rule.
    """
    name = stack.rsplit("/", 1)[-1].strip().lower()
    return not name or name.startswith("prod")


def gpu_node_pool_isolation(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """GPU NodePools have the nvidia.com/gpu taint and limit, a consolidation policy and a terminationGracePeriod.

    Without the taint, pods that need no GPU land on GPU nodes and keep them from ever being empty, so Karpenter never
    removes them. The nvidia.com/gpu limit is what caps a lab's seats and spend: without it Karpenter launches GPU
    nodes for as many pending pods as there are. Karpenter's default consolidationPolicy is WhenEmptyOrUnderutilized,
    which evicts running learners to repack nodes; gpulab states the policy so that a learner's session is ended only
    on purpose. Expiry ignores disruption budgets and karpenter.sh/do-not-disrupt: without a terminationGracePeriod, an
    expired node (or one of a deleted NodePool) whose pods carry do-not-disrupt stays cordoned and billed without bound.
    """
    if resource_type != NODE_POOL:
        return []
    spec = _mapping(props.get("spec"))
    template_spec = _mapping(_mapping(spec.get("template")).get("spec"))
    if not _is_gpu_node_pool(spec):
        return []
    violations = []
    taints = [_mapping(t) for t in _items(template_spec.get("taints"))]
    if not any(t.get("key") == GPU_TAINT["key"] and t.get("effect") == GPU_TAINT["effect"] for t in taints):
        violations.append(
            f"spec.template.spec.taints has no {GPU_TAINT['key']}:{GPU_TAINT['effect']} taint: pods that need no GPU "
            "could be scheduled on GPU nodes and keep them running"
        )
    if not _mapping(spec.get("limits")).get(GPU_RESOURCE):
        violations.append(
            f"spec.limits has no {GPU_RESOURCE} entry: nothing caps how many GPUs (learner seats) Karpenter launches"
        )
    if not _mapping(spec.get("disruption")).get("consolidationPolicy"):
        violations.append(
            "spec.disruption.consolidationPolicy is not set: Karpenter's default, WhenEmptyOrUnderutilized, evicts "
            "running learners to repack nodes; set it (gpulab's default is WhenEmpty)"
        )
    if not template_spec.get("terminationGracePeriod"):
        violations.append(
            "spec.template.spec.terminationGracePeriod is not set: a draining node whose pods carry "
            "karpenter.sh/do-not-disrupt stays cordoned and billed without bound"
        )
    return violations


def no_latest_ami_in_production(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """A production EC2NodeClass pins its AMI version: no `@latest` alias.

    With `al2023@latest` every new EKS-optimized AMI release makes every node drifted, and Karpenter drains and
    replaces them all, within its disruption budgets, onto an NVIDIA driver that nobody has tried in staging.
    Staging may track @latest to find out early.
    """
    if resource_type != EC2_NODE_CLASS or not is_production(stack):
        return []
    spec = _mapping(props.get("spec"))
    violations = []
    for index, term in enumerate(_items(spec.get("amiSelectorTerms"))):
        alias = _mapping(term).get("alias")
        if isinstance(alias, str) and alias.strip().lower().endswith("@latest"):
            violations.append(
                f"spec.amiSelectorTerms[{index}].alias is {alias!r} in production stack {stack!r}: pin a released "
                "version (al2023@vYYYYMMDD) that staging has run"
            )
    return violations


def ec2_node_class_hardening(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """EC2NodeClass: every EBS volume encrypted; IMDSv2 only (httpTokens required), hop limit 1.

    Learners run arbitrary code on these nodes. With a hop limit of 1 the instance metadata service does not answer
    from a pod's network namespace, so a notebook cannot read the node role's credentials; IMDSv1 has no session
    token at all. The metadata options are required explicitly, not left to Karpenter's defaults, because a preview
    shows only what the program sets. Unencrypted volumes would keep learners' data and pulled images in clear
    when EBS snapshots or volumes leave the account's control.
    """
    if resource_type != EC2_NODE_CLASS:
        return []
    spec = _mapping(props.get("spec"))
    violations = []
    for index, device in enumerate(_items(spec.get("blockDeviceMappings"))):
        if _mapping(_mapping(device).get("ebs")).get("encrypted") is not True:
            violations.append(f"spec.blockDeviceMappings[{index}].ebs.encrypted is not true")
    metadata = _mapping(spec.get("metadataOptions"))
    if metadata.get("httpTokens") != "required":
        violations.append(
            f"spec.metadataOptions.httpTokens is {metadata.get('httpTokens')!r}, not 'required' (IMDSv2 only)"
        )
    hop_limit = metadata.get("httpPutResponseHopLimit")
    if isinstance(hop_limit, bool) or hop_limit != 1:
        violations.append(
            f"spec.metadataOptions.httpPutResponseHopLimit is {hop_limit!r}, not 1: pods could reach the node's "
            "instance metadata and its IAM role's credentials"
        )
    return violations


def sqs_queue_encrypted(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """SQS queues (Karpenter's interruption queue) are encrypted at rest: SSE-SQS, or a KMS key.

    The interruption queue carries EC2 and AWS Health events about the account's instances; upstream's
    CloudFormation template turns SSE on, and gpulab follows it.
    """
    if resource_type != SQS_QUEUE:
        return []
    if props.get("sqsManagedSseEnabled") is True or props.get("kmsMasterKeyId"):
        return []
    return ["neither sqsManagedSseEnabled is true nor kmsMasterKeyId is set: the queue is not encrypted at rest"]


def sqs_queue_policy_tls_only(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """An SQS queue policy denies every request made without TLS (a Deny on aws:SecureTransport false).

    Upstream's interruption queue has this `DenyHTTP` statement; without it, a client of the queue could send or
    receive its messages over plain HTTP.
    """
    if resource_type != SQS_QUEUE_POLICY:
        return []
    document, error = _policy_document(props.get("policy"), "policy")
    if error:
        return [error]
    if any(_denies_insecure_transport(statement) for statement in _statements(document)):
        return []
    return [
        'policy has no statement with Effect "Deny", Principal "*", Action "sqs:*" and Condition '
        '{"Bool": {"aws:SecureTransport": "false"}}: the queue accepts requests over plain HTTP'
    ]


def no_unconditioned_ec2_mutation_on_any_resource(
    resource_type: str, props: Mapping[str, Any], stack: str
) -> list[str]:
    """No IAM statement allows a mutating EC2 action on Resource "*" without a Condition.

    Karpenter's controller may launch and terminate instances, but upstream scopes every such permission to ARNs and
    to the cluster's tags. An unconditioned `ec2:TerminateInstances` (or `ec2:*`, or `*`) on "*" would let a
    compromised controller, or anyone who can assume the role, delete every instance in the account, not only the
    lab's. Read-only actions (Describe*, Get*, List*) are exempt.
    """
    if resource_type not in (IAM_POLICY, IAM_ROLE_POLICY):
        return []
    document, error = _policy_document(props.get("policy"), "policy")
    if error:
        return [error]
    violations = []
    for index, statement in enumerate(_statements(document)):
        if statement.get("Effect") != "Allow" or statement.get("Condition"):
            continue
        if "NotResource" not in statement and "*" not in _strings(statement.get("Resource")):
            continue
        label = _label(index, statement)
        if "NotAction" in statement:
            excluded = {action.lower() for action in _strings(statement.get("NotAction"))}
            if not excluded & {"*", "ec2:*"}:
                violations.append(
                    f"{label} allows every action but {sorted(excluded)} (EC2 mutations included) on every resource "
                    "with no Condition"
                )
            continue
        mutating = [action for action in _strings(statement.get("Action")) if _is_mutating_ec2_action(action)]
        if mutating:
            violations.append(
                f'{label} allows {", ".join(mutating)} on Resource "*" with no Condition: scope it to ARNs or to '
                "the cluster's tags, as upstream's Karpenter policies do"
            )
    return violations


def eks_secrets_encryption(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """The EKS cluster encrypts Kubernetes secrets with a KMS key (envelope encryption).

    Without it, Kubernetes secrets rest in etcd under the encryption of its storage alone; turned on later, it leaves
    the secrets written before as they are until each is rewritten, and it cannot be turned off again, so it belongs
    in the cluster from the start. Checked on the pulumi-eks component
    (`encryptionConfigKeyArn`) and on the `aws.eks.Cluster` it creates (`encryptionConfig`): the component is a
    remote one, which the provider's Construct registers with no inputs, so under the engine only the child shows
    the setting; the component with no inputs at all is therefore not judged.
    """
    if resource_type == EKS_COMPONENT:
        if props and not props.get("encryptionConfigKeyArn"):
            return ["encryptionConfigKeyArn is not set: Kubernetes secrets are not envelope-encrypted with KMS"]
        return []
    if resource_type != EKS_CLUSTER:
        return []
    configs = [_mapping(c) for c in _items(props.get("encryptionConfig"))]
    secrets = [c for c in configs if "secrets" in _strings(c.get("resources"))]
    if not secrets:
        return ['encryptionConfig does not cover resources ["secrets"]: Kubernetes secrets are not encrypted with KMS']
    if not all(_mapping(c.get("provider")).get("keyArn") for c in secrets):
        return ["encryptionConfig for secrets has no provider.keyArn"]
    return []


def nodepool_within_max_hourly_cost(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """A NodePool with a cost cap (maxHourlyCost) states what its GPU limit costs, and that does not exceed the cap.

    That cost is the most the NodePool's nvidia.com/gpu limit lets Karpenter run per hour at gpulab's reference
    prices. A resource policy sees one resource at a time, and a NodePool alone says neither what its instance types
    cost nor how many slices a GPU has (that is in the lab's NodeOverlays), so the program states both figures on the
    NodePool and the rule compares them: the same line the stack configuration holds, kept for a change that would
    write NodePools without that check. It fails closed: a cap without a readable GPU limit cost is a violation.
    """
    if resource_type != NODE_POOL:
        return []
    annotations = _mapping(_mapping(props.get("metadata")).get("annotations"))
    if MAX_HOURLY_COST_ANNOTATION not in annotations:
        return []
    cap, at_limit = annotations.get(MAX_HOURLY_COST_ANNOTATION), annotations.get(GPU_LIMIT_COST_ANNOTATION)
    cap_usd, at_limit_usd = _amount(cap), _amount(at_limit)
    if cap_usd is None:
        return [f"metadata.annotations[{MAX_HOURLY_COST_ANNOTATION}] is {cap!r}, not a positive amount of US dollars"]
    if at_limit_usd is None:
        return [
            f"metadata.annotations[{GPU_LIMIT_COST_ANNOTATION}] is {at_limit!r}, not a positive amount of US dollars: "
            f"the cap of {cap} USD per hour cannot be checked"
        ]
    if at_limit_usd > cap_usd:
        return [
            f"the NodePool's GPU limit may cost up to {at_limit} USD per hour at the reference prices, more than its "
            f"cap of {cap} (maxHourlyCost): lower maxGpus, leave out the dearest instance type or raise the cap"
        ]
    return []


def eks_endpoint_not_open_in_production(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """A production EKS cluster's API endpoint is not public to 0.0.0.0/0 without the private endpoint as well.

    With the public endpoint open to every address and no private endpoint, the Kubernetes API answers the whole
    internet and the nodes' own API traffic leaves the VPC through NAT. gpulab keeps the public endpoint open by default
    for GitHub-hosted runners, which have no fixed addresses, and turns the private endpoint on; a production stack
    must keep one of the two: the private endpoint, or public access restricted to known blocks. Checked on the
    pulumi-eks component and on the aws.eks.Cluster it creates (`vpcConfig`), with EKS's defaults for what is unset
    (public on, 0.0.0.0/0, private off).
    """
    if not is_production(stack):
        return []
    endpoint = _endpoint_settings(resource_type, props)
    if endpoint is None:
        return []
    public = endpoint.get("endpointPublicAccess") is not False
    blocks = _strings(endpoint.get("publicAccessCidrs")) or [EVERYWHERE]
    private = endpoint.get("endpointPrivateAccess") is True
    open_blocks = [block for block in blocks if block.strip().endswith("/0")]
    if public and open_blocks and not private:
        return [
            f"the API endpoint is public to {open_blocks[0]} with no private endpoint in production stack {stack!r}: "
            "turn the private endpoint on (gpulab:cluster.privateEndpoint) or restrict gpulab:cluster.publicAccessCidrs"
        ]
    return []


def eks_deletion_protection_in_production(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """A production EKS cluster has deletion protection on.

    A production cluster holds what only lives in it (learners' namespaces, their work, the audit trail of who did
    what); one mistaken `pulumi destroy` or a change that replaces the cluster would delete it. With EKS deletion
    protection, DeleteCluster fails until someone turns the protection off in a reviewed change. Checked on the
    pulumi-eks component (`deletionProtection`) and on the aws.eks.Cluster it creates; a component with no inputs is
    not judged (see eks-secrets-encryption).
    """
    if not is_production(stack) or resource_type not in (EKS_COMPONENT, EKS_CLUSTER):
        return []
    if resource_type == EKS_COMPONENT and not props:
        return []
    if props.get("deletionProtection") is True:
        return []
    return [
        f"deletionProtection is {props.get('deletionProtection')!r}, not true, in production stack {stack!r}: set "
        "gpulab:cluster.deletionProtection"
    ]


def jupyterhub_sign_in_in_production(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """A production JupyterHub has a real authenticator: not the dummy one, which lets anyone in under any name.

    Every learner who signs in may take a GPU slice and run any code on a lab node, so a hub that asks nobody who they
    are gives the labs' GPUs to whoever finds its address. gpulab writes the dummy authenticator only when the stack
    says `gpulab:jupyterhub.auth.type: dummy`, for a private test stack; never in production.
    """
    if resource_type != HELM_RELEASE or not is_production(stack):
        return []
    if str(props.get("chart", "")).rstrip("/").rsplit("/", 1)[-1] != JUPYTERHUB_CHART:
        return []
    hub_config = _mapping(_mapping(_mapping(props.get("values")).get("hub")).get("config"))
    authenticator = _mapping(hub_config.get("JupyterHub")).get("authenticator_class", "dummy")
    if authenticator in NO_SIGN_IN_AUTHENTICATORS:
        return [
            f"values.hub.config.JupyterHub.authenticator_class is {authenticator!r} in production stack {stack!r}: "
            "anyone could sign in and use the GPUs; set gpulab:jupyterhub.auth to github, oidc or lti13"
        ]
    return []


def log_group_retention(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """Every CloudWatch log group expires its events: retentionInDays is set and not 0.

    A log group without retention keeps, and bills, every event forever. The EKS control-plane logs (the audit log
    records every API request) are the case in point: EKS creates their group that way unless the stack creates it
    first, with a retention. A group of class DELIVERY is exempt: the provider forces its retention to 2 days
    (pulumi-aws, aws.cloudwatch.LogGroup `retention_in_days`).
    """
    if resource_type != LOG_GROUP or props.get("logGroupClass") == "DELIVERY":
        return []
    days = props.get("retentionInDays")
    if isinstance(days, int | float) and not isinstance(days, bool) and days > 0:
        return []
    return [f"retentionInDays is {days!r}: the log group {props.get('name')!r} keeps its events forever"]


def pod_identity_trust_scoped(resource_type: str, props: Mapping[str, Any], stack: str) -> list[str]:
    """A role EKS Pod Identity may assume names, in its trust policy, the cluster, namespace and service account.

    EKS Pod Identity tags the role session with the cluster's ARN, the pod's namespace and its service account, and a
    trust policy conditioned on aws:RequestTag/<tag> admits only that workload (EKS User Guide, pod-id-role). Without
    the conditions, any Pod Identity association in the account, in any cluster, that names the role gets its
    permissions; for Karpenter's controller those are EC2 launch and terminate and iam:PassRole.
    """
    if resource_type != IAM_ROLE:
        return []
    document, error = _policy_document(props.get("assumeRolePolicy"), "assumeRolePolicy")
    if error:
        return [error]
    violations = []
    for index, statement in enumerate(_statements(document)):
        if not _lets_pod_identity_assume(statement):
            continue
        unscoped = [tag for tag in POD_IDENTITY_SCOPE_TAGS if not _pins_request_tag(statement, tag)]
        if unscoped:
            label = _label(index, statement)
            keys = ", ".join(f"aws:RequestTag/{tag}" for tag in unscoped)
            violations.append(
                f"{label} lets EKS Pod Identity assume the role with no condition fixing {keys}: any Pod Identity "
                "association in the account that names the role gets its permissions"
            )
    return violations


# CrossGuard policy name -> rule; the pack registers them in this order.
RULES: dict[str, Rule] = {
    "gpu-nodepool-isolation": gpu_node_pool_isolation,
    "no-latest-ami-in-production": no_latest_ami_in_production,
    "ec2nodeclass-hardening": ec2_node_class_hardening,
    "sqs-queue-encrypted": sqs_queue_encrypted,
    "sqs-queue-policy-tls-only": sqs_queue_policy_tls_only,
    "no-unconditioned-ec2-mutation": no_unconditioned_ec2_mutation_on_any_resource,
    "eks-secrets-encryption": eks_secrets_encryption,
    "nodepool-max-hourly-cost": nodepool_within_max_hourly_cost,
    "eks-endpoint-not-open-in-production": eks_endpoint_not_open_in_production,
    "eks-deletion-protection-in-production": eks_deletion_protection_in_production,
    "jupyterhub-sign-in-in-production": jupyterhub_sign_in_in_production,
    "log-group-retention": log_group_retention,
    "pod-identity-trust-scoped": pod_identity_trust_scoped,
}


def summary(rule: Rule) -> str:
    """The first line of a rule's docstring: its CrossGuard description."""
    return (rule.__doc__ or "").strip().splitlines()[0]


def _is_gpu_node_pool(spec: Mapping[str, Any]) -> bool:
    template = _mapping(spec.get("template"))
    template_spec = _mapping(template.get("spec"))
    if GPU_RESOURCE in _mapping(spec.get("limits")):
        return True
    if any(_mapping(t).get("key") == GPU_TAINT["key"] for t in _items(template_spec.get("taints"))):
        return True
    if GPU_PRESENT_LABEL in _mapping(_mapping(template.get("metadata")).get("labels")):
        return True
    for requirement in _items(template_spec.get("requirements")):
        requirement = _mapping(requirement)
        key, operator = requirement.get("key"), requirement.get("operator")
        if isinstance(key, str) and key.startswith(GPU_REQUIREMENT_PREFIX) and operator != "DoesNotExist":
            return True
        if operator == "In" and key in (INSTANCE_TYPE_LABEL, INSTANCE_FAMILY_LABEL):
            families = {value.split(".")[0] for value in _strings(requirement.get("values"))}
            if families & NVIDIA_GPU_FAMILIES:
                return True
    return False


def _endpoint_settings(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The endpoint keys (endpointPublicAccess, publicAccessCidrs, endpointPrivateAccess) of an EKS cluster's inputs."""
    if resource_type == EKS_COMPONENT:
        return props or None  # the engine registers the remote component with no inputs: nothing to judge
    if resource_type == EKS_CLUSTER:
        configs = _items(props.get("vpcConfig"))  # an object, or a list of one in older providers
        return _mapping(configs[0]) if configs else {}
    return None


def _label(index: int, statement: Mapping[str, Any]) -> str:
    """How a message names a statement: its position, and its Sid when it has one."""
    return f"Statement[{index}]" + (f" ({statement['Sid']})" if statement.get("Sid") else "")


def _lets_pod_identity_assume(statement: Mapping[str, Any]) -> bool:
    if statement.get("Effect") != "Allow":
        return False
    if POD_IDENTITY_PRINCIPAL not in _strings(_mapping(statement.get("Principal")).get("Service")):
        return False
    actions = {action.lower() for action in _strings(statement.get("Action"))}
    return bool(actions & {"sts:assumerole", "sts:*", "*"})


def _pins_request_tag(statement: Mapping[str, Any], tag: str) -> bool:
    """Whether a condition fixes aws:RequestTag/<tag> to given values (condition keys are case-insensitive).

    StringEquals fixes it; StringLike only when no value has a wildcard ('*' or '?').
    """
    key = f"aws:requesttag/{tag}"
    for operator, conditions in _mapping(statement.get("Condition")).items():
        if operator not in ("StringEquals", "StringLike"):
            continue
        for name, value in _mapping(conditions).items():
            values = _strings(value)
            if name.lower() != key or not values:
                continue
            if operator == "StringEquals" or not any(char in v for v in values for char in "*?"):
                return True
    return False


def _is_mutating_ec2_action(action: str) -> bool:
    service, _, name = action.strip().lower().partition(":")
    if service == "*" and not name:
        return True
    if not fnmatch.fnmatchcase("ec2", service):
        return False
    # A pattern that does not start with a read-only verb may match a mutating action ("ec2:*", "ec2:D*").
    return not name.startswith(READ_ONLY_EC2_PREFIXES)


def _denies_insecure_transport(statement: Mapping[str, Any]) -> bool:
    if statement.get("Effect") != "Deny":
        return False
    principal = statement.get("Principal")
    if principal != "*" and "*" not in _strings(_mapping(principal).get("AWS")):
        return False
    if not {action.lower() for action in _strings(statement.get("Action"))} & {"*", "sqs:*"}:
        return False
    for operator, conditions in _mapping(statement.get("Condition")).items():
        if operator not in ("Bool", "BoolIfExists"):
            continue
        for key, value in _mapping(conditions).items():
            # Condition keys are case-insensitive; the value may be a string, a boolean or a list of either.
            if key.lower() == "aws:securetransport" and any(str(v).lower() == "false" for v in _items(value)):
                return True
    return False


def _policy_document(value: Any, key: str) -> tuple[Mapping[str, Any], str | None]:
    if isinstance(value, Mapping):
        return value, None
    if not isinstance(value, str):
        return {}, f"{key} is {type(value).__name__}, not a JSON policy document"
    try:
        document = json.loads(value)
    except json.JSONDecodeError as error:
        return {}, f"{key} is not valid JSON ({error.msg}), so it cannot be checked"
    if not isinstance(document, Mapping):
        return {}, f"{key} is JSON but not a policy document (an object)"
    return document, None


def _statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    # IAM accepts a single statement object as well as a list of them.
    return [_mapping(statement) for statement in _items(document.get("Statement"))]


def _amount(value: Any) -> float | None:
    """A positive, finite amount written as a string (an annotation value), or None."""
    try:
        amount = float(value) if isinstance(value, str) else math.nan
    except ValueError:
        return None
    return amount if math.isfinite(amount) and amount > 0 else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    """A list-valued field as a list; a lone value (IAM allows `"Action": "ec2:X"`) as a list of one; None as []."""
    if value is None:
        return []
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return [value]


def _strings(value: Any) -> list[str]:
    return [item for item in _items(value) if isinstance(item, str)]
