"""Pure builder of the workspace's recording and alerting rules: per lab, the seats in use, each seat's GPU use, the
idle seats, the pending learners, Karpenter's nodes and their cost per hour, and each lab's spend per hour at the
stack's prices, which the hub's spend gate adds up since its budget's period began (a Prometheus rule file, which
aws.amp.RuleGroupNamespace takes as it is; tests/test_metrics_rules.py runs promtool's `test rules` on it).

Every aggregation keeps the lab (`by (lab)`): a lab's figures never mix with another's. A pod's lab is the lab its node
selector names (components/learner_pod.py), as kube-state-metrics reports it; a node's lab is its NodePool, which
carries the lab's name (components/karpenter/gpu_node_pool.py), as Karpenter reports it.

Idle means measured and idle. A seat is judged once its pod runs and is older than its lab's window; it is idle only
when dcgm-exporter measured it at (nearly) every evaluation of the window and every sample stayed under the threshold
(max_over_time: a burst in any sample keeps the seat), and unmeasured otherwise, which the culler never reads. Only
per-pod series with a pod_uid are measurements: the exporter gives a pod it cannot tell by UID the value 0 with
pod_uid="" (NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go:243, 271-279; docs/metrics.md).
"""

from collections.abc import Callable, Mapping
from typing import Any

from components.metrics.kube_state_metrics import LAB_SELECTOR, SERVERNAME, USERNAME
from components.metrics.kube_state_metrics import NAME as KUBE_STATE_METRICS
from domain.cost.price_book import PriceBook
from domain.stack.budgets import MONTH, LabBudget
from domain.stack.classes import DEFAULT_WARMUP
from domain.stack.metrics import SCRAPE_INTERVAL_SECONDS, Metrics, idle_window
from domain.stack.model import Lab
from domain.time import durations

GROUP = "gpulab"
# Rules run in order within a group, each on the results of those before it in the same evaluation.
EVALUATION_INTERVAL = "1m"

POD_LAB = "gpulab:pod_lab:info"
SEAT_UTILISATION = "gpulab:seat_gpu_utilisation:percent"
SEAT_JUDGED = "gpulab:seat_judged:info"
SEAT_MEASURED = "gpulab:seat_gpu_measured:count"
SEAT_IDLE = "gpulab:seat_gpu_idle:percent"
SEAT_UNMEASURED = "gpulab:seat_gpu_unmeasured:info"
SEATS_UNMEASURED = "gpulab:lab_seats_unmeasured:count"
LEARNER_IDLE = "gpulab:learner_gpu_idle:percent"
SEAT_MEMORY = "gpulab:seat_gpu_memory_used:mib"
SEAT_CULLED = "gpulab:seat_culled:info"
SEATS_CULLED = "gpulab:lab_seats_culled:count"
SEATS_IN_USE = "gpulab:lab_seats_in_use:count"
SEATS = "gpulab:lab_seats:count"
SEATS_IDLE = "gpulab:lab_seats_idle:count"
PENDING = "gpulab:lab_learners_pending:count"
NODES = "gpulab:lab_nodes:count"
COST = "gpulab:lab_cost_usd_per_hour"
PRICE = "gpulab:instance_price_usd_per_hour"
SPEND = "gpulab:lab_spend_usd_per_hour"
GPU_LIMIT_COST = "gpulab:lab_gpu_limit_usd_per_hour"
METER_UP = "gpulab:meter_up:info"
MONTH_SPEND = "gpulab:lab_month_spend_usd_per_hour"
TERM_SPEND = "gpulab:lab_term_spend_usd_per_hour"
FORECAST = "gpulab:lab_term_forecast:usd"
THIS_MONTH = "gpulab:month_mod_3:info"
# The share of a lab's budget at which the teacher is alerted (AWS Budgets' ACTUAL 80% too, components/lab_budgets.py).
BUDGET_ALERT_PERCENT = 80
# A term budget's forecast (LabBudgetForecastOver) projects the spend so far over the term's class hours: spend per
# class hour so far times the term's class hours (each class day's warm-up to its end, domain/stack/budgets.py
# class_hours). Per class hour, not per day of the term: a lab spends in its classes and (nearly) nothing between them,
# so a projection over the term's days would jump after each class (after the second of fourteen weekly classes it
# reads twice the pace) and sag before the next, while spent / class hours so far stays put between classes. It is the
# figure a teacher checks by hand: "the classes so far cost X an hour; the term has N class hours". AWS Budgets'
# FORECASTED alert forecasts each month, not the term (components/lab_budgets.py); a month budget keeps AWS's.
# Not before this share of the class hours is over: the first classes are the dearest (every learner tries the lab,
# every warm seat runs), and one or two of them would decide the term alone. A fifth: after the third of fourteen
# weekly classes; gpulab's choice, no published figure.
FORECAST_FROM_PERCENT = 20
# How long a lab's spend may go unrecorded, while the meter's rules run, before the workspace alerts.
UNMEASURED_FOR = "10m"
# The calendar months of a month budget's window (31 days, the longest month) told apart: any three consecutive
# months have different (12 x year + month) mod 3, and a 31-day window back from any moment of a month reaches at
# most into the two months before it.
MONTH_LABEL = "month_mod_3"

