"""A budget that stops new servers, through a real JupyterHub 5.5 (tests/test_gpu_culler.py's Hub) running the spend
gate exactly as the stack renders it (hub.extraConfig and the gate's file from hub.extraFiles), against a fake
metrics workspace that answers the lab's spend: a learner who asks for a server in a lab whose spend over its budget's
period (this month, or the lab's term) has reached its budget is refused on the spawn page with the gate's message,
while a server already running goes on and another lab's learners start."""

import copy
import datetime
import html
import re
import time

from components.jupyterhub import culling, spend_gate, spending
from components.jupyterhub.notices import FILES
from tests.conftest import run_values, stack_values
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab
from tests.test_budgets import budget_summary
from tests.test_gpu_culler import Hub, Workspace

BUDGET = 100
STACK = stack_values(
    **{
        "gpulab:labs": {
            "intro": lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE, budget=BUDGET),
            "advanced": lab(["g5.xlarge"], 2, notebookImage=NOTEBOOK_IMAGE),
        },
        "gpulab:jupyterhub": HUB,
        "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        "gpulab:metrics": {},
        "gpulab:budgetAlerts": {"emails": ["teacher@example.edu"]},
    }
)
# KubeSpawner's spawn page as the gate sees it: a `profile` field holding the lab's slug (KubeSpawner 7.0.0
# options_from_form), which JupyterHub's 'simple' form reading gives too.
FORM = '<select name="profile"><option value="intro">intro</option><option value="advanced">advanced</option></select>'


class Spend(Workspace):
    """The fake workspace answering each lab's measured spend in USD, its unmeasured minutes and its ceiling per hour
    (none: no series)."""

    def __init__(self):
        self.spend: dict[str, float] = {}
        self.unmeasured: dict[str, int] = {}
        self.ceiling: dict[str, float] = {}
        super().__init__()

    def result(self, query: str) -> list[dict]:
        lab_name = re.search(r'lab="([^"]+)"', query)[1]
        if query.startswith("sum(count_over_time("):
            answer = self.unmeasured.get(lab_name)
        elif query.startswith("max("):
            answer = self.ceiling.get(lab_name)
        else:
            answer = self.spend.get(lab_name)
        return [] if answer is None else [{"metric": {}, "value": [time.time(), str(answer)]}]


def rendered_gate(stack: dict = STACK) -> tuple[str, str, str]:
    """The gate's configuration lines, its source and the workspace URL they name, as the stack renders them."""
    values = run_values(stack).one("kubernetes:helm.sh/v3:Release", "jupyterhub").inputs["values"]["hub"]
    config = values["extraConfig"][spending.CONFIG_NAME]
    source = values["extraFiles"]["spend-gate"]
    assert source["mountPath"] == f"{FILES}/spend_gate.py"
    (url,) = re.findall(r"'(http://127\.0\.0\.1:\d+/workspaces/[^']+)'", config)
    assert url.startswith(f"http://127.0.0.1:{culling.PROXY_PORT}/")
    return config, source["stringData"], url


def spawn(hub: Hub, name: str, lab_name: str) -> str:
    """What a learner sees after choosing the lab on the spawn page and pressing Start. JupyterHub 5.5 waits a second
    for the spawn (the gate's answer included) and otherwise sends the learner to the spawn-pending page, which follows
    the spawn's progress and, once it has failed, shows why (handlers/pages.py _wrap_spawn_single_user,
    SpawnPendingHandler): on a loaded machine the gate takes longer, so a pending page is read again once the spawn
    has ended, as the learner's page would show it."""
    page = hub.page(name, "/spawn", {"profile": lab_name})
    if "/server/progress" in page:
        hub.wait(lambda: not hub.servers(name).get("", {}).get("pending"), f"{name}'s spawn to end", 120)
        if not hub.servers(name).get("", {}).get("ready"):
            page = hub.page(name, f"/spawn-pending/{name}")
    return page


