"""The class rehearsal: a stack's render played on a twin of its cluster, a real Kubernetes control plane of the
stack's minor version built from the pinned modules (rehearsal/twin.py, rehearsal/twins.py).

    python -m tools.rehearse <stack name or stack file> --out <dir> [--all-days]

Builds the twin of the stack's gpulab:cluster.kubernetesVersion where it is not built or not up to date (minutes cold,
seconds warm; rehearsal/twins.py), renders the stack into <dir>/render (as render/run.py, charts included), and for each
day of the term it plays (rehearsal/term.py: the days that may play differently, or with --all-days every class day)
starts a twin, applies the render as `pulumi up` would (rehearsal/apply.py), plays the class day on Karpenter's
controllers on a simulated clock (play_day: the classes' CronJobs, learners' pods made and deleted,
rehearsal/class_day.py's timeline); then writes <dir>/rehearsal.json. Every object the API server refuses (its schema,
CEL rules, admission including Pod Security, on the objects and on the pods their workloads make) fails the rehearsal
with the server's own message: one `rehearsal: refused ...` line each, exit status 1; so does each other finding of
`problems` (docs/rehearsal.md lists them: RBAC denials, failed class Jobs, the hub's user-scheduler, the classes' and
labs' promises on the clock). A stack file with problems exits with status 2 and its `gpulab:` lines, as the render
does, and so does one on a minor version without a twin; a twin that cannot be built, with status 1 and one line saying
why. docs/rehearsal.md says how to read rehearsal.json.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import itertools
import json
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

try:
    import pulumi
    import yaml
    from traitlets.config import Config

    import domain.stack
    import program
    import render.run
    from components.jupyterhub.hub import RELEASE as HUB_RELEASE
    from devtools.progress import Progress
    from domain.capacity.boot_timings import Overrides
    from domain.cost import preview_cost
    from domain.stack.jupyterhub import JupyterHub
    from domain.stack.model import Settings
    from domain.time import utc
    from planner import plan
    from rehearsal import (
        apply,
        class_day,
        cron_jobs,
        cronjob_controller_process,
        day_chart,
        learner_pods,
        report,
        spot,
        system_nodes,
        term,
        timings,
        twin,
        twins,
        user_scheduler_process,
    )
    from rehearsal import karpenter as karpenter_twin
    from render import charts, harness
except ModuleNotFoundError as missing:  # an interpreter without the project's requirements
    sys.exit(f"gpulab: {missing.name} is not installed for {sys.executable}; run `make rehearse`")

REHEARSAL = report.REHEARSAL
RENDER = "render"


class Unavailable(Exception):
    """The rehearsal cannot run here (the twin not built, the charts not rendered): one line says why."""


def stack_run(stack: str) -> harness.Run:
    """The stack's program run; raises domain.stack.ConfigError or pulumi.RunError for bad input."""
    name, path = render.run.stack_file(stack)
    with Progress("rehearsal: the program under mocks"):
        return harness.run(name, render.run.read_stack_file(path))


def render_stack(run: harness.Run, out: Path) -> None:
    """The run's render written into `out`, its charts included."""
    render.run.clean(out)
    render.run.write(run, out)
    with Progress("rehearsal: helm template of the charts"):
        not_rendered = charts.write(run, out)
    if not_rendered:
        raise Unavailable("the rehearsal applies the charts, which are not rendered: " + "; ".join(not_rendered))


