"""Pure builder of what the hub's pages tell a learner about their files and why their server stopped: JupyterHub 5.5's
home.html and not_running.html (share/jupyterhub/templates), each extended with gpulab's notices, mounted in the hub's
pod (zero-to-jupyterhub 4.4.0: hub.extraFiles and hub.templatePaths, files/hub/jupyterhub_config.py).

Every sentence is true of the stack it is rendered for: where learners' files live (gpulab:jupyterhub.homes), what
stops a server without the learner asking (the hub's idle culler, its maxAge, a lab's gpuIdleTimeout), and, for a
learner the idle-GPU culler stopped (components/jupyterhub/gpu_culler.py puts them in GPU_IDLE_GROUP), why.
"""

from collections.abc import Mapping
from html import escape
from typing import Any

from domain.stack.jupyterhub import JupyterHub
from domain.stack.model import Lab

FILES = "/usr/local/etc/gpulab"
TEMPLATES = f"{FILES}/templates"
# The JupyterHub group of learners the idle-GPU culler stopped (components/jupyterhub/culling.py gives it the group).
GPU_IDLE_GROUP = "gpulab-gpu-idle"
# Where a learner's volume is mounted: z2jh 4.4.0 singleuser.storage.homeMountPath's default (values.yaml), which gpulab
# keeps; the Jupyter Docker Stacks images' home (their NB_USER is jovyan).
HOME = "/home/jovyan"


def _stops(hub: JupyterHub, labs: Mapping[str, Lab]) -> list[str]:
    """What stops a learner's server without them asking, in a learner's words."""
    stops = []
    if hub.culling.enabled:
        stops.append(f"after {hub.culling.idle_timeout} without activity")
        if hub.culling.max_age:
            stops.append(f"{hub.culling.max_age} after it started, active or not")
    if any(lab.gpu_idle_timeout for lab in labs.values()):
        stops.append("when its GPU stays idle as long as its lab allows")
    if any(
        lab.on_spawn_page and lab.disruption.consolidation_policy == "WhenEmptyOrUnderutilized" for lab in labs.values()
    ):
        stops.append("when its lab moves it to pack its GPU nodes tighter")
    return stops


def files_notice(hub: JupyterHub, labs: Mapping[str, Lab]) -> str:
    """What happens to a learner's files when their server stops, whoever stops it, and what stops it."""
    stops = _stops(hub, labs)
    if hub.homes == "perLearner":
        # KubeSpawner 7.0.0 mounts the claim claim-<user> there and keeps it when the server stops; only deleting the
        # user deletes it (delete_forever), which gpulab's culling never does (cull.users: false, values.py).
        kept = (
            f"When your server stops, the files you saved in your home folder ({HOME}) are kept on a volume of your "
            "own and are there when you start again; changes you had not saved, and files anywhere else, are gone."
        )
    else:
        # A stack that stops servers itself with homes: none is refused (domain/stack/jupyterhub.py), so here nothing
        # but the learner (or an admin) stops one.
        assert not stops, stops
        kept = (
            "This hub keeps no files when a server stops: everything in your server goes with it. Download what you "
            "want to keep before you stop it."
        )
    # Not "never stops a server": a node's expiry and drift replace it whatever runs on it.
    when = f" This hub stops a server {', and '.join(stops)}." if stops else " This hub does not stop idle servers."
    return kept + when


def gpu_idle_notice() -> str:
    """The idle-GPU culler's notice to the learner it stopped. Only a stack with homes: perLearner culls idle GPUs
    (domain/stack/jupyterhub.py refuses a gpuIdleTimeout with homes: none), so their home folder is kept."""
    return (
        "Your server was stopped because its GPU stayed idle longer than your lab allows, so that another learner "
        f"could use it. The files you saved in your home folder ({HOME}) are kept; changes you had not saved, and "
        "files anywhere else, are gone. Start your server again when you need the GPU."
    )


def pages(hub: JupyterHub, labs: Mapping[str, Lab]) -> dict[str, str]:
    """home.html and not_running.html, each extending JupyterHub's own: the files notice to everyone, and the GPU idle
    notice to the learners the idle-GPU culler stopped (when a lab has a gpuIdleTimeout)."""
    notices = (
        '<div class="container"><div class="alert alert-info" role="status" id="gpulab-files">'
        f"{escape(files_notice(hub, labs))}</div></div>\n"
    )
    if any(lab.gpu_idle_timeout for lab in labs.values()):
        notices = (
            '{% if user and user.groups | selectattr("name", "equalto", "' + GPU_IDLE_GROUP + '") | list %}\n'
            '<div class="container"><div class="alert alert-info" role="status" id="gpulab-gpu-idle">'
            f"{escape(gpu_idle_notice())}</div></div>\n"
            "{% endif %}\n"
        ) + notices
    return {
        page: '{% extends "templates/'
        + page
        + '" %}\n{% block main %}\n'
        + notices
        + "{{ super() }}\n{% endblock main %}\n"
        for page in ("home.html", "not_running.html")
    }


def hub_values(hub: JupyterHub, labs: Mapping[str, Lab]) -> dict[str, Any]:
    """The chart's `hub` values that put the pages in the hub's pod and on its template path."""
    return {
        "extraFiles": {
            f"gpulab-{page.removesuffix('.html').replace('_', '-')}": {
                "mountPath": f"{TEMPLATES}/{page}",
                "stringData": text,
            }
            for page, text in pages(hub, labs).items()
        },
        "templatePaths": [TEMPLATES],
    }