# A per-pod series is a measurement only with the pod's UID (see above), and only while its last sample is at most three
# scrape intervals old: a series that stopped without a staleness marker (a scrape that was never answered) would
# otherwise be read at its last value for Prometheus's 5-minute lookback.
MEASURED_GPU_UTIL = 'DCGM_FI_DEV_GPU_UTIL{pod!="", pod_uid!=""}'
# The other field the exporter reads per process (sum of the pod's processes' used GPU memory, in MiB;
# internal/pkg/transformation/process_metrics.go:94-97): measured only with the pod's UID too.
MEASURED_FB_USED = 'DCGM_FI_DEV_FB_USED{pod!="", pod_uid!=""}'
FRESH_SECONDS = 3 * SCRAPE_INTERVAL_SECONDS
# How long after its last idle evaluation a seat whose pod is gone counts as culled: the culler asks every minute
# (components/jupyterhub/gpu_culler.py), the pod then takes its grace period to go, and kube-state-metrics' next scrape
# says so. CULLED_OVER: the window of the dashboard's count of culled seats.
CULLED_AFTER = "5m"
CULLED_OVER = "1h"


def _per_lab_count(selection: str) -> str:
    """How many of `selection` (series of pods with a lab label) each lab has, 0 for a lab with pods but none of it."""
    return f"count by (lab) ({selection}) or (0 * count by (lab) ({POD_LAB}))"


def _karpenter(expression: str) -> str:
    """Karpenter's per-NodePool series with the NodePool's name as `lab`."""
    return f'label_replace({expression}, "lab", "$1", "nodepool", "(.+)")'


def _allocatable(resource: str) -> str:
    """Karpenter's allocatable of each of its nodes (resource_type is the resource's name, lowercase)."""
    return f'karpenter_nodes_allocatable{{resource_type="{resource}"}}'


def _per_lab(labs: Mapping[str, Lab], metrics: Metrics, expression: Callable[[str, str], str]) -> str:
    """One expression over every lab, each with its own window: `expression(lab name, window)`, or-joined."""
    return "\nor\n".join(f"({expression(name, idle_window(lab, metrics))})" for name, lab in labs.items())


def _judged(lab_name: str, window: str) -> str:
    # A running seat whose pod is older than the window: one younger has not been measurable over all of it.
    return (
        f'{POD_LAB}{{lab="{lab_name}"}} and on (namespace, pod) (kube_pod_status_phase{{phase="Running"}} == 1)\n'
        f" and on (namespace, pod) (time() - kube_pod_start_time > {durations.seconds(window)})"
    )


def _measured(lab_name: str, window: str) -> str:
    # The seat's utilisation recorded at every evaluation of the window but one: a window with a gap (the exporter
    # restarting, a failed scrape, a pod the exporter could not name) is not a measurement of all of it.
    evaluations = durations.seconds(window) // durations.seconds(EVALUATION_INTERVAL)
    return f'count_over_time({SEAT_UTILISATION}{{lab="{lab_name}"}}[{window}]) >= {evaluations - 1}'


def _idle(lab_name: str, window: str, metrics: Metrics) -> str:
    # Under the threshold in every sample of the window (max_over_time: one busy sample keeps the seat), measured over
    # all of it, and judged.
    return (
        f'max_over_time({SEAT_UTILISATION}{{lab="{lab_name}"}}[{window}]) < {metrics.idle_utilisation_percent}\n'
        f" and on (namespace, pod) {SEAT_MEASURED} and on (namespace, pod) {SEAT_JUDGED}"
    )


