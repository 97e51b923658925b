"""gpulab:metrics:Store, the metrics store outside the cluster: an Amazon Managed Service for Prometheus workspace for
the stack's environment, the AWS managed scraper that fills it from the cluster, and gpulab's rules in it.

The scraper needs no RBAC of gpulab's: in a cluster in API authentication mode (components/cluster.py) the service
creates the scraper's EKS access entry itself, with the read-only policy the AMP User Guide lists (AMP-collector-how-to,
"Configure Amazon EKS for scraper access with access entries"). The workspace keeps AWS's own key: one encrypted with a
customer managed key takes a scraper only with a source and a target role of gpulab's own (same page, "Creating
scraper for workspaces enabled with customer managed keys").
"""

import pulumi
import pulumi_aws as aws
import yaml

from components.metrics.recording_rules import rule_groups
from components.metrics.rule_prices import rule_book
from components.metrics.scrape import scrape_configuration
from domain.cost.price_book import PriceBook
from domain.stack.model import Settings

TYPE = "gpulab:metrics:Store"
RULES_NAMESPACE = "gpulab"


class Store(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        settings: Settings,
        region: str,
        book: PriceBook | pulumi.Output[PriceBook],
        cluster_arn: pulumi.Input[str],
        security_group_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(TYPE, name, None, opts)
        metrics = settings.metrics
        assert metrics is not None, "the program builds the store only with gpulab:metrics"
        child = pulumi.ResourceOptions(parent=self)
        alias = f"gpulab-{settings.cluster.name}"
        workspace = aws.amp.Workspace(f"{name}-workspace", alias=alias, opts=child)
        # The labs' nodes at the prices of the stack's region where the program read them, else at the us-east-1 list
        # (components/metrics/rule_prices.py: on-demand, dated by nothing, so the file changes only with a price).
        rules = pulumi.Output.from_input(book).apply(
            lambda b: rule_groups(settings.labs, metrics, rule_book(b, region), settings.budgets)
        )
        aws.amp.RuleGroupNamespace(
            f"{name}-rules",
            name=RULES_NAMESPACE,
            workspace_id=workspace.id,
            data=rules.apply(lambda r: yaml.safe_dump(r, sort_keys=False)),
            opts=child,
        )
        aws.amp.Scraper(
            f"{name}-scraper",
            alias=alias,
            source={
                "eks": {
                    "cluster_arn": cluster_arn,
                    # The cluster's own subnets and security group, whose rules let its members reach every pod.
                    "subnet_ids": settings.cluster.private_subnet_ids,
                    "security_group_ids": [security_group_id],
                }
            },
            destination={"amp": {"workspace_arn": workspace.arn}},
            # What the rules read, whatever their prices.
            scrape_configuration=rules.apply(
                lambda r: yaml.safe_dump(scrape_configuration(metrics, settings.karpenter, r), sort_keys=False)
            ),
            opts=child,
        )
        self.workspace_id: pulumi.Output[str] = workspace.id
        self.workspace_arn: pulumi.Output[str] = workspace.arn
        self.prometheus_endpoint: pulumi.Output[str] = workspace.prometheus_endpoint
        self.register_outputs({"workspaceId": self.workspace_id, "prometheusEndpoint": self.prometheus_endpoint})
