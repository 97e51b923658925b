"""gpulab's spend gate: a JupyterHub pre_spawn_hook that refuses to start a learner's server in a lab whose spend over
its budget's period (the lab's term, or this month) has reached its budget, with a message the learner reads on the
spawn page; servers already running go on.

What it reads: the metrics workspace's gpulab:lab_spend_usd_per_hour (the lab's nodes at the stack's prices,
components/metrics/recording_rules.py), recorded once a minute, summed over the seconds since the period began (the
term's start, or the month's start in UTC) and divided by 60: the lab's spend so far in US dollars, within a
minute or two of the nodes' running. A minute in which the meter's rules ran (gpulab:meter_up:info) but recorded no
spend for the lab (Karpenter's metrics did not reach the workspace) is counted at what the lab's GPU limit costs per
hour (gpulab:lab_gpu_limit_usd_per_hour: maxGpus at its dearest type per GPU): a gap never reads as less spent, and
the learner's message says how many minutes were so counted. It asks through the hub pod's SigV4 proxy, as the
idle-GPU culler does (components/jupyterhub/culling.py). The teacher lets learners start again by raising the lab's
budget (and `pulumi up`); for a monthly budget, the month's turn does too.

A term's budget covers the term, [its start, its end): before the start nothing of it is spent and learners start;
from its end the gate refuses every new server of the lab without asking the workspace, and says the term has ended
and how the teacher goes on (see term_over).

A workspace that does not answer lets the learner start, and the hub logs why: the AWS Budgets alerts still hear of the
spend, and a class is not stopped by a metrics outage.

The hub's configuration loads it (components/jupyterhub/spending.py):

    c.Spawner.pre_spawn_hook = spend_gate.SpendGate(
        METRICS_URL,
        {LAB: {"amount": USD, "period": "month"}, LAB: {"amount": USD, "period": "term", "since": UNIX, "until": UNIX}},
        DEFAULT_LAB)

It uses only the Python standard library and tornado, which the hub's image has.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from urllib.parse import urlencode

from tornado import web
from tornado.httpclient import AsyncHTTPClient

# The meter's series (components/metrics/recording_rules.py SPEND, METER_UP, GPU_LIMIT_COST).
SPEND_SERIES = "gpulab:lab_spend_usd_per_hour"
METER_SERIES = "gpulab:meter_up:info"
GPU_LIMIT_SERIES = "gpulab:lab_gpu_limit_usd_per_hour"
# The rule's evaluation interval (components/metrics/recording_rules.py EVALUATION_INTERVAL): each sample is a minute.
SAMPLES_PER_HOUR = 60
log = logging.getLogger("gpulab.spend_gate")


def month_start(now: float) -> float:
    """The beginning of `now`'s month, UTC, as a Unix time."""
    day = datetime.fromtimestamp(now, UTC)
    return day.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


def spend_query(lab: str, seconds: int) -> str:
    """The lab's spend in USD over the last `seconds` (at least one)."""
    return f'sum(sum_over_time({SPEND_SERIES}{{lab="{lab}"}}[{max(seconds, 1)}s])) / {SAMPLES_PER_HOUR}'


def unmeasured_query(lab: str, seconds: int) -> str:
    """The minutes of the last `seconds` in which the meter ran but recorded no spend for the lab."""
    window = f"[{max(seconds, 1)}s]"
    return (
        f"sum(count_over_time({METER_SERIES}{window})) - "
        f'(sum(count_over_time({SPEND_SERIES}{{lab="{lab}"}}{window})) or vector(0))'
    )


def gpu_limit_query(lab: str) -> str:
    """What the lab's GPU limit costs in USD per hour (maxGpus at its dearest type per GPU)."""
    return f'max({GPU_LIMIT_SERIES}{{lab="{lab}"}})'


def counted(measured: float, unmeasured: int, per_hour: float | None) -> float:
    """The spend the gate counts: what the meter recorded, and each unmeasured minute at `per_hour`, what the lab's
    GPU limit costs (nothing without it: an unpriced lab)."""
    return measured + (unmeasured * per_hour / SAMPLES_PER_HOUR if unmeasured and per_hour is not None else 0.0)


