"""The gpulab program: builds the components in dependency order and exports the stack outputs.

It is a function so that the offline render and the tests can run it more than once per process.
"""

import datetime
import functools
import gc
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pulumi

import domain.stack
from components.cluster import Cluster
from components.discovery_tags import DiscoveryTags
from components.jupyterhub.hub import Hub, Meter
from components.jupyterhub.spawn_profiles import profile_list
from components.karpenter.ami import check_ami_releases
from components.karpenter.class_seats import ClassSeats
from components.karpenter.class_seats_manifests import classes_output
from components.karpenter.controller import Controller
from components.karpenter.gpu_node_pool import GpuNodePool
from components.karpenter.manifests import user_data_problems
from components.lab_budgets import LabBudgets
from components.learner_pod import PLACEHOLDER_IMAGE, learner_pod_spec
from components.live_prices import Prices
from components.metrics.exporters import Exporters
from components.metrics.series import meter_output, stack_meter
from components.metrics.store import Store
from components.node_role import NodeRole
from components.nvidia.device_plugin import DevicePlugin
from components.tag_activation import activation_output
from domain.cost import learner_cost, preview_cost
from domain.cost.meter_cost import MeterCost
from domain.cost.price_book import LIST, PriceBook
from domain.cost.stack_cost import StackCost, lab_term, labs_ceilings, stack_cost, term_days
from domain.stack.budgets import ACTIVATE, budget_output
from domain.stack.warmups import timing_warnings
from domain.time import utc
from domain.upstream.ami_releases import ami_warnings

# Python's cyclic garbage collector makes a young collection every 700 net allocations by default (gc.get_threshold),
# and enough of them make a full one, over every object alive. A run of the program builds a graph of resources,
# Outputs and futures that lives until the run ends, so each full collection walks more and frees next to nothing: a
# run of 1,000 labs under mocks took 24 s, and 12 s with collection off. With this threshold it makes one full
# collection instead of 25, and takes 13 to 17 s (on a noisy 2-core VM) for 5 MB more memory.
GC_THRESHOLD = 100_000
T = TypeVar("T")


