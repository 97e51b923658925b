"""gpulab:karpenter:Controller, the Karpenter controller with its IAM role, interruption queue and Helm releases."""

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import Cluster
from components.karpenter.iam_policies import (
    CONTROLLER_POLICY_KEYS,
    INTERRUPTION_EVENTS,
    Scope,
    controller_policies,
    controller_trust_policy,
    queue_policy,
)
from components.labels import SYSTEM_NODE_SELECTOR
from components.namespace import namespace_dependencies
from domain.stack.model import Karpenter
from domain.upstream.versions import KARPENTER_CHART_REPOSITORY

# Pinned: an auto-named release gets a random suffix, and the chart names the service account after the release,
# which the Pod Identity association must name exactly.
CRD_RELEASE = "karpenter-crd"
RELEASE = "karpenter"
SERVICE_ACCOUNT = "karpenter"
# The interruption queue must not keep messages longer than Karpenter can still act on them.
QUEUE_RETENTION_SECONDS = 300
# What the karpenter chart names its controller's pods and their metrics port, which the metrics scraper finds them by
# (charts/karpenter/templates/_helpers.tpl karpenter.selectorLabels: app.kubernetes.io/name is the chart's name, no
# nameOverride here; templates/deployment.yaml: containerPort controller.metrics.port, named http-metrics).
POD_NAME_LABEL = "karpenter"
METRICS_PORT_NAME = "http-metrics"


def helm_values(
    settings: Karpenter, cluster_name: str, queue_name: pulumi.Input[str], node_overlays: bool, capacity_buffers: bool
) -> dict:
    resources = settings.controller_resources.model_dump()
    return {
        "settings": {
            "clusterName": cluster_name,
            "interruptionQueue": queue_name,
            "featureGates": {
                # NodeOverlays are ignored unless this gate is on; gpulab writes them only for labs that share GPUs.
                "nodeOverlay": node_overlays,
                # Replaces a node whose GPU the EKS node monitoring agent reports unhealthy (AcceleratedHardwareReady
                # False for 10 minutes: RepairPolicies, aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider).
                "nodeRepair": True,
                # CapacityBuffers (class seats) likewise: an alpha controller runs only where a lab has classes.
                "capacityBuffer": capacity_buffers,
            },
        },
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        # Requests equal to limits: the controller gets guaranteed QoS and is the last pod evicted under pressure.
        "controller": {"resources": {"requests": resources, "limits": resources}},
        # The chart already keeps the controller off nodes Karpenter manages; this pins it to the system node group.
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
    }


class Controller(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        settings: Karpenter,
        cluster: Cluster,
        cluster_name: str,
        region: str,
        node_role_arn: pulumi.Input[str],
        node_overlays: bool,
        capacity_buffers: bool,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:karpenter:Controller", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOutputOptions(parent=self)

        # Named after the cluster, as upstream does, so that an operator finds it next to the cluster it serves.
        queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=cluster_name,
            message_retention_seconds=QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            opts=child,
        )
        aws.sqs.QueuePolicy(
            f"{name}-interruption",
            queue_url=queue.url,
            policy=queue.arn.apply(lambda arn: json.dumps(queue_policy(arn))),
            opts=child,
        )
        for key, pattern in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(f"{name}-{key}", event_pattern=json.dumps(pattern), opts=child)
            aws.cloudwatch.EventTarget(
                f"{name}-{key}", rule=rule.name, arn=queue.arn, target_id="KarpenterInterruptionQueueTarget", opts=child
            )

        # Trusts only the service account the chart runs as and the association below names, in this cluster.
        trust = cluster.cluster_arn.apply(lambda arn: controller_trust_policy(arn, settings.namespace, SERVICE_ACCOUNT))
        role = aws.iam.Role(f"{name}-controller", assume_role_policy=pulumi.Output.json_dumps(trust), opts=child)
        scope = pulumi.Output.all(
            partition=aws.get_partition_output(opts=invoke).partition,
            account_id=aws.get_caller_identity_output(opts=invoke).account_id,
            node_role_arn=node_role_arn,
            queue_arn=queue.arn,
        ).apply(lambda values: Scope(region=region, cluster_name=cluster_name, **values))
        policies = scope.apply(controller_policies)
        permissions: list[pulumi.Resource] = []
        for key in CONTROLLER_POLICY_KEYS:
            policy = aws.iam.Policy(
                f"{name}-{key}",
                description=f"Karpenter controller of EKS cluster {cluster_name}: {key}",
                policy=pulumi.Output.json_dumps(policies[key]),
                opts=child,
            )
            permissions.append(
                aws.iam.RolePolicyAttachment(f"{name}-{key}", role=role.name, policy_arn=policy.arn, opts=child)
            )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=cluster.cluster_name,
            namespace=settings.namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            # The role's trust conditions on the session tags; without them EKS could not assume it for Karpenter.
            disable_session_tags=False,
            opts=child,
        )

        k8s_child = pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[cluster])
        namespace = namespace_dependencies(f"{name}-namespace", settings.namespace, k8s_child)
        k8s_opts = pulumi.ResourceOptions.merge(k8s_child, pulumi.ResourceOptions(depends_on=namespace))
        # Helm installs a chart's CRDs only on first install and never upgrades them, so they come from their own
        # chart, installed first; the controller chart then skips its copy.
        crds = k8s.helm.v3.Release(
            f"{name}-crd",
            name=CRD_RELEASE,
            chart=f"{KARPENTER_CHART_REPOSITORY}/karpenter-crd",
            version=settings.chart_version,
            namespace=settings.namespace,
            opts=k8s_opts,
        )
        # What the labs' objects wait for, and so are deleted before: through its own dependencies, the controller's
        # CRDs, permissions and identity too.
        self.release = k8s.helm.v3.Release(
            name,
            name=RELEASE,
            chart=f"{KARPENTER_CHART_REPOSITORY}/karpenter",
            version=settings.chart_version,
            namespace=settings.namespace,
            skip_crds=True,
            values=helm_values(settings, cluster_name, queue.name, node_overlays, capacity_buffers),
            # The controller lives only as long as its permissions: on delete, it still has them while it drains
            # and terminates the labs' nodes.
            opts=pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[crds, association, *permissions])
            ),
        )
        self.queue_name = queue.name
        self.register_outputs({"queueName": queue.name, "roleArn": role.arn})
