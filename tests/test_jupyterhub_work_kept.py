"""Work is never lost by the program's own choice: a stack whose hub stops servers itself (the idle culler, on by
default; its maxAge; a lab's gpuIdleTimeout) keeps learners' files on volumes of their own, or is refused with the keys
that stop servers and the ways out; the culler never deletes users (whose home volumes KubeSpawner would delete with
them); and what the hub's pages say about files is true of each case."""

import copy

import pytest
import yaml

import render.run
from components.jupyterhub import notices
from domain.stack import Lab
from domain.stack.jupyterhub import JupyterHub
from tests.conftest import run_values
from tests.support.hub_config import stack_hub_config
from tests.support.rendered import HUB_STACKS, rendered
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab
from tests.test_jupyterhub_config import hub_stack, load, problems, with_secret

NONE = {**HUB, "homes": "none"}
WAYS_OUT = (
    "each such stop would delete the learner's files. Set homes: perLearner (a volume per learner, kept when the "
    "server stops), or stop no server by the stack's choice (culling: {enabled: false}, no maxAge, no lab's "
    "gpuIdleTimeout, consolidationPolicy WhenEmpty)"
)
LOSES_WORK = (
    "gpulab:jupyterhub.homes: none keeps a learner's files only while their server runs, and this stack stops "
    "servers itself: "
)


def _metered(hub: dict, **lab_keys) -> dict:
    values = hub_stack(hub, intro=lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE, **lab_keys))
    return {**values, "gpulab:metrics": {}}


