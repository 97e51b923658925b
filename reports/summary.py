"""The summary the render prints: the cluster (with a warning when its version's standard support ends soon, within
the classes' term, or has ended), the labs' tables, their classes', the hub's, then the cost tables (the
labs', then the whole stack's and its term).

Every table is defined here as a list of columns (a header and how to read the cell), and the cluster as a list of
rows (a label and how to read the value): a new figure is one more column or row in one of these lists.
"""

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from components.karpenter.manifests import node_pool_budgets
from domain.capacity.node_capacity import seats_per_node
from domain.capacity.sharing import LearnerShare
from domain.cost.prices import EKS_USD_PER_CLUSTER_HOUR
from domain.cost.stack_cost import term_days
from domain.stack.jupyterhub import JupyterHub
from domain.stack.model import Cluster, Lab
from domain.stack.support import EXTENDED, VERSIONS_DOC
from domain.time import utc
from domain.upstream.eks_calendar import CALENDAR
from planner import plan
from render import harness
from reports import class_table, cost_report
from reports.table import Column, lead_in, markdown

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
    (
        "standard support until",
        lambda run: str(CALENDAR[run.stack.settings.cluster.kubernetes_version].end_of_standard),
    ),
)
# How far ahead the summary warns of the end of standard support: AWS announces it "at least 60 days in advance" (EKS
# User Guide, kubernetes-versions, "Amazon EKS version FAQs").
SUPPORT_NOTICE_DAYS = 60


def support_warnings(cluster: Cluster, labs: Mapping[str, Lab], day: datetime.date) -> list[str]:
    """What the version's support means for the stack on `day`: a warning when its end of standard support falls within
    SUPPORT_NOTICE_DAYS of the day or within the classes' term, and a line while it is in extended support."""
    version, window = cluster.kubernetes_version, CALENDAR[cluster.kubernetes_version]
    end, prices = window.end_of_standard, EKS_USD_PER_CLUSTER_HOUR
    if day >= end:  # a summary of a later day than the run's (the render's --today) may find STANDARD here
        now = (
            f"is in EKS extended support since {end}, at {prices['extended']} instead of {prices['standard']} USD per "
            f"cluster-hour, until {window.end_of_extended}"
            if cluster.support_type == EXTENDED
            else f"left EKS standard support on {end}: EKS upgrades the control plane itself (supportType STANDARD)"
        )
        return [
            f"warning: Kubernetes {version} {now}; move gpulab:cluster.kubernetesVersion to a version in standard "
            f"support ({VERSIONS_DOC})"
        ]
    when = []
    if (end - day).days <= SUPPORT_NOTICE_DAYS:
        when.append(f"within {SUPPORT_NOTICE_DAYS} days of {day}")
    if (term := term_days(labs)) is not None and term[0] <= end <= term[1]:
        when.append(f"within the classes' term ({term[0]} to {term[1]})")
    if not when:
        return []
    then = (
        f"the cluster pays {prices['extended']} instead of {prices['standard']} USD per cluster-hour from that day "
        "(supportType EXTENDED)"
        if cluster.support_type == EXTENDED
        else "EKS upgrades the control plane itself after that day (supportType STANDARD)"
    )
    return [
        f"warning: EKS standard support for Kubernetes {version} ends on {end}, {' and '.join(when)}: {then}; move "
        f"gpulab:cluster.kubernetesVersion to a newer version before then ({VERSIONS_DOC})"
    ]


def _sharing(lab: Lab) -> str:
    """The lab's `sharing` as the key takes it; none where each learner has a whole GPU (slicesPerGpu 1)."""
    return lab.sharing if lab.learner_share.strategy != "none" else "none (slicesPerGpu 1)"


def _gpu_memory(share: LearnerShare) -> str:
    """A learner's GPU memory: MPS's cap (a range over the lab's GPU models), else the whole GPU's, shared or not."""
    if share.memory_cap_gib is None:
        return "the whole GPU's" if share.strategy == "none" else "shared, uncapped"
    low, high = share.memory_cap_gib
    return f"at most {low:g} GiB" if low == high else f"at most {low:g}-{high:g} GiB (by GPU model)"


def _gpu_compute(share: LearnerShare) -> str:
    if share.compute_percent is not None:
        return f"{share.compute_percent}%"
    return "all of it" if share.strategy == "none" else "in turns"