def _fresh(selection: str) -> str:
    """The per-pod series of `selection` whose last sample is at most FRESH_SECONDS old, with the pod's lab."""
    return (
        f"max by (namespace, pod, lab) (\n  ({selection}\n"
        f"   and (time() - timestamp({selection}) <= {FRESH_SECONDS}))\n"
        f"  * on (namespace, pod) group_left (lab) {POD_LAB})"
    )


def _culled(labs: Mapping[str, Lab]) -> list[dict[str, str]]:
    """A learner's seat of a lab with gpuIdleTimeout that the culler had as idle within CULLED_AFTER and whose pod is
    gone, while kube-state-metrics answers (a failed scrape of it marks every pod's series stale, which is no pod
    gone). The culler logs its stops and keeps no count: this is the stops as the workspace sees them, including any
    other stop of a seat idle at the time (the learner's own, the hub's notebook culler)."""
    timed = sorted(name for name, lab in labs.items() if lab.gpu_idle_timeout)
    if not timed:
        return []
    return [
        {
            "record": SEAT_CULLED,
            "expr": f"(group by (lab, namespace, pod, username) (last_over_time({LEARNER_IDLE}"
            f'{{lab=~"{"|".join(timed)}"}}[{CULLED_AFTER}]))\n'
            f"  unless on (namespace, pod) kube_pod_info)\n"
            f' and on () (max(up{{job="{KUBE_STATE_METRICS}"}}) == 1)',
        }
    ]


def _prices(labs: Mapping[str, Lab], book: PriceBook) -> str:
    """The book's on-demand price of each of the labs' instance types, one series per type (`instance_type`): one rule,
    as one record name written by several rules is one Prometheus warns of."""
    types = sorted({t for lab in labs.values() for t in lab.instance_types})
    return " or ".join(f'label_replace(vector({book.on_demand[t]}), "instance_type", "{t}", "", "")' for t in types)


def _gpu_limit_costs(labs: Mapping[str, Lab], book: PriceBook) -> str:
    """Each priced lab's cost per hour at its NodePool's GPU limit at `book` (maxGpus at its dearest type per GPU), one
    series per lab: what the spend gate counts a minute of unmeasured spend at. The program has this figure, not the
    planner's (only the render runs the planner), and a gap is better counted high: the most the limit lets run."""
    costs = {name: lab.cost_at(book).gpu_limit_per_hour for name, lab in labs.items()}
    return " or ".join(
        f'label_replace(vector({usd}), "lab", "{name}", "", "")' for name, usd in costs.items() if usd is not None
    )


def _month_residue(residue: int) -> str:
    return f"((year() * 12 + month()) % 3 == {residue})"


def _by_month(expression: str) -> str:
    """`expression`, labelled with this month's MONTH_LABEL."""
    return " or ".join(
        f'label_replace({expression} and on () {_month_residue(r)}, "{MONTH_LABEL}", "{r}", "", "")' for r in range(3)
    )


def _term_window(budget: LabBudget) -> str:
    assert budget.start is not None and budget.end is not None
    return f"(vector(time()) >= {int(budget.start.timestamp())} < {int(budget.end.timestamp())})"


def budget_spend(name: str, budget: LabBudget) -> str:
    """The lab's spend in USD over its budget's period so far (this month; or its term, while it lasts), as the
    hub's spend gate counts it: one sample a minute, each a minute's spend (components/jupyterhub/spend_gate.py)."""
    if budget.period == MONTH:
        spent = f'sum_over_time({MONTH_SPEND}{{lab="{name}"}}[31d]) and on ({MONTH_LABEL}) {THIS_MONTH}'
    else:
        assert budget.start is not None and budget.end is not None
        seconds = int((budget.end - budget.start).total_seconds())
        spent = f'sum_over_time({TERM_SPEND}{{lab="{name}"}}[{seconds}s])'
    return f"sum by (lab) ({spent}) / 60"


def _class_seconds_so_far(budget: LabBudget) -> str:
    """The seconds of the term's class hours before now, a one-element vector without labels."""
    return " + ".join(
        f"clamp(vector(time()) - {int(start.timestamp())}, 0, {int((end - start).total_seconds())})"
        for start, end in budget.class_hours
    )