def test_a_stack_file_stopping_servers_every_way_without_homes_is_refused(tmp_path, capsys):
    # The idle culler after 30m, every server stopped at 8h and a lab's idle GPUs culled after 30m, as staging does:
    # with homes: none each of them would delete a learner's files, and the render writes nothing.
    values = _metered({**NONE, "culling": {"idleTimeout": "30m", "maxAge": "8h"}}, gpuIdleTimeout="30m")
    stack = tmp_path / "Pulumi.culling.yaml"
    # The client secret as `pulumi config set --secret` writes it into a stack file.
    secret = {"gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="}}
    stack.write_text(yaml.safe_dump({"config": {**values, **secret}}))
    assert render.run.main([str(stack), "--out", str(tmp_path / "out"), "--no-charts"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        LOSES_WORK + "gpulab:jupyterhub.culling (idleTimeout 30m; on unless enabled: false), "
        "gpulab:jupyterhub.culling.maxAge 8h, gpulab:labs.intro.gpuIdleTimeout 30m; " + WAYS_OUT
    ]
    assert not (tmp_path / "out").exists()


STOPPING = {
    "the idle culler, on by default": (
        hub_stack(NONE),
        "gpulab:jupyterhub.culling (idleTimeout 1h; on unless enabled: false)",
    ),
    "the idle culler and a maximum age": (
        hub_stack({**NONE, "culling": {"idleTimeout": "45m", "maxAge": "4h"}}),
        "gpulab:jupyterhub.culling (idleTimeout 45m; on unless enabled: false), gpulab:jupyterhub.culling.maxAge 4h",
    ),
    "consolidation that moves running learners": (
        hub_stack(
            {**NONE, "culling": {"enabled": False}},
            intro=lab(
                ["g4dn.xlarge"],
                3,
                notebookImage=NOTEBOOK_IMAGE,
                disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized"},
            ),
        ),
        "gpulab:labs.intro.disruption.consolidationPolicy WhenEmptyOrUnderutilized",
    ),
    "a lab's idle-GPU culler alone": (
        _metered({**NONE, "culling": {"enabled": False}}, gpuIdleTimeout="30m"),
        "gpulab:labs.intro.gpuIdleTimeout 30m",
    ),
}


@pytest.mark.parametrize(("values", "stoppers"), STOPPING.values(), ids=STOPPING.keys())
def test_homes_none_is_refused_while_the_stack_stops_servers(values, stoppers):
    assert problems(with_secret(values)) == [f"{LOSES_WORK}{stoppers}; {WAYS_OUT}"]


def test_homes_none_loads_when_only_learners_stop_servers():
    stack = load(with_secret(hub_stack({**NONE, "culling": {"enabled": False}})))
    assert stack.settings.jupyterhub.homes == "none"
    assert not stack.settings.jupyterhub.culling.enabled


def test_every_way_of_stopping_servers_loads_with_home_volumes():
    hub = {**HUB, "culling": {"idleTimeout": "30m", "maxAge": "8h"}}
    stack = load(with_secret(_metered(hub, gpuIdleTimeout="30m")))
    assert stack.settings.jupyterhub.homes == "perLearner"


def test_a_maximum_age_needs_the_culler_it_belongs_to():
    values = hub_stack({**NONE, "culling": {"enabled": False, "maxAge": "8h"}})
    assert problems(with_secret(values)) == [
        "gpulab:jupyterhub.culling.maxAge: is an option of culling: it needs culling.enabled: true, or remove it"
    ]


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_culler_stops_servers_and_never_deletes_users(stack):
    # KubeSpawner 7.0.0 deletes a user's claim-<user> with the user (delete_pvc): --cull-users would delete homes.
    services = {s["name"]: s for s in stack_hub_config(stack).JupyterHub.services}
    command = services["jupyterhub-idle-culler"]["command"]
    assert command[:3] == ["python3", "-m", "jupyterhub_idle_culler"]
    assert not [flag for flag in command if flag.startswith(("--cull-users", "--remove-named-servers"))], command
    roles = {r["name"]: r for r in stack_hub_config(stack).JupyterHub.load_roles}
    assert "admin:users" not in roles["jupyterhub-idle-culler"]["scopes"]


def test_a_hub_that_culls_nothing_runs_no_culler():
    values = hub_stack({**NONE, "culling": {"enabled": False}})
    values["gpulab:jupyterhubClientSecret"] = {"secure": "v1:c3RhbmQtaW4="}  # a Pulumi secret, as the stack file has it
    release = run_values(values).one("kubernetes:helm.sh/v3:Release", "jupyterhub").inputs["values"]
    assert release["cull"] == {"enabled": False}
    assert release["singleuser"]["storage"] == {"type": "none"}


# --- what the hub's pages say ---------------------------------------------------------------------------------------


def _hub(**changes) -> JupyterHub:
    return JupyterHub.model_validate({**copy.deepcopy(HUB), **changes})


def _labs(**lab_keys) -> dict[str, Lab]:
    return {"intro": Lab.model_validate(lab(["g4dn.xlarge"], 3, **lab_keys))}


def test_home_volumes_notice_says_saved_files_stay():
    text = notices.files_notice(_hub(culling={"idleTimeout": "30m", "maxAge": "8h"}), _labs(gpuIdleTimeout="30m"))
    assert text == (
        "When your server stops, the files you saved in your home folder (/home/jovyan) are kept on a volume of your "
        "own and are there when you start again; changes you had not saved, and files anywhere else, are gone. This "
        "hub stops a server after 30m without activity, and 8h after it started, active or not, and when its GPU "
        "stays idle as long as its lab allows."
    )


def test_with_home_volumes_and_no_culling_the_notice_says_so():
    text = notices.files_notice(_hub(culling={"enabled": False}), _labs())
    assert text.endswith("files anywhere else, are gone. This hub does not stop idle servers.")


def test_without_home_volumes_the_notice_says_nothing_is_kept():
    text = notices.files_notice(_hub(homes="none", culling={"enabled": False}), _labs())
    assert text == (
        "This hub keeps no files when a server stops: everything in your server goes with it. Download what you want "
        "to keep before you stop it. This hub does not stop idle servers."
    )


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_hub_page_tells_its_learners_about_their_files(stack):
    settings = rendered(stack).run.stack.settings
    hub = rendered(stack).release("jupyterhub").values["hub"]
    pages = {f["mountPath"]: f["stringData"] for f in hub["extraFiles"].values()}
    assert hub["templatePaths"] == [notices.TEMPLATES]
    for page in ("home.html", "not_running.html"):
        text = pages[f"{notices.TEMPLATES}/{page}"]
        assert text.startswith(f'{{% extends "templates/{page}" %}}')
        assert notices.files_notice(settings.jupyterhub, settings.labs) in text
        assert ('id="gpulab-gpu-idle"' in text) == any(lab.gpu_idle_timeout for lab in settings.labs.values())