def gated_hub(tmp_path, stack: dict = STACK) -> tuple[Hub, Spend]:
    """A real hub running the stack's rendered gate against a fake workspace."""
    config, source, url = rendered_gate(stack)
    workspace = Spend()
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "spend_gate.py").write_text(source)
    lines = config.replace(repr(FILES), repr(str(tmp_path / "files"))).replace(url, workspace.url)
    (tmp_path / "hub").mkdir()
    hub = Hub(
        tmp_path / "hub",
        config=(
            f"c.Spawner.options_form = {FORM!r}",
            "c.Spawner.options_from_form = 'simple'",
            # A spawn slower than JupyterHub's slow_spawn_timeout (10 s, handlers/base.py) goes on in the background
            # as pending; a loaded test machine may take longer. The spawn page itself waits a second (spawn()).
            "c.JupyterHub.tornado_settings = {'slow_spawn_timeout': 120}",
            *lines.splitlines(),
        ),
    )
    return hub, workspace


def with_term(term: dict) -> dict:
    """STACK with intro's budget over a term of Monday classes at 10:00 UTC (20-minute warm-up)."""
    values = copy.deepcopy(STACK)
    values["gpulab:labs"]["intro"]["classes"] = [{"schedule": "0 10 * * mon", "duration": "1h", "term": term}]
    return values


def test_a_learner_is_refused_a_new_server_once_the_labs_budget_is_spent(tmp_path):
    hub, workspace = gated_hub(tmp_path)
    try:
        # Under budget: grace starts.
        workspace.spend["intro"] = BUDGET - 0.01
        spawn(hub, "grace", "intro")
        hub.wait(lambda: hub.servers("grace").get("", {}).get("ready"), "grace's server")

        # At the budget: ada is refused, and told why; grace's server goes on.
        workspace.spend["intro"] = BUDGET
        page = html.unescape(spawn(hub, "ada", "intro"))
        month = time.strftime("%B %Y", time.gmtime())
        message = (
            f"Lab intro has spent its budget for {month}: 100.00 of 100.00 US dollars. New servers do not start "
            "until your teacher raises the lab's budget or the month ends; servers already running go on."
        )
        assert message in page, page[-3000:]
        assert hub.servers("ada") == {}
        assert hub.servers("grace")[""]["ready"]

        # Another lab has no budget: ada starts there.
        spawn(hub, "ada", "advanced")
        hub.wait(lambda: hub.servers("ada").get("", {}).get("ready"), "ada's server in lab advanced")

        # The gate asked for intro's spend since the month began, from the rule the workspace records.
        since = spend_gate.month_start(time.time())
        asked = [
            q for q in workspace.queries if q == spend_gate.spend_query("intro", int(re.search(r"\[(\d+)s\]", q)[1]))
        ]
        assert len(asked) == 2
        seconds = int(re.search(r"\[(\d+)s\]", asked[-1])[1])
        assert abs(seconds - (time.time() - since)) < 120
        assert not any('lab="advanced"' in q for q in workspace.queries)

        # Under budget as recorded, but 20 minutes went unrecorded while the meter ran: counted at the lab's 60 USD an
        # hour, 20 USD more, the spend is over the budget, and the learner is told how it was counted.
        workspace.spend["intro"], workspace.unmeasured["intro"], workspace.ceiling["intro"] = 90, 20, 60
        page = html.unescape(spawn(hub, "alan", "intro"))
        assert (
            f"Lab intro has spent its budget for {month}: 110.00 of 100.00 US dollars (20 minutes the meter did not "
            "measure are counted at the lab's most per hour)."
        ) in page, page[-3000:]
        assert hub.servers("alan") == {}
    finally:
        hub.close()
        workspace.server.shutdown()


def running_term() -> tuple[dict, datetime.datetime]:
    """A term of 16 Mondays under way today, from the Monday four weeks back (some 106 days, within the 150 the
    workspace keeps), and its start: the first Monday's 10:00 class warms up at 09:40, so the term begins the midnight
    before less 20 minutes, at 23:40 UTC on the Sunday."""
    today = datetime.datetime.now(datetime.UTC).date()
    first = today - datetime.timedelta(days=today.weekday() + 28)
    last = first + datetime.timedelta(weeks=15)
    since = datetime.datetime.combine(first, datetime.time(), datetime.UTC) - datetime.timedelta(minutes=20)
    return {"start": first.isoformat(), "end": last.isoformat()}, since


