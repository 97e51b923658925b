"""gpulab:karpenter:ClassSeats, one lab's warm seats for its classes: a namespace with the seat PodTemplate, a
CapacityBuffer per class, and the CronJobs (with their narrowly scoped service account) that raise and drop it."""

import pulumi
import pulumi_kubernetes as k8s

from components.karpenter.class_seats_manifests import (
    capacity_buffer,
    cron_jobs,
    namespace,
    role,
    role_binding,
    seat_template,
    service_account,
)
from domain.stack.model import Lab

TYPE = "gpulab:karpenter:ClassSeats"


class ClassSeats(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        lab: Lab,
        karpenter: pulumi.Resource,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        ns = namespace(name)
        created = k8s.core.v1.Namespace(f"{name}-namespace", metadata=ns["metadata"], opts=child)
        inside = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[created]))

        template = seat_template(name, lab)
        k8s.core.v1.PodTemplate(
            f"{name}-seat", metadata=template["metadata"], template=template["template"], opts=inside
        )
        account = service_account(name)
        k8s.core.v1.ServiceAccount(f"{name}-scheduler", metadata=account["metadata"], opts=inside)
        rules = role(name, lab)
        k8s.rbac.v1.Role(f"{name}-scheduler", metadata=rules["metadata"], rules=rules["rules"], opts=inside)
        binding = role_binding(name)
        k8s.rbac.v1.RoleBinding(
            f"{name}-scheduler",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=inside,
        )

        buffer_opts = pulumi.ResourceOptions.merge(
            inside,
            # The CronJobs own spec.replicas. With server-side apply (pulumi-kubernetes' default), an ignored field
            # that another field manager (kubectl patch) owns is dropped from Pulumi's apply, so `pulumi up` neither
            # resets the seats mid-class nor fails on a field conflict (pulumi/pulumi-kubernetes
            # provider/pkg/await/await.go, handleSSAIgnoreFields).
            pulumi.ResourceOptions(depends_on=[karpenter], ignore_changes=["spec.replicas"]),
        )
        for lab_class in lab.classes:
            buffer = capacity_buffer(name, lab_class)
            key = buffer["metadata"]["name"]
            k8s.apiextensions.CustomResource(
                f"{name}-{key}",
                api_version=buffer["apiVersion"],
                kind=buffer["kind"],
                metadata=buffer["metadata"],
                spec=buffer["spec"],
                opts=buffer_opts,
            )
            for job in cron_jobs(name, lab, lab_class):
                k8s.batch.v1.CronJob(
                    f"{name}-{job['metadata']['name']}", metadata=job["metadata"], spec=job["spec"], opts=inside
                )
        self.namespace = ns["metadata"]["name"]
        self.register_outputs({"namespace": self.namespace})