def collect_rarely() -> None:
    """Raises the young generation's threshold to GC_THRESHOLD for the rest of the process, or until reset."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def problems(stack: domain.stack.StackConfig) -> list[str]:
    """The stack's problems that only the objects it builds show, one `gpulab:<key>` line each; checked before
    anything is registered, as the configuration is."""
    return user_data_problems(stack.settings.labs)


def build(stack: domain.stack.StackConfig, live_prices: bool = False) -> None:
    """The stack's resources and outputs; its cost figures at the prices of the stack's region read from AWS with
    `live_prices` (pulumi preview and up: components/live_prices.py), else at the us-east-1 list (the render, the
    tests)."""
    settings = stack.settings
    book: PriceBook | pulumi.Output[PriceBook] = LIST
    if live_prices:
        system_type = settings.cluster.system_nodes.instance_types[
            0
        ]  # the type EKS launches (domain/cost/stack_cost.py)
        book = Prices(
            "prices",
            stack.region,
            [system_type, *(t for lab in settings.labs.values() for t in lab.instance_types)],
            [t for lab in settings.labs.values() if "spot" in lab.capacity_types for t in lab.instance_types],
            settings.cluster.private_subnet_ids,
            meter=settings.metrics is not None,
        ).book
    cluster = Cluster("cluster", settings.cluster)
    node_role = NodeRole("karpenter-nodes", cluster_name=cluster.cluster_name)
    DiscoveryTags(
        "discovery",
        cluster_name=cluster.cluster_name,
        subnet_ids=settings.cluster.private_subnet_ids,
        security_group_id=cluster.security_group_id,
    )

    karpenter = Controller(
        "karpenter",
        settings.karpenter,
        cluster=cluster,
        cluster_name=settings.cluster.name,
        region=stack.region,
        node_role_arn=node_role.role_arn,
        node_overlays=settings.shares_gpus,
        capacity_buffers=settings.has_classes,
    )
    DevicePlugin("nvidia-device-plugin", settings.nvidia_device_plugin, settings.labs, provider=cluster.provider)
    meter = None
    if settings.metrics:
        Exporters("metrics", settings.metrics, provider=cluster.provider)
        store = Store("metrics", settings, stack.region, book, cluster.cluster_arn, cluster.security_group_id)
        meter = Meter(settings.metrics, store, stack.region)
        pulumi.export("metrics", {"workspaceId": store.workspace_id, "prometheusEndpoint": store.prometheus_endpoint})
    amis_found = check_ami_releases(settings.labs, settings.cluster.kubernetes_version)
    pools = {}
    for lab_name, lab in settings.labs.items():
        pools[lab_name] = GpuNodePool(
            lab_name,
            lab,
            cluster_name=settings.cluster.name,
            node_role_name=node_role.role_name,
            # The controller and the node role's access entry must outlive every lab's nodes (see GpuNodePool). The
            # release rather than the whole Controller: Pulumi expands a component into all of its children for every
            # resource that waits for it, 34 of them here, and the release already waits for the ones that matter.
            runtime=[karpenter.release, node_role],
            amis_found=amis_found,
            provider=cluster.provider,
        )
        if lab.classes:
            ClassSeats(lab_name, lab, karpenter=karpenter.release, provider=cluster.provider)

    if settings.jupyterhub:
        hub = Hub(
            "jupyterhub",
            settings.jupyterhub,
            settings.labs,
            cluster,
            stack.jupyterhub_client_secret,
            settings.spend_gated,
            meter,
        )
        # The address learners open; the load balancer's own DNS name is known only once the Service has one.
        pulumi.export(
            "jupyterhub",
            {"address": hub.address, "profiles": [p["slug"] for p in profile_list(settings.labs)]},
        )

    activate = settings.cost_allocation_tag == ACTIVATE
    if settings.budgets or activate:
        budgets = LabBudgets("budgets", settings.cluster.name, settings.budgets, settings.budget_alerts, activate)
        if budgets.activation:
            # What AWS answered this `pulumi up` (docs/cost.md, "The tag must be active").
            pulumi.export("costAllocationTag", activation_output(budgets.activation))

    pulumi.export("clusterName", cluster.cluster_name)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export("nodeRoleName", node_role.role_name)
    pulumi.export("nodeRoleArn", node_role.role_arn)
    pulumi.export("interruptionQueueName", karpenter.queue_name)
    days = term_days(settings.labs)
    hub_gib = settings.jupyterhub.hub_database_size_gib if settings.jupyterhub else None
    all_seats = sum(lab.learner_seats for lab in settings.labs.values())

    def figures(prices: PriceBook) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """Each lab's `cost` output and the stack's, at `prices`: the labs' shares of the always-on parts first."""
        cluster = settings.cluster

        def whole(ceilings: dict[str, float | None], meter: MeterCost | None = None) -> StackCost:
            return stack_cost(
                stack.region,
                cluster.kubernetes_version,
                cluster.support_type,
                cluster.system_nodes.instance_types,
                cluster.system_nodes.size,
                hub_gib,
                ceilings,
                prices,
                utc.today(),
                meter,
            )

        # The labs' shares are of the cluster, the system nodes and the hub; the meter is the stack's alone.
        always_on = whole({})
        costs = {
            name: {
                **_lab_cost(name, lab, stack.region, days, prices, always_on, all_seats),
                "budget": budget_output(settings.budgets.get(name), name in settings.spend_gated),
            }
            for name, lab in settings.labs.items()
        }
        stack_figures = whole(labs_ceilings(costs), stack_meter(settings, prices)).as_output()
        if settings.metrics:
            stack_figures["meter"] = meter_output(settings, prices, days)
        return costs, stack_figures

    found = _at(book, figures)
    if isinstance(found, pulumi.Output) and (path := os.environ.get(preview_cost.ENV)):
        # The figures at the region's prices, for the pull-request comment (domain/cost/preview_cost.py): the offline
        # render the comment reads otherwise has the us-east-1 list only.
        pulumi.Output.all(book, found).apply(
            lambda both: preview_cost.write(Path(path), stack.region, settings.cluster.name, *both)
        )
    labs = {
        name: {
            "nodePool": pools[name].node_pool_name,
            "slicesPerGpu": lab.slices_per_gpu,
            "learnerSeats": lab.learner_seats,
            "learnerCpu": lab.learner_requests["cpu"],
            "learnerMemory": lab.learner_requests["memory"],
            **lab.learner_share.as_output(),
            "cost": _pick(found, functools.partial(_lab_figures, name)),
            # What the planner (planner/) schedules: a learner's pod, and each class's buffer and warm seats.
            "learnerPodSpec": learner_pod_spec(name, lab, PLACEHOLDER_IMAGE),
            "classes": classes_output(name, lab),
        }
        for name, lab in settings.labs.items()
    }
    pulumi.export("labs", labs)
    pulumi.export("cost", _pick(found, lambda f: f[1]))