def test_a_term_budget_refuses_once_the_terms_spend_reaches_it(tmp_path):
    """A term under way: the gate adds the spend up from the term's start (its warm-up the evening before, UTC), not
    from the month's start, and says so."""
    term, start = running_term()
    hub, workspace = gated_hub(tmp_path, with_term(term))
    since = start.timestamp()
    try:
        workspace.spend["intro"] = BUDGET
        page = html.unescape(spawn(hub, "ada", "intro"))
        message = (
            f"Lab intro has spent its budget for the term (since {start:%d %B %Y}): 100.00 of 100.00 US dollars. New "
            "servers do not start until your teacher raises the lab's budget; servers already running go on."
        )
        assert message in page, page[-3000:]
        assert hub.servers("ada") == {}
        asked, _unmeasured = [q for q in workspace.queries if 'lab="intro"' in q]
        seconds = int(re.search(r"\[(\d+)s\]", asked)[1])
        assert abs(seconds - (time.time() - since)) < 120
    finally:
        hub.close()
        workspace.server.shutdown()


def test_after_its_term_a_labs_learners_are_refused_new_servers_naming_the_terms_end(tmp_path):
    """A term of Mondays from 1 September to 15 December 2025 ended at midnight after its last day, 00:00 UTC on 16
    December: however little the workspace says was spent (nothing: the term's samples are past the 150 days it keeps),
    ada is refused with the term's end and how her teacher goes on, without a query; a server already running goes on,
    and another lab's learners start."""
    values = with_term({"start": "2025-09-01", "end": "2025-12-15"})
    text = " ".join(" ".join(budget_summary(values)).split())
    assert "after a term's end it refuses them too, until the term is extended or the budget made monthly" in text
    hub, workspace = gated_hub(tmp_path, values)
    try:
        spawn(hub, "grace", "advanced")
        hub.wait(lambda: hub.servers("grace").get("", {}).get("ready"), "grace's server in lab advanced")
        workspace.spend["intro"] = 0
        page = html.unescape(spawn(hub, "ada", "intro"))
        message = (
            "Lab intro's term ended on 16 December 2025 at 00:00 UTC, and its budget of 100.00 US dollars was for the "
            "term (since 31 August 2025). New servers do not start after the term until your teacher extends it (a "
            "later end for the lab's classes' term) or gives the lab a monthly budget; servers already running go on."
        )
        assert message in page, page[-3000:]
        assert hub.servers("ada") == {}
        assert hub.servers("grace")[""]["ready"]
        assert not any('lab="intro"' in q for q in workspace.queries)
    finally:
        hub.close()
        workspace.server.shutdown()


def test_a_term_not_begun_lets_learners_start_without_asking(tmp_path):
    hub, workspace = gated_hub(tmp_path, with_term({"start": "2030-01-07", "end": "2030-03-25"}))
    try:
        workspace.spend["intro"] = BUDGET  # whatever the workspace says: nothing of the term is spent yet
        spawn(hub, "ada", "intro")
        hub.wait(lambda: hub.servers("ada").get("", {}).get("ready"), "ada's server before the term")
        assert not any('lab="intro"' in q for q in workspace.queries)
    finally:
        hub.close()
        workspace.server.shutdown()


def test_the_gated_labs_budget_output_and_summary_say_it_stops_new_servers():
    run = run_values(STACK)
    assert {name: lab["cost"]["budget"] for name, lab in run.outputs["labs"].items()} == {
        "intro": {"amount": BUDGET, "period": "month", "stopsSpawnsAt": BUDGET},
        "advanced": None,
    }
    text = " ".join(" ".join(budget_summary(STACK)).split())
    assert (
        "at its budget, the hub refuses new servers to the learners of intro (running ones go on; raise the budget to "
        "let them start)"
    ) in text
    assert "the meter's workspace raises LabBudgetMostlySpent at 80% of a lab's budget over its period" in text
    assert "after a term's end" not in text


def test_a_stack_without_a_budget_renders_no_gate():
    values = copy.deepcopy(STACK)
    del values["gpulab:labs"]["intro"]["budget"]
    del values["gpulab:budgetAlerts"]
    hub = run_values(values).one("kubernetes:helm.sh/v3:Release", "jupyterhub").inputs["values"]["hub"]
    assert spending.CONFIG_NAME not in hub.get("extraConfig", {})
    assert "spend-gate" not in hub.get("extraFiles", {})
