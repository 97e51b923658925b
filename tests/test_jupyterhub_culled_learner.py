"""A learner the hub's idle culler stops, through a real JupyterHub 5.5 (tests/test_gpu_culler.py's Hub, with the
pages the stack renders): jupyterhub-idle-culler 1.4.0, the one zero-to-jupyterhub 4.4.0's hub image runs, started
with the command and given the role the chart renders for the first hub stack that culls, stops the learner's idle
server and never deletes the learner; the learner's page then says what happened to their files, in the words of
components/jupyterhub/notices.py: kept, as a stack that culls keeps a volume per learner (KubeSpawner deletes it only
with the user). A stack that stops servers and keeps no files is refused before it renders
(tests/test_jupyterhub_work_kept.py)."""

import os
import subprocess
import sys

from components.jupyterhub import notices
from domain.time import durations
from tests.support.hub_config import stack_hub_config
from tests.support.rendered import HUB_STACKS, rendered
from tests.test_gpu_culler import Hub, notice

CULLER = "jupyterhub-idle-culler"  # the chart's name for its service and role (files/hub/jupyterhub_config.py)
TOKEN = "idle-culler-" + "2" * 32


def _culler_command(stack: str, api: str) -> list[str]:
    """The culler's command as the chart renders it for the stack, run here against `api`, with a timeout of a second
    (and a round every second) for the stack's, so that the test need not wait that long."""
    (service,) = [s for s in stack_hub_config(stack).JupyterHub.services if s["name"] == CULLER]
    flags = dict(flag.removeprefix("--").partition("=")[::2] for flag in service["command"][3:])
    assert service["command"][:3] == ["python3", "-m", "jupyterhub_idle_culler"]
    idle_timeout = rendered(stack).run.stack.settings.jupyterhub.culling.idle_timeout
    assert int(flags["timeout"]) == durations.seconds(idle_timeout)
    flags |= {"url": api, "timeout": "1", "cull-every": "1"}
    return [
        sys.executable,
        "-m",
        "jupyterhub_idle_culler",
        *(f"--{k}={v}" if v else f"--{k}" for k, v in flags.items()),
    ]


def test_a_culled_learner_reads_that_their_saved_files_are_kept(tmp_path):
    stack = next(s for s in HUB_STACKS if rendered(s).run.stack.settings.jupyterhub.culling.enabled)
    (role,) = [r for r in stack_hub_config(stack).JupyterHub.load_roles if r["name"] == CULLER]
    hub = Hub(tmp_path / "hub", stack, services=({"name": CULLER, "api_token": TOKEN},), roles=(role,))
    log = (tmp_path / "culler.log").open("w")
    culler = None
    try:
        hub.call("POST", "/users/ada", {})
        hub.start("ada")
        culler = subprocess.Popen(
            _culler_command(stack, hub.api),
            env={**os.environ, "JUPYTERHUB_API_TOKEN": TOKEN},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        hub.wait(lambda: "" not in hub.servers("ada"), "the idle culler to stop ada's server", seconds=120)
        assert "Culling server ada (inactive for" in (tmp_path / "culler.log").read_text()
        # It stopped her server and kept her: her volume, claim-ada, goes only with her (KubeSpawner delete_forever).
        assert (hub.call("GET", "/users/ada") or {}).get("name") == "ada", "the culler deleted ada"

        settings = rendered(stack).run.stack.settings
        assert settings.jupyterhub.homes == "perLearner"
        page = hub.page("ada", "/user/ada/")
        assert notice(page, "gpulab-files") == notices.files_notice(settings.jupyterhub, settings.labs)
        assert notice(page, "gpulab-files").startswith(
            "When your server stops, the files you saved in your home folder (/home/jovyan) are kept on a volume of "
            "your own and are there when you start again; changes you had not saved, and files anywhere else, are "
            f"gone. This hub stops a server after {settings.jupyterhub.culling.idle_timeout} without activity"
        )
        # The idle-GPU culler did not stop her, so its notice is not hers.
        assert notice(page, "gpulab-gpu-idle") is None
    finally:
        if culler is not None:
            culler.terminate()
            culler.wait(timeout=10)
        log.close()
        hub.close()
