"""gpulab:jupyterhub:Hub, JupyterHub with one profile per lab, and the storage it needs: the EBS CSI driver add-on (its
IAM role through Pod Identity) and an encrypted gp3 StorageClass."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import Cluster
from components.jupyterhub import culling
from components.jupyterhub.proxy_tls import backend_tls_secret
from components.jupyterhub.user_scheduler import extra_permissions
from components.jupyterhub.values import CLIENT_SECRET_ITEM, CLIENT_SECRET_NAME, STORAGE_CLASS, helm_values
from components.jupyterhub.walls import internet_policy, open_labs

# The trust policy Karpenter's role uses, for another service account: Pod Identity for exactly that one.
from components.karpenter.iam_policies import controller_trust_policy
from components.metrics.store import Store
from components.namespace import namespace_dependencies
from domain.stack.budgets import LabBudget
from domain.stack.jupyterhub import JupyterHub
from domain.stack.metrics import Metrics
from domain.stack.model import Lab
from domain.upstream.versions import (
    EBS_CSI_DRIVER_ADDON_VERSIONS,
    JUPYTERHUB_CHART_REPOSITORY,
    JUPYTERHUB_CHART_VERSION,
)

# Pinned so that the objects' names (hub, proxy-public, user-scheduler) stay put: an auto-named release gets a suffix.
RELEASE = "jupyterhub"
# The EBS CSI driver's controller runs as this service account in kube-system, in the EKS add-on as in the driver's
# chart (kubernetes-sigs/aws-ebs-csi-driver v1.64.0 charts/aws-ebs-csi-driver/values.yaml, controller.serviceAccount).
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_NAMESPACE = "kube-system"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "service-role/AmazonEBSCSIDriverPolicy"  # the AWS managed policy the EKS User Guide names
EBS_CSI_PROVISIONER = "ebs.csi.aws.com"
# The chart names the hub's service account after the hub (fullnameOverride "": templates/_helpers-names.tpl).
HUB_SERVICE_ACCOUNT = "hub"


def storage_class() -> dict:
    """Encrypted gp3 (the account's default EBS key), created where the pod is scheduled (WaitForFirstConsumer), so
    that a volume lands in the zone of the node Karpenter picks rather than forcing the pod into a zone."""
    return {
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": EBS_CSI_PROVISIONER,
        "parameters": {"type": "gp3", "encrypted": "true"},
        "volume_binding_mode": "WaitForFirstConsumer",
        "reclaim_policy": "Delete",
        "allow_volume_expansion": True,
    }


@dataclass(frozen=True)
class Meter:
    """What the idle-GPU culler reads: gpulab:metrics, the stack's workspace, and the workspace's region."""

    metrics: Metrics
    store: Store
    region: str


class Hub(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        settings: JupyterHub,
        labs: Mapping[str, Lab],
        cluster: Cluster,
        client_secret: str | None,
        budgets: Mapping[str, LabBudget],
        meter: Meter | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("gpulab:jupyterhub:Hub", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        # The EBS CSI driver: the hub's database volume needs it, whatever learners get.
        trust = cluster.cluster_arn.apply(
            lambda arn: controller_trust_policy(arn, EBS_CSI_NAMESPACE, EBS_CSI_SERVICE_ACCOUNT)
        )
        role = aws.iam.Role(f"{name}-ebs-csi", assume_role_policy=pulumi.Output.json_dumps(trust), opts=child)
        permissions = aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi",
            role=role.name,
            policy_arn=pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", EBS_CSI_POLICY),
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-ebs-csi",
            cluster_name=cluster.cluster_name,
            namespace=EBS_CSI_NAMESPACE,
            service_account=EBS_CSI_SERVICE_ACCOUNT,
            role_arn=role.arn,
            disable_session_tags=False,  # the role's trust conditions on them
            opts=child,
        )
        addon = aws.eks.Addon(
            f"{name}-ebs-csi",
            cluster_name=cluster.cluster_name,
            addon_name=EBS_CSI_ADDON,
            addon_version=settings.ebs_csi_driver_version or EBS_CSI_DRIVER_ADDON_VERSIONS[cluster.kubernetes_version],
            # The cluster's Pod Identity agent (a child of the cluster) hands the controller its role's credentials.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster, association, permissions]),
        )

        k8s_child = pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[cluster])
        volumes = k8s.storage.v1.StorageClass(f"{name}-storage", **storage_class(), opts=k8s_child)
        # On destroy the namespace goes before the driver and the StorageClass: its learners' volumes (PVCs that
        # KubeSpawner created, which the release does not own) are deleted while the driver can still delete them.
        storage = pulumi.ResourceOptions(depends_on=[addon, volumes])
        namespace = namespace_dependencies(
            f"{name}-namespace", settings.namespace, pulumi.ResourceOptions.merge(k8s_child, storage)
        )
        in_namespace = pulumi.ResourceOptions.merge(k8s_child, pulumi.ResourceOptions(depends_on=namespace))

        # The proxy's own certificate, towards the load balancer, with which it redirects http to https.
        needs: list[pulumi.Resource] = [
            addon,
            volumes,
            backend_tls_secret(name, settings.host, settings.namespace, child, in_namespace),
        ]
        if client_secret is not None:
            needs.append(
                k8s.core.v1.Secret(
                    f"{name}-oauth-client",
                    metadata={"name": CLIENT_SECRET_NAME, "namespace": settings.namespace},
                    string_data={CLIENT_SECRET_ITEM: pulumi.Output.secret(client_secret)},
                    opts=in_namespace,
                )
            )

        values: pulumi.Input[dict[str, Any]] = helm_values(settings, labs, cluster.kubernetes_version)
        if meter and (culling.culled_labs(labs) or budgets):
            store = meter.store
            # The hub's pod queries the workspace for its idle-GPU culler and its spend gate, through its SigV4 proxy,
            # as this role.
            hub_trust = cluster.cluster_arn.apply(
                lambda arn: controller_trust_policy(arn, settings.namespace, HUB_SERVICE_ACCOUNT)
            )
            query = aws.iam.Role(
                f"{name}-gpu-culler", assume_role_policy=pulumi.Output.json_dumps(hub_trust), opts=child
            )
            aws.iam.RolePolicy(
                f"{name}-gpu-culler",
                role=query.id,
                policy=pulumi.Output.json_dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {"Effect": "Allow", "Action": "aps:QueryMetrics", "Resource": store.workspace_arn}
                        ],
                    }
                ),
                opts=child,
            )
            aws.eks.PodIdentityAssociation(
                f"{name}-gpu-culler",
                cluster_name=cluster.cluster_name,
                namespace=settings.namespace,
                service_account=HUB_SERVICE_ACCOUNT,
                role_arn=query.arn,
                disable_session_tags=False,  # the role's trust conditions on them
                opts=child,
            )
            chart_values = helm_values(settings, labs, cluster.kubernetes_version)
            values = store.workspace_id.apply(
                lambda workspace: culling.querying(chart_values, labs, meter.metrics, budgets, workspace, meter.region)
            )
        # The internet for the learners of each lab that keeps it, everything but the VPC's own blocks among the rest.
        vpc = aws.ec2.get_vpc_output(id=cluster.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self))
        vpc_cidrs = vpc.cidr_block_associations.apply(lambda blocks: [b.cidr_block for b in blocks])

        def internet(lab_name: str) -> pulumi.Output[dict[str, Any]]:
            return vpc_cidrs.apply(lambda cidrs: internet_policy(lab_name, settings.namespace, RELEASE, cidrs))

        for lab_name in open_labs(labs):
            policy = internet(lab_name)
            k8s.networking.v1.NetworkPolicy(
                f"{name}-internet-{lab_name}",
                metadata=policy["metadata"],
                spec=policy["spec"],
                opts=in_namespace,
            )
        # The user-scheduler's kube-scheduler is the cluster's version, and needs that version's permissions.
        scheduler_rules, scheduler_binding = extra_permissions(settings.namespace, cluster.kubernetes_version)
        scheduler_role = k8s.rbac.v1.ClusterRole(f"{name}-user-scheduler", **scheduler_rules, opts=k8s_child)
        needs.append(
            k8s.rbac.v1.ClusterRoleBinding(
                f"{name}-user-scheduler",
                **scheduler_binding,
                opts=pulumi.ResourceOptions.merge(k8s_child, pulumi.ResourceOptions(depends_on=[scheduler_role])),
            )
        )

        k8s.helm.v3.Release(
            name,
            name=RELEASE,
            chart="jupyterhub",
            repository_opts={"repo": JUPYTERHUB_CHART_REPOSITORY},
            # Pinned, not a setting: the profiles are built for this chart's KubeSpawner (7.0.0).
            version=JUPYTERHUB_CHART_VERSION,
            namespace=settings.namespace,
            values=values,
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=needs)),
        )
        self.address = settings.address
        self.register_outputs({"address": self.address})
