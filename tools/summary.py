"""The summary the render prints: the cluster, a table of the labs, a table of their classes, then the cost tables
(the labs', then the whole stack's and its term).

Every table is defined here as a list of columns (a header and how to read the cell), and the cluster as a list of
rows (a label and how to read the value): a new figure is one more column or row in one of these lists.
"""

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from components.karpenter.manifests import node_pool
from config.jupyterhub import JupyterHub
from config.model import Cluster, Lab
from tools import class_table, cost_report, harness, plan
from tools.table import Column, markdown

# Each lab, by name, with its `labs.<lab>` output as the summary shows it (plan.with_plan).
LabItem = tuple[str, Lab, Mapping[str, Any]]


def _api(cluster: Cluster) -> str:
    """Who reaches the API, as a security review of the preview would ask."""
    reach = [f"public to {', '.join(cluster.public_access_cidrs)}"] if cluster.public_access_cidrs else []
    reach += ["private in the VPC"] if cluster.private_endpoint else []
    return " and ".join(reach)


CLUSTER_ROWS: tuple[tuple[str, Callable[[harness.Run], str]], ...] = (
    ("Kubernetes", lambda run: run.stack.settings.cluster.kubernetes_version),
    ("region", lambda run: run.stack.region),
    ("private subnets", lambda run: str(len(run.stack.settings.cluster.private_subnet_ids))),
    ("resources", lambda run: str(len(run.resources))),
    ("API endpoint", lambda run: _api(run.stack.settings.cluster)),
    ("control plane logs", lambda run: f"kept {run.stack.settings.cluster.log_retention_days} days"),
    ("deletion protection", lambda run: "on" if run.stack.settings.cluster.deletion_protection else "off"),
    ("support", lambda run: run.stack.settings.cluster.support_type),
)


def _budget(budget: dict[str, Any]) -> str:
    reasons = f" ({', '.join(budget['reasons'])})" if budget.get("reasons") else ""
    when = f" from {budget['schedule']} for {budget['duration']}" if budget.get("schedule") else ""
    return f"{budget['nodes']}{reasons}{when}"


def _budgets(item: LabItem) -> str:
    """The disruption budgets the lab's NodePool carries, its classes' included: nodes at a time, for which reasons,
    when (UTC). A reviewer of a change to them, or to the AMI, sees here when nodes may be replaced."""
    return "; ".join(_budget(b) for b in node_pool(item[0], item[1])["spec"]["disruption"]["budgets"])


LAB_COLUMNS: tuple[Column[LabItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("instance types", lambda item: ", ".join(item[1].instance_types)),
    Column("capacity types", lambda item: ", ".join(item[1].capacity_types)),
    Column("GPUs, at most", lambda item: str(item[1].max_gpus), numeric=True),
    Column("slices per GPU", lambda item: str(item[1].slices_per_gpu), numeric=True),
    Column("learner seats", lambda item: str(item[2]["learnerSeats"]), numeric=True),
    Column("sharing", lambda item: item[1].learner_share.name),
    Column("each learner gets", lambda item: item[1].learner_share.gets()),
    Column("AMI", lambda item: item[1].ami),
    Column("disruption budgets (nodes at a time)", _budgets),
    Column("images on", lambda item: "; ".join(f"{t}: {disk}" for t, disk in item[1].disk.image_disk.items())),
    Column("root volume", lambda item: item[1].disk.root.describe()),
    Column("parallel pull", lambda item: "on" if item[1].disk.fast_image_pull else "off"),
)


def _hub(run: harness.Run) -> JupyterHub:
    hub = run.stack.settings.jupyterhub
    assert hub is not None
    return hub


# Where learners sign in, how, and which labs they may start (docs/jupyterhub.md).
HUB_ROWS: tuple[tuple[str, Callable[[harness.Run], str]], ...] = (
    ("address", lambda run: run.outputs["jupyterhub"]["address"]),
    ("sign-in", lambda run: _hub(run).auth.type),
    ("load balancer", lambda run: f"{_hub(run).load_balancer.scheme}, HTTPS only, TLS ended there"),
    ("spawn page", lambda run: ", ".join(run.outputs["jupyterhub"]["profiles"])),
    ("idle servers stopped after", lambda run: _hub(run).culling.idle_timeout),
    ("every server stopped after", lambda run: _hub(run).culling.max_age or "never"),
    ("home directories", lambda run: _hub(run).homes),
)


def summary(run: harness.Run, day: datetime.date | None = None, planned: Mapping[str, Any] | None = None) -> list[str]:
    """The summary; the classes' next occurrences counted from `day` (today in UTC by default, tools/class_table.py);
    its seats and cost figures are Karpenter's where the planner ran (`planned`)."""
    settings = run.stack.settings
    figures = plan.with_plan(run.outputs["labs"], planned)
    labs = [(name, lab, figures[name]) for name, lab in settings.labs.items()]
    classes = class_table.table(settings, day or class_table.today())
    cluster_columns: tuple[Column[tuple[str, Callable[[harness.Run], str]]], ...] = (
        Column("cluster", lambda row: row[0]),
        Column(settings.cluster.name, lambda row: row[1](run)),
    )
    lines = markdown(cluster_columns, CLUSTER_ROWS)
    lines += ["", "labs:", "", *markdown(LAB_COLUMNS, labs)] if labs else ["", "labs: none"]
    lines += ["", *classes] if classes else []
    if settings.jupyterhub:
        hub_columns: tuple[Column[tuple[str, Callable[[harness.Run], str]]], ...] = (
            Column("jupyterhub", lambda row: row[0]),
            Column("", lambda row: row[1](run)),
        )
        lines += ["", *markdown(hub_columns, HUB_ROWS)]
    return [
        *lines,
        "",
        *cost_report.table(figures),
        "",
        *cost_report.stack_table(run.stack, figures, planned is not None),
    ]