def refusal(lab: str, spent: float, amount: float, since: float, term: bool, unmeasured: int = 0) -> str:
    """What a learner reads when the lab's budget is spent."""
    if term:
        period = f"the term (since {datetime.fromtimestamp(since, UTC):%d %B %Y})"
        until = "until your teacher raises the lab's budget"
    else:
        period = datetime.fromtimestamp(since, UTC).strftime("%B %Y")
        until = "until your teacher raises the lab's budget or the month ends"
    gap = (
        f" ({unmeasured} minutes the meter did not measure are counted at the lab's most per hour)"
        if unmeasured
        else ""
    )
    return (
        f"Lab {lab} has spent its budget for {period}: {spent:.2f} of {amount:.2f} US dollars{gap}. New servers do "
        f"not start {until}; servers already running go on."
    )


def term_over(lab: str, amount: float, since: float, until: float) -> str:
    """What a learner reads after the lab's term.

    Why refuse rather than start a new window: the budget is an amount for the term (issue #49: "a number of USD per
    term where the lab has a term"), the answer to a teacher's "what stops it from costing more". After the term no
    amount was given for: a fresh window would let the lab spend a second budget nobody set, and a sum from the term's
    start would read low once the workspace drops the term's first samples (150 days, domain/cost/meter_cost.py) and
    let spawns through. The teacher decides: a later end for the classes' term, or a monthly budget."""
    return (
        f"Lab {lab}'s term ended on {datetime.fromtimestamp(until, UTC):%d %B %Y at %H:%M} UTC, and its budget of "
        f"{amount:.2f} US dollars was for the term (since {datetime.fromtimestamp(since, UTC):%d %B %Y}). New "
        "servers do not start after the term until your teacher extends it (a later end for the lab's classes' "
        "term) or gives the lab a monthly budget; servers already running go on."
    )


def refused(message: str) -> web.HTTPError:
    error = web.HTTPError(403, message)
    # JupyterHub 5.5 shows an exception's jupyterhub_message on the spawn page (utils.format_exception).
    error.jupyterhub_message = message  # type: ignore[attr-defined]
    return error


class SpendGate:
    def __init__(self, metrics_url: str, budgets: dict[str, dict], default_lab: str):
        self.metrics_url = metrics_url.rstrip("/")
        self.budgets = budgets
        # The lab of a learner who names no profile: KubeSpawner's first (spawn_profiles.py). A learner who picks one on
        # the spawn page has its slug, the lab's name, in user_options["profile"] (KubeSpawner 7.0.0
        # kubespawner/spawner.py:3510, options_from_form), which this reads before KubeSpawner applies the profile.
        self.default_lab = default_lab

    async def value(self, query: str) -> float | None:
        """The one value a query answers, None when it answers none."""
        response = await AsyncHTTPClient().fetch(f"{self.metrics_url}/api/v1/query?{urlencode({'query': query})}")
        answer = json.loads(response.body)
        if answer.get("status") != "success":
            raise RuntimeError(f"the metrics workspace answered {answer.get('error') or answer}")
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    async def spent(self, lab: str, since: float) -> tuple[float, int]:
        """The lab's spend in USD since `since`, its unmeasured minutes at its GPU limit's cost included, and those
        minutes."""
        seconds = int(time.time() - since)
        measured = await self.value(spend_query(lab, seconds)) or 0.0
        unmeasured = max(int(await self.value(unmeasured_query(lab, seconds)) or 0), 0)
        if not unmeasured:
            return measured, 0
        per_hour = await self.value(gpu_limit_query(lab))
        if per_hour is None:  # an unpriced lab: nothing to count the gap at
            log.warning("lab %s: %d minutes of spend unmeasured and no price to count them at", lab, unmeasured)
            return measured, 0
        return counted(measured, unmeasured, per_hour), unmeasured

    async def __call__(self, spawner) -> None:
        lab = spawner.user_options.get("profile") or self.default_lab
        budget = self.budgets.get(lab)
        if budget is None:
            return
        now = time.time()
        term = budget["period"] == "term"
        since = budget["since"] if term else month_start(now)
        if since >= now:  # a term not begun: nothing of it spent yet
            return
        amount = budget["amount"]
        if term and now >= budget["until"]:
            log.info("lab %s: refused %s's new server: the term is over", lab, spawner.user.name)
            raise refused(term_over(lab, amount, since, budget["until"]))
        try:
            spent, unmeasured = await self.spent(lab, since)
        except Exception as error:  # see above: an unanswered query lets the learner start
            log.error("lab %s: spend unknown, %s starts anyway: %s", lab, spawner.user.name, error)
            return
        if spent >= amount:
            message = refusal(lab, spent, amount, since, term, unmeasured)
            log.info("lab %s: refused %s's new server: %.2f of %.2f USD spent", lab, spawner.user.name, spent, amount)
            raise refused(message)