def _at(book: PriceBook | pulumi.Output[PriceBook], figure: Callable[[PriceBook], T]) -> T | pulumi.Output[T]:
    """A figure at the book's prices: at once offline, once AWS has answered in a preview."""
    return book.apply(figure) if isinstance(book, pulumi.Output) else figure(book)


def _lab_figures(name: str, found: tuple[dict[str, dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    return found[0][name]


def _pick(found: T | pulumi.Output[T], part: Callable[[T], Any]) -> Any:
    """A part of figures made by _at, at once offline or as an Output."""
    return found.apply(part) if isinstance(found, pulumi.Output) else part(found)


def _lab_cost(
    name: str,
    lab: domain.stack.Lab,
    region: str,
    days: tuple[datetime.date, datetime.date] | None,
    book: PriceBook,
    always_on: StackCost,
    all_seats: int,
) -> dict[str, Any]:
    """The `labs.<lab>.cost` output: the region of its prices beside the stack's, its term figure over the stack's
    term `days` (domain/cost/stack_cost.py lab_term, which the summary's term adds up), and its one "at most" figure
    and per-learner lines (domain/cost/learner_cost.py), at the arithmetic bound: the render makes them Karpenter's
    where the planner runs (planner/plan.py). `always_on`: the stack without its labs, whose always-on parts the labs'
    `all_seats` learner seats share, per hour and over the term. At a preview's prices a lab whose cap fails there is
    refused, as the list's is at validation (domain/cost/lab_cost.py within_max_hourly_cost)."""
    cost = lab.cost_at(book)
    if book.live and (problem := cost.cap_problem):
        raise pulumi.RunError(f"gpulab:labs.{name}.maxHourlyCost: {problem}")
    spot = {t: book.spot_line(t, region) for t in lab.instance_types} if "spot" in lab.capacity_types else {}
    bound = None if cost.unpriced else cost.gpu_limit_per_hour
    always_where = learner_cost.prices(book, region, always_on=True)
    where = learner_cost.prices(book, region)
    output = {
        **cost.as_output(where, book.where(region, ["EBS"])),
        "region": region,
        "pricesFrom": book.prices_from,
        "spot": spot,
        "term": lab_term(lab, days, bound).as_output(),
        "emptyLabPerHour": learner_cost.empty_lab(always_on.always_on, lab.learner_seats, all_seats, always_where),
        "emptyLabTerm": learner_cost.empty_lab_term(
            always_on.always_on_in_term(days), lab.learner_seats, all_seats, always_where
        ),
    }
    how = f"the arithmetic bound, {cost.gpu_limit_basis}" if cost.gpu_limit_basis else "no price"
    return learner_cost.with_at_most(output, bound, learner_cost.BOUND, how, lab.learner_seats, where)


def main() -> None:
    collect_rarely()  # for the whole run: Pulumi registers the resources after build() returns
    try:
        stack = domain.stack.load()
    except domain.stack.ConfigError as error:
        # RunError ends the program with its message and no traceback.
        raise pulumi.RunError(f"the stack configuration has problems:\n{error}") from None
    if lines := problems(stack):
        raise pulumi.RunError("the stack configuration has problems:\n" + "\n".join(lines))
    for warning in ami_warnings(stack.settings.labs, stack.settings.cluster.kubernetes_version):
        pulumi.log.warn(warning)
    for warning in timing_warnings(stack.settings.labs):
        pulumi.log.warn(warning)
    build(stack, live_prices=True)
