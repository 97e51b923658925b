"""Pure builder of the hub values that run gpulab's idle-GPU culler (components/jupyterhub/gpu_culler.py) in the hub's
pod, for the labs with a gpuIdleTimeout: the service and its role, its source file, and the SigV4 proxy beside the
hub through which it queries the metrics workspace (zero-to-jupyterhub 4.4.0: hub.services, hub.loadRoles,
hub.extraFiles and hub.extraContainers, files/hub/jupyterhub_config.py). The notice the learners it stopped read is
components/jupyterhub/notices.py's.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.jupyterhub import spending
from components.jupyterhub.notices import FILES, GPU_IDLE_GROUP
from components.security import unprivileged
from domain.stack.budgets import LabBudget
from domain.stack.metrics import Metrics
from domain.stack.model import Lab
from domain.upstream.versions import AWS_SIGV4_PROXY_IMAGE

SERVICE = "gpu-culler"
# The learners it stopped, whom the hub's pages tell why (components/jupyterhub/notices.py).
GROUP = GPU_IDLE_GROUP
# The hub's API from inside its pod, as the chart's own idle culler reaches it (jupyterhub_config.py, cull_cmd).
HUB_API = "http://localhost:8081/hub/api"
PROXY_PORT = 8005
CULLER_SOURCE = Path(__file__).with_name("gpu_culler.py")
# What the culler does and no more (JupyterHub 5.5 scopes, jupyterhub/scopes.py): read learners' servers, stop them,
# and manage its one group of learners told why.
SCOPES = [
    "read:users:name",
    "read:servers",
    "delete:servers",
    f"read:groups!group={GROUP}",
    f"groups!group={GROUP}",
    f"admin:groups!group={GROUP}",
]


def culled_labs(labs: Mapping[str, Lab]) -> dict[str, Lab]:
    return {name: lab for name, lab in labs.items() if lab.gpu_idle_timeout}


def metrics_url(workspace_id: str) -> str:
    """The workspace's Prometheus API from inside the hub's pod, through its SigV4 proxy."""
    return f"http://127.0.0.1:{PROXY_PORT}/workspaces/{workspace_id}"


def command(labs: Mapping[str, Lab], metrics: Metrics, workspace_id: str) -> list[str]:
    culled = [
        f"--lab={name}={metrics.idle_utilisation_percent}/{lab.gpu_idle_timeout}"
        for name, lab in culled_labs(labs).items()
    ]
    return [
        "python3",
        f"{FILES}/gpu_culler.py",
        f"--hub-url={HUB_API}",
        f"--metrics-url={metrics_url(workspace_id)}",
        f"--group={GROUP}",
        *culled,
    ]


def sigv4_proxy(region: str) -> dict[str, Any]:
    """awslabs/aws-sigv4-proxy beside the hub: signs the culler's queries with the pod's IAM role (EKS Pod Identity)
    and sends them to the workspace's endpoint (cmd/aws-sigv4-proxy/main.go at v1.11.1: --name, --region, --host,
    --port)."""
    return {
        "name": "sigv4-proxy",
        "image": AWS_SIGV4_PROXY_IMAGE,
        "args": [
            "--name=aps",
            f"--region={region}",
            f"--host=aps-workspaces.{region}.amazonaws.com",
            f"--port=127.0.0.1:{PROXY_PORT}",
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": unprivileged(),
    }


def hub_values(labs: Mapping[str, Lab], metrics: Metrics, workspace_id: str) -> dict[str, Any]:
    """The chart's `hub` values that run the culler (its proxy: `querying`)."""
    return {
        "services": {SERVICE: {"command": command(labs, metrics, workspace_id)}},
        "loadRoles": {SERVICE: {"scopes": SCOPES, "services": [SERVICE]}},
        # The pages that tell the learners it stopped why are the hub's own (values.py, notices.py).
        "extraFiles": {"gpu-culler": {"mountPath": f"{FILES}/gpu_culler.py", "stringData": CULLER_SOURCE.read_text()}},
    }


def merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    both = dict(base)
    for key, value in top.items():
        nested = isinstance(value, Mapping) and isinstance(both.get(key), Mapping)
        both[key] = merged(both[key], value) if nested else value
    return both


def querying(
    values: Mapping[str, Any],
    labs: Mapping[str, Lab],
    metrics: Metrics,
    budgets: Mapping[str, LabBudget],
    workspace_id: str,
    region: str,
) -> dict[str, Any]:
    """The release's values with what queries the workspace from the hub's pod: the SigV4 proxy, the idle-GPU culler
    for the labs it culls, and the spend gate for the labs of `budgets` (spending.py)."""
    hub: dict[str, Any] = {"extraContainers": [sigv4_proxy(region)]}
    if culled_labs(labs):
        hub = merged(hub, hub_values(labs, metrics, workspace_id))
    if budgets:
        hub = merged(hub, spending.hub_values(budgets, labs, metrics_url(workspace_id)))
    return merged(values, {"hub": hub})