def hub_learners(
    plane: twin.ControlPlane, render_dir: Path, hub: JupyterHub
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Each profile's learner pod as the hub's KubeSpawner builds it, created in dry-run as the hub's own service
    account (the hub Deployment's): the pod's admission and the hub's permission to make it. Returns what was
    refused and what RBAC denied."""
    objects = [o for o in yaml.safe_load_all((render_dir / "charts" / f"{HUB_RELEASE}.yaml").read_text()) if o]
    config = learner_pods.hub_config(objects, hub.namespace)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "hub"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    identity = plane.service_account(hub.namespace, account)
    refused: list[dict[str, str]] = []
    denied: list[dict[str, str]] = []
    for profile in config.KubeSpawner.profile_list:
        what = f"the learner pod of profile {profile['slug']}"
        pod = learner_pods.learner_pod(config, profile["slug"])
        try:
            identity.request(
                "POST", f"/api/v1/namespaces/{hub.namespace}/pods", pod, dryRun="All", fieldValidation="Strict"
            )
        except twin.ApiError as error:
            if error.status == 403:
                denied.append({"what": what, "serviceAccount": f"{hub.namespace}/{account}", "message": error.message})
            else:
                refused.append({"object": what, "source": f"charts/{HUB_RELEASE}.yaml", "message": error.message})
    return refused, denied


@contextlib.contextmanager
def start_user_scheduler(
    plane: twin.ControlPlane, render_dir: Path, hub: JupyterHub
) -> Iterator[user_scheduler_process.UserScheduler | None]:
    """The hub's user-scheduler on the twin as its rendered Deployment runs it (rehearsal/user_scheduler_process.py);
    none where the chart renders none (its learner pods then name no scheduler of its)."""
    source = f"charts/{HUB_RELEASE}.yaml"
    objects = [o for o in yaml.safe_load_all((render_dir / source).read_text()) if o]
    if not user_scheduler_process.deployed(objects):
        yield None
        return
    with user_scheduler_process.running(plane, objects, hub.namespace, source) as scheduler:
        yield scheduler


# Learners' pods where gpulab:jupyterhub is off (or their lab is off its spawn page): any namespace does, the pod's
# nodeSelector and tolerations decide where it runs; the twin's default namespace has its service account at once.
LEARNER_NAMESPACE = "default"


# rehearsal.json's `substitutions` entry for the learners' home volumes that _without_claims leaves out.
HOME_VOLUMES = {
    "component": "learners' home volumes (gpulab:jupyterhub.homes perLearner: KubeSpawner's claim-<user>, which the "
    "EBS CSI driver provisions where the learner's pod is scheduled)",
    "inTheRehearsal": "left out of each learner's pod: the twin runs no CSI driver, so the claim would never bind; on "
    "a learner's first start the volume places nothing, and a returning learner's pod, tied to its volume's zone, is "
    "not played",
}


def _without_claims(pod: dict[str, Any]) -> dict[str, Any]:
    """The learner's pod without its PersistentVolumeClaim volumes: the home volume of gpulab:jupyterhub.homes:
    perLearner. KubeSpawner creates the claim claim-<user> before the pod, and the EBS CSI driver provisions it where
    the scheduler put the pod (WaitForFirstConsumer); the twin has neither, so the claim would never bind and the pod
    never be scheduled. On a learner's first start the claim places nothing (the volume follows the node), which is
    the class day the rehearsal plays; a returning learner's pod, bound to the zone of its volume, it does not play."""
    spec = pod["spec"]
    claims = {v["name"] for v in spec.get("volumes") or [] if "persistentVolumeClaim" in v}
    if claims:
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in claims]
        for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
            container["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m["name"] not in claims]
    return pod


class Learners:
    """Each learner's pod of the day, made and deleted on the twin: as the hub's KubeSpawner builds it for a lab on
    the spawn page when gpulab:jupyterhub is on (rehearsal/learner_pods.py), its schedulerName the hub's
    user-scheduler's, else the lab's `learnerPodSpec` output. `schedulers` names the schedulers the twin runs at the
    moment it is asked: a pod that names another is not made (nothing would bind it, and Karpenter, which waits for a
    scheduler to find a pod unschedulable, would never decide on it), and is one of `unscheduled`."""

    def __init__(
        self, plane: twin.ControlPlane, render_dir: Path, stack: Settings, schedulers: Callable[[], Collection[str]]
    ) -> None:
        self.admin = plane.admin
        self.specs = {n: lab["learnerPodSpec"] for n, lab in self._outputs(render_dir)["labs"].items()}
        self.spawn_page = {n for n, lab in stack.labs.items() if lab.on_spawn_page}
        self.hub: tuple[str, Config] | None = None  # the hub's namespace and its configuration
        if stack.jupyterhub is not None:
            objects = yaml.safe_load_all((render_dir / "charts" / f"{HUB_RELEASE}.yaml").read_text())
            namespace = stack.jupyterhub.namespace
            self.hub = namespace, learner_pods.hub_config([o for o in objects if o], namespace)
        self.schedulers = schedulers
        self.pods: dict[tuple[str, str], str] = {}  # the learner of each pod made, by (lab, namespace/name)
        # The schedulerName of each pod made that is still there (not left, not withdrawn), likewise.
        self.scheduler_of: dict[tuple[str, str], str] = {}
        self.unscheduled: dict[tuple[str, str], list[str]] = {}  # (lab, schedulerName) -> its learners not made
        self.left_out_claims = False  # whether a learner's pod was made without its home volume (_without_claims)

    @staticmethod
    def _outputs(render_dir: Path) -> dict[str, Any]:
        return dict(json.loads((render_dir / "outputs.json").read_text()))

    def _pod(self, lab: str, learner: str) -> dict[str, Any]:
        if self.hub is not None and lab in self.spawn_page:
            namespace, spawner_config = self.hub
            pod = learner_pods.learner_pod(spawner_config, lab, learner)
            pod["metadata"]["namespace"] = namespace
            played = _without_claims(copy.deepcopy(pod))
            self.left_out_claims |= played != pod
            return played
        meta = {"name": learner, "namespace": LEARNER_NAMESPACE}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(self.specs[lab])}

    def _withdraw(self, running: Collection[str]) -> None:
        """The pods made for a scheduler that no longer runs (it stopped, or RBAC denied it) and not bound by it:
        deleted, and their learners counted among the unscheduled, so that the day does not wait on them."""
        for key, scheduler in list(self.scheduler_of.items()):
            if scheduler in running:
                continue
            lab, pod = key
            namespace, name = pod.split("/")
            path = f"/api/v1/namespaces/{namespace}/pods/{name}"
            try:
                if self.admin.get(path)["spec"].get("nodeName"):
                    continue  # bound: it stays until its learner leaves
                self.admin.request("DELETE", path)
            except twin.ApiError as error:
                if error.status != 404:
                    raise
                # Gone already: Karpenter evicted it from a node it was bound to (as in leave), not unscheduled.
                del self.scheduler_of[key]
                continue
            self.unscheduled.setdefault((lab, scheduler), []).append(self.pods[key])
            del self.scheduler_of[key]

    def arrive(self, lab: str, learner: str) -> dict[str, str] | None:
        """The learner's pod made; what the API server refused of it, if it did."""
        pod = self._pod(lab, learner)
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        scheduler = pod["spec"].get("schedulerName") or twin.DEFAULT_SCHEDULER
        running = self.schedulers()
        self._withdraw(running)
        if scheduler not in running:
            self.unscheduled.setdefault((lab, scheduler), []).append(learner)
            return None
        try:
            self.admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        except twin.ApiError as error:
            source = f"charts/{HUB_RELEASE}.yaml" if self.hub and lab in self.spawn_page else "outputs.json"
            return {
                "object": f"the learner pod {namespace}/{name} of lab {lab}",
                "source": source,
                "message": error.message,
            }
        self.pods[lab, f"{namespace}/{name}"] = learner
        self.scheduler_of[lab, f"{namespace}/{name}"] = scheduler
        return None

    def respawn(self, moved: list[dict[str, str]]) -> None:
        """The pods a spot interruption moved (the stepper's `moved`) made again for their learners who are still
        there: a learner whose server stopped under them starts it again at once, as the hub lets them.

        Learners moved at one moment start again in the order they first arrived, not in the order of `moved`:
        that is the order in which Karpenter's eviction queue evicted their pods, on at least 100 workers at once
        (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/node/termination/terminator/eviction.go, minReconciles), so
        the wall clock's. kube-scheduler takes pods of one priority in the order they reach its queue (k8s.io/
        kubernetes v1.36.5 pkg/scheduler/framework/plugins/queuesort/priority_sort.go Less, the queue's Timestamp
        set when a pod is added, backend/queue/scheduling_queue.go newQueuedPodInfo), so the first pods made take
        the free slices there are and the others wait for a node: made in eviction order, which learners waited
        differed from run to run (prod at 0.5 warnings per spot node-hour; docs/rehearsal.md, One answer per
        stack)."""
        keys = {(pod["lab"], pod["pod"]) for pod in moved}
        for key in [key for key in self.pods if key in keys]:  # self.pods: in the order first made
            if key in self.scheduler_of:
                refusal = self.arrive(key[0], self.pods[key])
                if refusal is not None:
                    raise twin.Failed(f"remaking the pod a spot interruption moved: {refusal['message']}")

    def not_scheduled(self) -> list[dict[str, Any]]:
        """rehearsal.json's unscheduled: per lab and scheduler name, the learners whose pods were not made or were
        withdrawn for want of that scheduler."""
        return [
            {"lab": lab, "schedulerName": scheduler, "learners": learners}
            for (lab, scheduler), learners in self.unscheduled.items()
        ]

    def leave(self, lab: str, learner: str) -> None:
        """The learner's pod deleted (none, if the API server refused to make it or it was withdrawn). A pod already
        gone was evicted by Karpenter draining its node (the stepper's `disrupted` event says so): the learner's session
        ended then, and there is nothing left to delete."""
        for key in [pod for (of, pod) in self.scheduler_of if of == lab and self.pods[of, pod] == learner]:
            namespace, name = key.split("/")
            try:
                self.admin.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
            except twin.ApiError as error:
                if error.status != 404:
                    raise
            del self.scheduler_of[lab, key]

    def observed(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The stepper's event as class_day reads it: a learner's podBound as `bound` and podReady (its notebook
        running) as `ready`, naming the learner; another pod's (a Job's, say) is none of the class day's. A learner's
        pod disrupted names the learner too."""
        what = {"podBound": "bound", "podReady": "ready"}.get(event["what"])
        if what is None:
            learner = self.pods.get((event["lab"], event.get("pod", "")))
            return event | {"learner": learner} if event["what"] == "disrupted" and learner else event
        learner = self.pods.get((event["lab"], event["pod"]))
        if learner is None:
            return None
        return {"at": event["at"], "what": what, "lab": event["lab"], "learner": learner, "node": event["node"]}


class CronJobRuns:
    """The Jobs the CronJob controller made, each run as rehearsal/cron_jobs.py runs it: rehearsal.json's jobs and
    cronJobs."""

    def __init__(self, plane: twin.ControlPlane, stack: Settings, played: Mapping[str, term.Played]) -> None:
        self.plane, self.stack, self.classes = plane, stack, played
        self.jobs: list[dict[str, Any]] = []
        self.fired: list[dict[str, str]] = []

    def run(self, jobs: list[dict[str, Any]]) -> None:
        for fired in jobs:
            self.jobs.append(cron_jobs.run(self.plane, fired, self.stack.labs, self.classes))
            self.fired.append(cron_jobs.cron_job_entry(fired))

    def played(self, until: datetime.datetime) -> dict[str, Any]:
        """rehearsal.json's jobs, cronJobs and cronJobsMissed (the class runs up to `until` the controller missed)."""
        missed = cron_jobs.missed(self.plane.admin, self.stack.labs, self.classes, self.fired, until)
        return {"jobs": self.jobs, "cronJobs": self.fired, "cronJobsMissed": missed}


def play_cron_jobs(plane: twin.ControlPlane, stack: Settings, played: Mapping[str, term.Played]) -> dict[str, Any]:
    """Without the class day: the CronJob controller's clock moved from one class run to the next (their times from
    rehearsal/cron_jobs.py firings of the `played` classes), and the Jobs it makes run there; what the API server
    refuses and RBAC denies is the same as on the day, in seconds. Returns rehearsal.json's jobs, cronJobs and
    cronJobsMissed."""
    runs = CronJobRuns(plane, stack, played)
    times = sorted({f.at for f in cron_jobs.firings(stack.labs, played)})
    if not times:
        return runs.played(datetime.datetime.min.replace(tzinfo=datetime.UTC))
    reported: set[str] = set()
    with cronjob_controller_process.running(plane, times[0]) as controller:
        for at in times:
            controller.move(at)
            runs.run(cron_jobs.fired_now(plane.admin, reported, at))
    return runs.played(times[-1])


def play_day(
    plane: twin.ControlPlane,
    render_dir: Path,
    stack: Settings,
    day: term.Day,
    region: str,
    schedulers: Callable[[], Collection[str]],
    given: Overrides | None = None,
    spot_rate: float = 0.0,
    spot_prices: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every lab's class day (rehearsal/class_day.py timeline of one `day` of the term, rehearsal/term.py) on one
    Karpenter on the twin's simulated clock, from the day's first step to the last lab's day_end: at each instant, in
    the timeline's order, learners' pods are made and deleted; then the clock runs to the next. The CronJob controller
    runs on the same clock, and each Job it makes is run where the stepper stops for it (CronJobRuns); a warm-up or
    release step of the timeline is the time the class needs it (cron_jobs.missed holds the controller to it). Nodes
    boot and learners' images are pulled as the timing table says, with `given` (the command line's --timing) over each
    lab's timings (rehearsal/timings.py); EC2 warns spot nodes at `spot_rate` per spot node-hour, and spot is priced
    at `spot_prices` where given (rehearsal/spot.py).
    `schedulers` names the schedulers the twin runs (Learners). Returns rehearsal.json's jobs, cronJobs,
    cronJobsMissed, the learner pods refused, labs, karpenter, shortenedTimers, spot, unscheduled, unsettled, stepWall
    and timings."""
    days = class_day.timeline(stack, day)
    steps = sorted(
        (s for lab_steps in days.values() for s in lab_steps),
        key=lambda s: (class_day.moment(s["at"]), class_day.STEP_ORDER.index(s["what"])),
    )
    learners = Learners(plane, render_dir, stack, schedulers)
    runs = CronJobRuns(plane, stack, day.classes)
    refused: list[dict[str, str]] = []
    observed: list[dict[str, Any]] = []
    unsettled: list[dict[str, str]] = []
    # Where the stepper's wall-clock time went, by kind of moment: its steps' kinds ("arrive", "release+arrive"), or
    # "dayEnd" for the run to the day's end.
    walls: dict[str, dict[str, Any]] = {}

    def do(step: dict[str, Any]) -> None:
        if step["what"] == "arrive":
            if refusal := learners.arrive(step["lab"], step["learner"]):
                refused.append(refusal)
        elif step["what"] == "leave":
            learners.leave(step["lab"], step["learner"])

    def record(answer: dict[str, Any], kind: str) -> None:
        observed.extend(e for e in map(learners.observed, answer["events"]) if e is not None)
        if "unsettled" in answer:
            unsettled.append({"at": answer["now"], "waitingFor": answer["unsettled"]})
        wall = walls.get(kind)
        walls[kind] = (
            {"moments": 1, **answer["wall"]}
            if wall is None
            else karpenter_twin.add_walls(wall, answer["wall"] | {"moments": 1})
        )

    if not steps:
        return {"jobs": [], "cronJobs": [], "cronJobsMissed": [], "refused": refused, "labs": {}, "unscheduled": []}
    ends = [class_day.day_end(stack.labs[n], s) for n, s in days.items() if s]
    boot = timings.for_stepper(stack, given)
    start = class_day.moment(steps[0]["at"])
    with (
        cronjob_controller_process.running(plane, start) as controller,
        karpenter_twin.running(
            plane,
            render_dir,
            region,
            start,
            boot=boot,
            cron_jobs=controller.address,
            spot_rate=spot_rate,
            spot_prices=spot_prices,
        ) as karpenter,
    ):
        karpenter.on_jobs, karpenter.on_moved = runs.run, learners.respawn
        for at, group in itertools.groupby(steps, key=lambda s: class_day.moment(s["at"])):
            actions = list(group)

            def act(actions: list[dict[str, Any]] = actions) -> None:
                for step in actions:
                    do(step)

            kind = "+".join(dict.fromkeys(step["what"] for step in actions))
            record(karpenter.at(at, act), kind)
        record(karpenter.advance(max(ends)), "dayEnd")
        version, timers, stepper_spot = karpenter.version, karpenter.timers, karpenter.spot
    labs = {
        n: class_day.lab_section(n, stack.labs[n], s, observed, stack.labs[n].least_warmup_seconds(n, given))
        for n, s in days.items()
        if s
    }
    return {
        **runs.played(max(ends)),
        "refused": refused,
        "karpenter": version,
        "labs": labs,
        "shortenedTimers": timers,
        "spot": spot.section(stack, stepper_spot, labs),
        "unscheduled": learners.not_scheduled(),
        "substitutions": [HOME_VOLUMES] if learners.left_out_claims else [],
        "unsettled": unsettled,
        "stepWall": {kind: karpenter_twin.rounded_walls(wall) for kind, wall in sorted(walls.items())},
        **timings.for_report(stack, given),
    }


def rehearse(
    render_dir: Path,
    stack: Settings,
    today: datetime.date,
    region: str,
    day: bool = True,
    given: Overrides | None = None,
    spot_rate: float = 0.0,
    every_day: bool = False,
    spot_prices: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Plays the render of a stack with these settings and returns rehearsal.json's content: each day of the term
    rehearsal/term.py chooses (every class day with `every_day`; classes that repeat all year over the year from
    `today`) on a fresh twin of its own, Karpenter's instance types and prices those of `region`, nodes' boots and
    image pulls as the timing table says with `given` over the labs' timings (the command line's --timing), spot nodes
    warned at `spot_rate` per spot node-hour (the command line's --spot-interruptions-per-node-hour) and priced at
    `spot_prices` (its --prices; else at on-demand); what the days
    say together (term.together). With `day` false, one twin runs each class's CronJobs at its first occurrence, one
    after the other, and no class day is played (no `labs`): what the API server refuses and RBAC denies is the same,
    in seconds, not minutes."""
    started = time.monotonic()
    if not day:
        first = term.first_classes(stack, today)
        with Progress("rehearsal: the class CronJobs on the twin"):
            played = on_twin(render_dir, stack, lambda plane, _: {**play_cron_jobs(plane, stack, first), "refused": []})
        return {**played, "wallSeconds": round(time.monotonic() - started, 1)}
    days = term.days(stack, today, every_day)
    answers = []
    # A stack without labs has no day: the render is applied and nothing played.
    for number, one in enumerate(days or [term.Day(today, (), {}, False)], start=1):
        # The longest part (27 s of silence for staging at a load of 27, issue 50): a line redrawn on a terminal.
        with Progress(f"rehearsal: day {number} of {len(days)} of the term ({one.date}) on a twin"):
            answers.append(
                on_twin(render_dir, stack, _day_player(render_dir, stack, one, region, given, spot_rate, spot_prices))
            )
    return {**term.together(days, answers), "wallSeconds": round(time.monotonic() - started, 1)}


Player = Callable[[twin.ControlPlane, Callable[[], list[str]]], dict[str, Any]]


def _day_player(
    render_dir: Path,
    stack: Settings,
    day: term.Day,
    region: str,
    given: Overrides | None,
    spot_rate: float,
    spot_prices: dict[str, Any] | None,
) -> Player:
    """What on_twin plays for one day of the term: play_day."""

    def play(plane: twin.ControlPlane, schedulers: Callable[[], list[str]]) -> dict[str, Any]:
        return play_day(plane, render_dir, stack, day, region, schedulers, given, spot_rate, spot_prices)

    return play


def on_twin(
    render_dir: Path,
    stack: Settings,
    play: Player,
) -> dict[str, Any]:
    """A fresh twin with the render applied, the system nodes registered, the hub's learner pods created in dry-run
    and its user-scheduler started; `play` then plays there (given the twin and the schedulers it runs). Returns
    rehearsal.json's content of that twin, without wallSeconds."""
    with twin.running(stack.cluster.kubernetes_version) as plane, contextlib.ExitStack() as hub:
        _, refused = apply.apply_render(plane.admin, render_dir)
        system_nodes.register(plane, render_dir)
        denied: list[dict[str, str]] = []
        scheduler: user_scheduler_process.UserScheduler | None = None
        if stack.jupyterhub is not None:
            learners_refused, denied = hub_learners(plane, render_dir, stack.jupyterhub)
            refused += learners_refused
            scheduler = hub.enter_context(start_user_scheduler(plane, render_dir, stack.jupyterhub))

        def schedulers() -> list[str]:
            return [twin.DEFAULT_SCHEDULER, *(scheduler.running() if scheduler else [])]

        played = play(plane, schedulers)
        plane.check_running()
        jobs = played.pop("jobs")
        return {
            "kubernetes": plane.version,
            "refused": refused + played.pop("refused"),
            "jobs": jobs,
            "rbacDenied": denied + cron_jobs.denied(jobs) + (scheduler.denied() if scheduler else []),
            "jobsFailed": cron_jobs.failed(jobs),
            "userScheduler": scheduler.record() if scheduler else None,
            "substitutions": (scheduler.substitutions() if scheduler and not scheduler.problem else [])
            + [system_nodes.SUBSTITUTION]
            + played.pop("substitutions", []),
            **played,
        }


def problems(rehearsal: dict[str, Any]) -> list[str]:
    """One line per finding that fails the rehearsal; each class day's too, where it was played
    (rehearsal/report.py)."""
    return [
        *(f"rehearsal: refused {r['object']} ({r['source']}): {r['message']}" for r in rehearsal["refused"]),
        *(
            f"rehearsal: RBAC denied {r['what']} ({r['serviceAccount']}): {r['message']}"
            for r in rehearsal["rbacDenied"]
        ),
        *(
            f"rehearsal: Job {r['job']}: {r['output']}"
            if r["exitCode"] is None
            else f"rehearsal: Job {r['job']} exited {r['exitCode']}, the buffer at {r.get('bufferReplicas')} replicas "
            f"(the class needs {r.get('wantReplicas')}): {r['output']}"
            for r in rehearsal["jobsFailed"]
        ),
        *(
            f"rehearsal: CronJob {m['namespace']}/{m['name']} made its Jobs at {', '.join(m['firedAt']) or 'no time'} "
            f"where its class needs them at {', '.join(m['want'])} (by Kubernetes' CronJob controller on the "
            f"rehearsal's clock): {m['why']}"
            for m in rehearsal.get("cronJobsMissed", [])
        ),
        *(
            f"rehearsal: the user-scheduler {s['deployment']} ({s['source']}; kube-scheduler {s['version']} with "
            f"{s['config']}) did not run: {s['problem']}"
            for s in [rehearsal.get("userScheduler") or {}]
            if s.get("problem")
        ),
        *(
            f"rehearsal: {len(u['learners'])} learner pod(s) of lab {u['lab']} name the scheduler "
            f"{u['schedulerName']}, which the twin does not run (or no longer did): not made, never bound"
            for u in rehearsal.get("unscheduled", [])
        ),
        *(
            f"rehearsal: at {u['at']} the controllers had not settled within the stepper's limit ({u['waitingFor']}): "
            "the class day is not one answer from there on (its figures could differ from run to run)"
            for u in rehearsal.get("unsettled", [])
        ),
        # Every day played, each line naming its class by its start.
        *(line for day in rehearsal.get("days", []) for line in report.problems(day["labs"])),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.rehearse", description=__doc__.splitlines()[0])
    render.run.add_stack_argument(parser)
    parser.add_argument("--out", required=True, type=Path, help="directory to write the render and rehearsal.json into")
    parser.add_argument(
        "--all-days",
        action="store_true",
        help="play every class day of each term (a class without a term: of the year from today), not only the days "
        "that may play differently (docs/rehearsal.md, The whole term)",
    )
    parser.add_argument(
        timings.FLAG,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a timing of every lab instead of its timings and gpulab's table (docs/rehearsal.md, What the clock "
        "models), e.g. learnerImageGb=6 or devicePlugin=90s; repeat for several",
    )
    parser.add_argument(
        spot.FLAG,
        metavar="RATE",
        help="EC2's spot interruption warnings per hour a spot node runs, read by Karpenter's interruption controller; "
        "0 (none) unless set (docs/rehearsal.md, Spot interruptions)",
    )
    parser.add_argument(
        spot.PRICES_FLAG,
        type=Path,
        metavar="FILE",
        help="a preview's stack outputs (`pulumi stack output --json`) or the cost file a preview writes where "
        f"{preview_cost.ENV} says: spot nodes are priced at the spot prices it records (labs.<lab>.cost.spot), in "
        "Karpenter's offerings and the day's cost; else at on-demand (docs/rehearsal.md, Spot interruptions)",
    )
    args = parser.parse_args(argv)
    try:
        given = timings.command_line(args.timing)
        spot_rate = spot.rate(args.spot_interruptions_per_node_hour)
    except (timings.BadTiming, spot.BadRate) as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 2
    program.collect_rarely()
    (args.out / REHEARSAL).unlink(missing_ok=True)
    (args.out / day_chart.SVG_NAME).unlink(missing_ok=True)
    try:
        run = stack_run(args.stack)
        spot_prices = None if args.prices is None else spot.prices(args.prices, run.stack.settings, run.stack.region)
        # Before the render, which takes seconds: a stack without a twin says so at once.
        twins.build(run.stack.settings.cluster.kubernetes_version)
        render_stack(run, args.out / RENDER)
        today = utc.today()
        rehearsal = rehearse(
            args.out / RENDER,
            run.stack.settings,
            today,
            run.stack.region,
            given=given,
            spot_rate=spot_rate,
            every_day=args.all_days,
            spot_prices=spot_prices,
        )
    except domain.stack.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    except pulumi.RunError as error:
        print(error, file=sys.stderr)
        return 2
    except spot.BadPrices as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 2
    except charts.TemplateError as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 1
    except twins.NoTwin as error:
        print(error, file=sys.stderr)
        return 2
    except (
        twins.NotBuilt,
        twins.Failed,
        Unavailable,
        twin.Failed,
        plan.Unavailable,
        karpenter_twin.Failed,
        cronjob_controller_process.Failed,
        user_scheduler_process.Unusable,
    ) as why:
        print(f"rehearsal not run: {why}", file=sys.stderr)
        return 1
    (args.out / REHEARSAL).write_text(json.dumps(rehearsal, indent=2) + "\n")
    day_chart.write_svg(rehearsal, args.out)
    found = problems(rehearsal)
    print("\n".join(report.table(rehearsal)))
    if (scheduler := rehearsal.get("userScheduler")) and not scheduler["problem"]:
        print(
            f"the hub's learners were scheduled by its user-scheduler ({', '.join(scheduler['schedulerNames'])}: "
            f"kube-scheduler {scheduler['version']} with its {scheduler['config']}, as {scheduler['serviceAccount']}), "
            f"which bound {scheduler['bound']} pod(s)"
        )
    for line in found:
        print(line, file=sys.stderr)
    print(
        f"rehearsal of {args.stack} on Kubernetes {rehearsal['kubernetes']}: {len(found)} problem(s), "
        f"{rehearsal['wallSeconds']} s; {args.out / REHEARSAL}"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
