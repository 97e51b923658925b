"""Learner pods as the hub of a rendered jupyterhub release would build them.

The hub container (the chart's templates/hub/deployment.yaml) runs `jupyterhub --config
/usr/local/etc/jupyterhub/jupyterhub_config.py`, with the chart's ConfigMap (resource names, jupyterhub_config.py,
z2jh.py) under config/ and beside it, and the chart's Secret (values.yaml, the generated secrets) under secret/. This
module lays those rendered objects out in a folder, runs the same jupyterhub_config.py through traitlets (with z2jh.py
reading the folder instead of /usr/local/etc/jupyterhub), and hands the configuration to KubeSpawner, at the versions
the chart's hub image runs (requirements.txt). A profile is then applied and the pod built by KubeSpawner's own code:
load_user_options (the profile's kubespawner_override) and get_pod_manifest (make_pod). The rehearsal creates these
pods on the twin (rehearsal/run.py); the tests read them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import tempfile
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import kube_config
from kubespawner import KubeSpawner  # type: ignore[import-untyped]  # kubespawner 7.0.0 has no py.typed
from tornado.httpclient import AsyncHTTPClient
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

CONFIG_ROOT = "/usr/local/etc/jupyterhub/"
Objects = list[dict[str, Any]]


def _one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _service_environment(objects: Objects) -> dict[str, str]:
    """The <SERVICE>_SERVICE_PORT variables Kubernetes gives every container, for the chart's Services."""
    return {
        f"{o['metadata']['name'].upper().replace('-', '_')}_SERVICE_PORT": str(o["spec"]["ports"][0]["port"])
        for o in objects
        if o["kind"] == "Service"
    }


def _z2jh(source: str, root: Path) -> types.ModuleType:
    """The chart's z2jh.py as a module that reads `root` where the hub reads /usr/local/etc/jupyterhub."""
    module = types.ModuleType("z2jh")
    exec(compile(source, "z2jh.py", "exec"), module.__dict__)

    def here(path: str) -> str:
        return str(root / path.removeprefix(CONFIG_ROOT)) if path.startswith(CONFIG_ROOT) else path

    # Its functions look up `os` and `open` in the module's globals when they run.
    module.__dict__["os"] = types.SimpleNamespace(
        path=types.SimpleNamespace(exists=lambda path: os.path.exists(here(path))), environ=os.environ
    )
    module.__dict__["open"] = lambda path, *args, **kwargs: open(here(path), *args, **kwargs)  # noqa: SIM115 - z2jh's own `with open(...)` closes it
    return module


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _extra_modules(objects: Objects) -> dict[str, str]:
    """The Python modules the hub's extraFiles mount (hub.extraFiles, the chart's `files` volume of the hub Secret's
    stringData, each at its mountPath with the file's key as subPath), by module name: what its extraConfig imports
    (the spend gate, components/jupyterhub/spending.py)."""
    files = _one(objects, "Secret", "hub").get("stringData", {})
    (hub,) = _one(objects, "Deployment", "hub")["spec"]["template"]["spec"]["containers"][:1]
    return {
        Path(mount["mountPath"]).stem: files[mount["subPath"]]
        for mount in hub.get("volumeMounts", [])
        if mount["name"] == "files" and mount["mountPath"].endswith(".py") and mount.get("subPath") in files
    }


def hub_config(objects: Objects, namespace: str) -> Config:
    """The traitlets configuration the hub of this release loads, from its rendered objects."""
    config_map = _one(objects, "ConfigMap", "hub")["data"]  # the hub's configuration
    secret_data = _one(objects, "Secret", "hub")["data"]  # the hub's values and secrets
    secret = {key: base64.b64decode(value) for key, value in secret_data.items()}
    modules = _extra_modules(objects)
    http_client = AsyncHTTPClient.configured_class()
    with tempfile.TemporaryDirectory(prefix="gpulab-hub-") as folder:
        root = Path(folder)
        for sub, files in (("config", {k: v.encode() for k, v in config_map.items()}), ("secret", secret)):
            (root / sub).mkdir()
            for key, content in files.items():
                (root / sub / key).write_bytes(content)
        # The extraFiles modules, importable as the hub imports them from their mount folder.
        (root / "modules").mkdir()
        for name, source in modules.items():
            (root / "modules" / f"{name}.py").write_text(source)
        (root / "jupyterhub_config.py").write_text(config_map["jupyterhub_config.py"])
        sys.modules["z2jh"] = _z2jh(config_map["z2jh.py"], root)
        sys.path.insert(0, str(root / "modules"))
        # The hub Deployment sets POD_NAMESPACE from its own namespace (fieldRef metadata.namespace).
        with _environment({**_service_environment(objects), "POD_NAMESPACE": namespace}):
            try:
                config = PyFileConfigLoader("jupyterhub_config.py", path=str(root)).load_config()
            finally:
                del sys.modules["z2jh"]
                for name in modules:
                    sys.modules.pop(name, None)
                sys.path[:] = [p for p in sys.path if p not in (str(root), str(root / "modules"))]
                AsyncHTTPClient.configure(http_client)  # jupyterhub_config.py picks the curl client for the process
    return config


# KubeSpawner loads a client configuration as it is made (in the cluster, the pod's service account); building a pod
# calls no API, so a kubeconfig for an address where nothing listens does.
_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "none", "user": {"token": "none"}}],
    "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    "current-context": "none",
}


def learner_pod(config: Config, profile: str, user: str = "learner") -> dict[str, Any]:
    """The pod KubeSpawner builds for `user` who picked `profile` on the spawn page, as the API server receives it."""

    async def build() -> dict[str, Any]:
        spawner = KubeSpawner(_mock=True, config=config)
        spawner.user.name = user
        # The names made from the user's (the pod's among them) were made from the mock user's as the spawner was
        # made; KubeSpawner's own reset makes them again, as it does before each start.
        spawner.clear_state()
        spawner.user_options = {"profile": profile}
        await spawner.load_user_options()
        pod = await spawner.get_pod_manifest()
        async with ApiClient() as api:
            return api.sanitize_for_serialization(pod)

    with tempfile.TemporaryDirectory(prefix="gpulab-kubeconfig-") as folder:
        kubeconfig = Path(folder) / "config"
        kubeconfig.write_text(json.dumps(_KUBECONFIG))
        # Read when the client loads its configuration (once per process: kubespawner/clients.py load_config).
        default, kube_config.KUBE_CONFIG_DEFAULT_LOCATION = kube_config.KUBE_CONFIG_DEFAULT_LOCATION, str(kubeconfig)
        try:
            return asyncio.run(build())
        finally:
            kube_config.KUBE_CONFIG_DEFAULT_LOCATION = default