def term_forecast(name: str, budget: LabBudget) -> str:
    """The lab's spend over its term so far, per class second so far, times the term's class seconds; only within the
    term, once FORECAST_FROM_PERCENT of its class hours are over."""
    total = sum(int((end - start).total_seconds()) for start, end in budget.class_hours)
    so_far = _class_seconds_so_far(budget)
    return (
        f"({budget_spend(name, budget)}) * {total} / scalar({so_far})\n"
        f" and on () (({so_far}) >= {total * FORECAST_FROM_PERCENT // 100})\n"
        f" and on () {_term_window(budget)}"
    )


def forecast_for(budget: LabBudget) -> str:
    """How long the forecast must stay over the budget before it fires: the term's longest class day (warm-up to
    end). Between classes the forecast holds still (nothing spent, no class hour passing; the minutes Karpenter
    takes to remove the emptied nodes only raise it), so a forecast over the budget for that long has been over at
    the end of a class day: the class's whole cost, not its first hour (a class starts with every warm seat running
    and fills as learners arrive, and may empty before its end)."""
    longest = max(end - start for start, end in budget.class_hours)
    return f"{int(longest.total_seconds()) // 60}m"


def _forecast_rules(terms: Mapping[str, LabBudget]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The forecast of each term budget (one record), and its alert per lab."""
    if not terms:
        return [], []
    record = {
        "record": FORECAST,
        "expr": "\nor\n".join(f"({term_forecast(name, b)})" for name, b in terms.items()),
    }
    alerts = [
        {
            "alert": "LabBudgetForecastOver",
            "expr": f'{FORECAST}{{lab="{name}"}} > {round(budget.amount, 4)}',
            "for": forecast_for(budget),
            "labels": {"severity": "warning", "lab": name},
            "annotations": {
                "summary": f'Lab {name} is on course to spend {{{{ $value | printf "%.2f" }}}} US dollars over its '
                f"term, above its budget of {budget.amount:.2f}",
                "description": "The spend so far per class hour so far, times the term's class hours (each class "
                "day's warm-up to its end). The teacher may raise labs.<lab>.budget, or the classes may spend less: "
                "fewer warm seats, a smaller maxGpus, an earlier gpuIdleTimeout.",
            },
        }
        for name, budget in terms.items()
    ]
    return [record], alerts


def _budget_rules(labs: Mapping[str, Lab], budgets: Mapping[str, LabBudget], book: PriceBook) -> list[dict[str, Any]]:
    """The series a budget's alert sums, and the alerts: at BUDGET_ALERT_PERCENT of each budget, a term budget on
    course to exceed it, and a lab whose spend goes unrecorded while the meter runs."""
    terms = {name: b for name, b in budgets.items() if b.period != MONTH}
    months = len(terms) < len(budgets)
    recording = [
        # Every evaluation of the group: the minutes the meter ran, against which the spend gate counts the minutes a
        # lab's spend was not recorded.
        {"record": METER_UP, "expr": "vector(1)"},
        *(
            [{"record": THIS_MONTH, "expr": _by_month("vector(1)")}, {"record": MONTH_SPEND, "expr": _by_month(SPEND)}]
            if months
            else []
        ),
        *(
            [
                {
                    "record": TERM_SPEND,
                    "expr": " or ".join(
                        f'({SPEND}{{lab="{name}"}} and on () {_term_window(b)})' for name, b in terms.items()
                    ),
                }
            ]
            if terms
            else []
        ),
    ]
    forecasts, forecast_alerts = _forecast_rules(terms)
    alerts = [
        {
            "alert": "LabBudgetMostlySpent",
            "expr": f"{budget_spend(name, budget)} >= {round(BUDGET_ALERT_PERCENT / 100 * budget.amount, 4)}",
            "labels": {"severity": "warning", "lab": name},
            "annotations": {
                "summary": f'Lab {name} has spent {{{{ $value | printf "%.2f" }}}} of its {budget.amount:.2f} US '
                f"dollars for the {budget.period}, {BUDGET_ALERT_PERCENT}% or more",
                "description": "At the whole budget the hub refuses the lab's learners new servers (where it runs the "
                "spend gate); the teacher may raise labs.<lab>.budget. The lab's nodes at "
                f"{book.source}, spot at on-demand, as the meter records them; minutes it did not record are alerted "
                "by LabSpendUnmeasured.",
            },
        }
        for name, budget in budgets.items()
    ]
    unmeasured = {
        "alert": "LabSpendUnmeasured",
        # A lab's NodePool that Karpenter reports has a spend series, 0 without nodes; none means Karpenter's metrics
        # are not reaching the workspace, and the minutes would read as nothing spent.
        "expr": " or ".join(f'absent({SPEND}{{lab="{name}"}})' for name in labs),
        "for": UNMEASURED_FOR,
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": f"Lab {{{{ $labels.lab }}}}'s spend has not been recorded for {UNMEASURED_FOR}",
            "description": "Karpenter's metrics for its NodePool are not reaching the workspace (the scraper, the "
            "controller). The hub's spend gate counts each such minute at the cost per hour of the lab's GPU limit "
            "(maxGpus at its dearest type), so a gap never reads as less spent.",
        },
    }
    return recording + forecasts + alerts + forecast_alerts + ([unmeasured] if labs else [])


def rule_groups(
    labs: Mapping[str, Lab], metrics: Metrics, book: PriceBook, budgets: Mapping[str, LabBudget] | None = None
) -> dict[str, Any]:
    """The rule file: one group, recording rules first, then the alerts that read them; the labs' spend at `book`'s
    prices, and the alerts of `budgets`."""
    learner = (
        f'label_replace(label_replace(kube_pod_annotations{{{USERNAME}!=""}}, "username", "$1", "{USERNAME}", "(.+)"), '
        f'"servername", "$1", "{SERVERNAME}", "(.*)")'
    )
    recording = [
        {
            "record": POD_LAB,
            "expr": f'max by (namespace, pod, lab) (label_replace(kube_pod_nodeselectors{{{LAB_SELECTOR}!=""}}, '
            f'"lab", "$1", "{LAB_SELECTOR}", "(.+)"))',
        },
        # dcgm-exporter's per-pod series carry the learner's pod and namespace; its whole-GPU series have no pod. Only
        # fresh series with the pod's UID (MEASURED_GPU_UTIL); a restarted exporter's new series joins the old one.
        {"record": SEAT_UTILISATION, "expr": _fresh(MEASURED_GPU_UTIL)},
        {"record": SEAT_MEMORY, "expr": _fresh(MEASURED_FB_USED)},
        {
            "record": SEATS_IN_USE,
            "expr": _per_lab_count(
                f'{POD_LAB} and on (namespace, pod) (kube_pod_status_phase{{phase="Running"}} == 1)'
            ),
        },
        {
            "record": PENDING,
            "expr": _per_lab_count(
                f'{POD_LAB} and on (namespace, pod) (kube_pod_status_phase{{phase="Pending"}} == 1)'
            ),
        },
        # One rule each, each lab's window its own: a record name that several rules write is one Prometheus warns of.
        *(
            [
                {"record": SEAT_JUDGED, "expr": _per_lab(labs, metrics, _judged)},
                {"record": SEAT_MEASURED, "expr": _per_lab(labs, metrics, _measured)},
                {"record": SEAT_IDLE, "expr": _per_lab(labs, metrics, lambda n, w: _idle(n, w, metrics))},
                # Judged but not measured over its window: never idle, never culled; shown, and alerted on below.
                {"record": SEAT_UNMEASURED, "expr": f"{SEAT_JUDGED} unless on (namespace, pod) {SEAT_MEASURED}"},
            ]
            if labs
            else []
        ),
        {"record": SEATS_IDLE, "expr": _per_lab_count(SEAT_IDLE)},
        {"record": SEATS_UNMEASURED, "expr": _per_lab_count(SEAT_UNMEASURED)},
        # The idle seats of JupyterHub's learners, by the learner's name and server, which the idle-GPU culler stops.
        {
            "record": LEARNER_IDLE,
            "expr": f"{SEAT_IDLE} * on (namespace, pod) group_left (username, servername) {learner}",
        },
        *_culled(labs),
        # Each seat culled in the last CULLED_OVER once, however long its SEAT_CULLED series lasted.
        {"record": SEATS_CULLED, "expr": _per_lab_count(f"max_over_time({SEAT_CULLED}[{CULLED_OVER}])")},
        {"record": SEATS, "expr": f"sum by (lab) ({_karpenter(_allocatable('nvidia.com/gpu'))})"},
        {"record": NODES, "expr": f"count by (lab) ({_karpenter(_allocatable('cpu'))})"},
        # Karpenter's cost of a NodePool: the sum of its NodeClaims' offering prices (sigs.k8s.io/karpenter v1.14.1
        # pkg/state/cost), which karpenter-provider-aws takes from EC2's hourly prices in US dollars.
        {"record": COST, "expr": f"max by (lab) ({_karpenter('karpenter_nodepools_cost_total')})"},
        # What a lab spends per hour at the stack's prices (domain/cost), the one source of the figures the render and
        # the summary show: its nodes by instance type (Karpenter names each node's type in `instance_type`,
        # sigs.k8s.io/karpenter v1.14.1 pkg/controllers/metrics/node/controller.go:277-301, its well-known labels in
        # snake case) times the type's on-demand price in `book`: the stack's region's where the program read them,
        # a spot node's too (components/metrics/rule_prices.py says why). The hub's spend gate sums it over its
        # budget's period (components/jupyterhub/spend_gate.py). A lab whose NodePool Karpenter reports without a
        # node records 0 (its limits: gpulab sets them on every NodePool, and Karpenter reports them every 10 s
        # whatever its nodes, sigs.k8s.io/karpenter v1.14.1 pkg/controllers/metrics/nodepool/controller.go), so that a
        # minute without a sample is one the meter did not measure, never one without nodes (LabSpendUnmeasured, the
        # gate's fill).
        *(
            [
                {"record": PRICE, "expr": _prices(labs, book)},
                {
                    "record": SPEND,
                    "expr": f"sum by (lab) (\n  count by (lab, instance_type) ({_karpenter(_allocatable('cpu'))})\n"
                    f"  * on (instance_type) group_left () {PRICE}\n)\n"
                    f"or 0 * max by (lab) ({_karpenter('karpenter_nodepools_limit')})",
                },
                *([{"record": GPU_LIMIT_COST, "expr": costs}] if (costs := _gpu_limit_costs(labs, book)) else []),
                *_budget_rules(labs, budgets or {}, book),
            ]
            if labs
            else []
        ),
    ]
    alerts = [
        {
            "alert": "GpuSeatsIdle",
            "expr": f"{SEATS_IDLE} > 0",
            "labels": {"severity": "info"},
            "annotations": {
                "summary": "Lab {{ $labels.lab }} has {{ $value }} seats whose GPU has stayed idle",
                "description": f"Under {metrics.idle_utilisation_percent}% GPU utilisation for the lab's "
                "gpuIdleTimeout, or gpulab:metrics.idleAfter; each holds a GPU slice another learner could use.",
            },
        },
        # Per lab, its own window: a lab node whose judged seats have had no fresh measurement for that long (its
        # exporter down or without its token and role, no host engine, failing scrapes). Their servers are not culled.
        *(
            {
                "alert": "GpuSeatsUnmeasured",
                "expr": f'count by (lab, node) (\n  ({SEAT_JUDGED}{{lab="{name}"}} unless on (namespace, pod) '
                f"{SEAT_UTILISATION})\n  * on (namespace, pod) group_left (node) max by (namespace, pod, node) "
                "(kube_pod_info)\n) > 0",
                "for": idle_window(lab, metrics),
                # The lab's own label (the one its expression keeps): one rule per lab, which promtool tells apart.
                "labels": {"severity": "warning", "lab": name},
                "annotations": {
                    "summary": "Lab {{ $labels.lab }} has {{ $value }} seats on node {{ $labels.node }} that "
                    f"dcgm-exporter has not measured for {idle_window(lab, metrics)}",
                    "description": "Their GPU use is unknown, so the idle-GPU culler leaves them running: check the "
                    "node's dcgm-exporter pod (its log, its service account's token and role) and the node's "
                    "dcgm-server.",
                },
            }
            for name, lab in labs.items()
        ),
        {
            "alert": "LearnersPending",
            "expr": f"{PENDING} > 0",
            # As long as a learner without a warm seat waits for a new node before the hub gives up (startTimeout,
            # components/jupyterhub/values.py).
            "for": DEFAULT_WARMUP,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Lab {{ $labels.lab }} has had {{ $value }} learners pending for " + DEFAULT_WARMUP,
                "description": "Their pods wait for a GPU slice: the lab may be at maxGpus, or Karpenter cannot "
                "launch its instance types.",
            },
        },
    ]
    return {"groups": [{"name": GROUP, "interval": EVALUATION_INTERVAL, "rules": recording + alerts}]}
