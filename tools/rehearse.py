"""The class rehearsal: a stack's render played on a twin of its cluster, a real Kubernetes control plane built from
the pinned modules (tools/twin.py, `make twin`).

    python -m tools.rehearse <stack name or stack file> --out <dir>

Renders the stack into <dir>/render (as tools/render.py, charts included), starts the twin, applies the render as
`pulumi up` would (tools/apply.py) and writes <dir>/rehearsal.json. Every object the API server refuses (its schema,
CEL rules, admission including Pod Security, on the objects and on the pods their workloads make) fails the
rehearsal with the server's own message: one `rehearsal: refused ...` line each, exit status 1. A stack file with
problems exits with status 2 and its `gpulab:` lines, as the render does; a twin not built, with status 1 and one line
saying how to build it. docs/rehearsal.md says how to read rehearsal.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

try:
    import pulumi
    import yaml

    import config
    import program
    from components.jupyterhub.hub import RELEASE as HUB_RELEASE
    from config.jupyterhub import JupyterHub
    from config.model import Settings
    from tools import apply, charts, cron_jobs, harness, hub_pods, rehearsal_report, render, twin
except ModuleNotFoundError as missing:  # an interpreter without the project's requirements
    sys.exit(f"gpulab: {missing.name} is not installed for {sys.executable}; run `make rehearse`")

REHEARSAL = rehearsal_report.REHEARSAL
RENDER = "render"


class Unavailable(Exception):
    """The rehearsal cannot run here (the twin not built, the charts not rendered): one line says why."""


def render_stack(stack: str, out: Path) -> harness.Run:
    """The stack rendered into `out` with its charts; raises config.ConfigError or pulumi.RunError for bad input."""
    render.clean(out)
    name, path = render.stack_file(stack)
    run = harness.run(name, render.read_stack_file(path))
    render.write(run, out)
    if not_rendered := charts.write(run, out):
        raise Unavailable("the rehearsal applies the charts, which are not rendered: " + "; ".join(not_rendered))
    return run


def hub_learners(
    plane: twin.ControlPlane, render_dir: Path, hub: JupyterHub
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Each profile's learner pod as the hub's KubeSpawner builds it, created in dry-run as the hub's own service
    account (the hub Deployment's): the pod's admission and the hub's permission to make it. Returns what was
    refused and what RBAC denied."""
    objects = [o for o in yaml.safe_load_all((render_dir / "charts" / f"{HUB_RELEASE}.yaml").read_text()) if o]
    config = hub_pods.hub_config(objects, hub.namespace)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "hub"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    identity = plane.service_account(hub.namespace, account)
    refused: list[dict[str, str]] = []
    denied: list[dict[str, str]] = []
    for profile in config.KubeSpawner.profile_list:
        what = f"the learner pod of profile {profile['slug']}"
        pod = hub_pods.learner_pod(config, profile["slug"])
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


def rehearse(render_dir: Path, stack: Settings, today: datetime.date) -> dict[str, Any]:
    """Plays the render of a stack with these settings on a fresh twin and returns rehearsal.json's content; the
    classes that repeat all year are played from their first day at or after `today`."""
    started = time.monotonic()
    with twin.running() as plane:
        _, refused = apply.apply_render(plane.admin, render_dir)
        denied: list[dict[str, str]] = []
        if stack.jupyterhub is not None:
            learners_refused, denied = hub_learners(plane, render_dir, stack.jupyterhub)
            refused += learners_refused
        jobs = cron_jobs.run_all(plane, stack.labs, today)
        plane.check_running()
        return {
            "kubernetes": plane.version,
            "refused": refused,
            "jobs": jobs,
            "rbacDenied": denied + cron_jobs.denied(jobs),
            "jobsFailed": cron_jobs.failed(jobs),
            "wallSeconds": round(time.monotonic() - started, 1),
        }


def problems(rehearsal: dict[str, Any]) -> list[str]:
    """One line per finding that fails the rehearsal; the class day's too, where it was played
    (tools/rehearsal_report.py)."""
    return [
        *(f"rehearsal: refused {r['object']} ({r['source']}): {r['message']}" for r in rehearsal["refused"]),
        *(
            f"rehearsal: RBAC denied {r['what']} ({r['serviceAccount']}): {r['message']}"
            for r in rehearsal["rbacDenied"]
        ),
        *(
            f"rehearsal: Job {r['job']} exited {r['exitCode']}, the buffer at {r.get('bufferReplicas')} replicas "
            f"(the class needs {r.get('wantReplicas')}): {r['output']}"
            for r in rehearsal["jobsFailed"]
        ),
        *rehearsal_report.problems(rehearsal.get("labs", {})),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.rehearse", description=__doc__.splitlines()[0])
    parser.add_argument("stack", help="stack name (Pulumi.<stack>.yaml beside Pulumi.yaml) or path of a stack file")
    parser.add_argument("--out", required=True, type=Path, help="directory to write the render and rehearsal.json into")
    args = parser.parse_args(argv)
    program.collect_rarely()
    (args.out / REHEARSAL).unlink(missing_ok=True)
    try:
        twin.require_built()
        run = render_stack(args.stack, args.out / RENDER)
        today = datetime.datetime.now(datetime.UTC).date()
        rehearsal = rehearse(args.out / RENDER, run.stack.settings, today)
    except config.ConfigError as error:
        print("\n".join(error.lines), file=sys.stderr)
        return 2
    except pulumi.RunError as error:
        print(error, file=sys.stderr)
        return 2
    except charts.TemplateError as error:
        print(f"gpulab: {error}", file=sys.stderr)
        return 1
    except (twin.NotBuilt, Unavailable, twin.Failed) as why:
        print(f"rehearsal not run: {why}", file=sys.stderr)
        return 1
    (args.out / REHEARSAL).write_text(json.dumps(rehearsal, indent=2) + "\n")
    found = problems(rehearsal)
    print("\n".join(rehearsal_report.table(rehearsal)))
    for line in found:
        print(line, file=sys.stderr)
    print(
        f"rehearsal of {args.stack} on Kubernetes {rehearsal['kubernetes']}: {len(found)} problem(s), "
        f"{rehearsal['wallSeconds']} s; {args.out / REHEARSAL}"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