# The summary's tables of the labs, one concern each so that each fits a terminal (WIDTH): their seats, what each
# learner gets, each instance type's nodes, the nodes' AMI and disks, and the disruption budgets.
LAB_COLUMNS: tuple[Column[LabItem], ...] = (
    Column("lab", lambda item: item[0]),
    # The keys' own names where the cell is the key's value, as the stack file has them.
    Column("instanceTypes", lambda item: ", ".join(item[1].instance_types)),
    Column("capacityTypes", lambda item: ", ".join(item[1].capacity_types)),
    Column("maxGpus", lambda item: str(item[1].max_gpus), numeric=True),
    Column("slicesPerGpu", lambda item: str(item[1].slices_per_gpu), numeric=True),
    Column("learner seats", lambda item: str(item[2]["learnerSeats"]), numeric=True),
)
LEARNER_LEAD_IN = "each learner gets (labs.<lab>.sharing; CPU and memory: the learner pod's requests, docs/sharing.md):"
LEARNER_COLUMNS: tuple[Column[LabItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("sharing", lambda item: _sharing(item[1])),
    Column("GPU memory", lambda item: _gpu_memory(item[1].learner_share)),
    Column("GPU compute", lambda item: _gpu_compute(item[1].learner_share), numeric=True),
    Column("CPU", lambda item: item[1].learner_requests["cpu"], numeric=True),
    Column("memory", lambda item: item[1].learner_requests["memory"], numeric=True),
)
# Each of a lab's instance types, with the lab: (lab name, lab, instance type).
TypeItem = tuple[str, Lab, str]
TYPES_LEAD_IN = "each instance type's nodes (docs/cold-seats.md):"
TYPE_COLUMNS: tuple[Column[TypeItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("instance type", lambda item: item[2]),
    Column("seats per node", lambda item: str(seats_per_node(item[2], item[1].slices_per_gpu)), numeric=True),
    Column("images on", lambda item: item[1].disk.image_disk[item[2]]),
)
NODES_LEAD_IN = "the labs' nodes (a change here replaces running nodes, docs/operations.md):"
NODE_COLUMNS: tuple[Column[LabItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("AMI", lambda item: item[1].ami),
    Column("root volume", lambda item: item[1].disk.root.describe()),
    Column("parallel pull", lambda item: "on" if item[1].disk.fast_image_pull else "off"),
)
# Each disruption budget of a lab's NodePool, its classes' included, with the lab's name.
BudgetItem = tuple[str, dict[str, Any]]
BUDGETS_LEAD_IN = "disruption budgets: the nodes Karpenter may replace at a time, for which reasons, when (UTC)"
BUDGET_COLUMNS: tuple[Column[BudgetItem], ...] = (
    Column("lab", lambda item: item[0]),
    Column("nodes", lambda item: item[1]["nodes"], numeric=True),
    Column("reasons", lambda item: ", ".join(item[1].get("reasons", [])) or "all"),
    Column("schedule", lambda item: item[1].get("schedule", "always")),
    Column("duration", lambda item: item[1].get("duration", "-")),
)


def _budgets(name: str, lab: Lab) -> list[BudgetItem]:
    """The disruption budgets the lab's NodePool carries (node_pool_budgets, which node_pool puts there): a reviewer of
    a change to them, or to the AMI, sees here when nodes may be replaced."""
    return [(name, budget) for budget in node_pool_budgets(lab)]


def lab_tables(labs: list[LabItem]) -> list[str]:
    """The labs' tables, each after its lead-in."""
    if not labs:
        return ["labs: none"]
    types = [(name, lab, t) for name, lab, _ in labs for t in lab.instance_types]
    budgets = [budget for name, lab, _ in labs for budget in _budgets(name, lab)]
    return [
        "labs:",
        "",
        *markdown(LAB_COLUMNS, labs),
        "",
        LEARNER_LEAD_IN,
        "",
        *markdown(LEARNER_COLUMNS, labs),
        "",
        TYPES_LEAD_IN,
        "",
        *markdown(TYPE_COLUMNS, types),
        "",
        NODES_LEAD_IN,
        "",
        *markdown(NODE_COLUMNS, labs),
        "",
        f"{BUDGETS_LEAD_IN}, the classes' included:",
        "",
        *markdown(BUDGET_COLUMNS, budgets),
    ]


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
    """The summary; the classes' next occurrences counted from `day` (today in UTC by default, domain/time/utc.py);
    its seats and cost figures are Karpenter's where the planner ran (`planned`)."""
    settings = run.stack.settings
    figures = plan.with_plan(run.outputs["labs"], planned)
    labs = [(name, lab, figures[name]) for name, lab in settings.labs.items()]
    day = day or utc.today()
    classes = class_table.table(settings, day)
    cluster_columns: tuple[Column[tuple[str, Callable[[harness.Run], str]]], ...] = (
        Column("cluster", lambda row: row[0]),
        Column(settings.cluster.name, lambda row: row[1](run)),
    )
    lines = markdown(cluster_columns, CLUSTER_ROWS)
    for warning in support_warnings(settings.cluster, settings.labs, day):
        lines += ["", *lead_in(warning)]
    lines += ["", *lab_tables(labs)]
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
        *(["", *budget_lines] if (budget_lines := cost_report.budgets(settings)) else []),
        "",
        *cost_report.stack_table(run.stack, figures, day, planned is not None),
    ]
