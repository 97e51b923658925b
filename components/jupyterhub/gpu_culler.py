"""gpulab's idle-GPU culler: a JupyterHub service that stops a learner's server whose GPU seat stayed idle for its lab's
gpuIdleTimeout, as the metrics workspace's rules find it (gpulab:learner_gpu_idle:percent,
components/metrics/recording_rules.py).

    python3 gpu_culler.py --metrics-url URL --lab LAB=PERCENT/TIMEOUT ... [--every SECONDS] [--group NAME]

The hub runs it as a managed service in its own pod (components/jupyterhub/culling.py): its API token, scoped to what it
does, comes in JUPYTERHUB_API_TOKEN and the hub's API at --hub-url. Each round it asks the workspace (through the
pod's SigV4 proxy, which signs with the pod's IAM role) for the idle learners of the labs it culls, stops each one's
server if it is still running, logs the stop, and puts the learner in --group, whose members JupyterHub's pages tell
why their server stopped; a learner whose server runs again leaves the group. It uses only the Python standard
library and tornado, which the hub's image has.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

IDLE_SERIES = "gpulab:learner_gpu_idle:percent"
log = logging.getLogger("gpu-culler")


@dataclass(frozen=True)
class Lab:
    name: str
    percent: int  # the idle threshold, for the log line
    timeout: str  # the lab's gpuIdleTimeout, for the log line and the learners' notice


@dataclass(frozen=True)
class Idle:
    username: str
    servername: str
    lab: str
    pod: str


def lab_setting(text: str) -> Lab:
    """LAB=PERCENT/TIMEOUT, e.g. intro=5/30m."""
    name, _, rest = text.partition("=")
    percent, _, timeout = rest.partition("/")
    if not (name and percent.isdigit() and timeout):
        raise argparse.ArgumentTypeError(f"expected LAB=PERCENT/TIMEOUT such as intro=5/30m, got {text!r}")
    return Lab(name, int(percent), timeout)


class Culler:
    def __init__(self, hub_url: str, token: str, metrics_url: str, labs: list[Lab], group: str):
        self.hub_url = hub_url.rstrip("/")
        self.token = token
        self.metrics_url = metrics_url.rstrip("/")
        self.labs = {lab.name: lab for lab in labs}
        self.group = group
        self.client = AsyncHTTPClient()

    async def _hub(self, method: str, path: str, body: object = None) -> object:
        request = HTTPRequest(
            f"{self.hub_url}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body),
            allow_nonstandard_methods=True,
        )
        response = await self.client.fetch(request)
        return json.loads(response.body) if response.body else None

    async def idle_learners(self) -> list[Idle]:
        labs = "|".join(sorted(self.labs))
        query = urlencode({"query": f'{IDLE_SERIES}{{lab=~"{labs}"}}'})
        response = await self.client.fetch(f"{self.metrics_url}/api/v1/query?{query}")
        answer = json.loads(response.body)
        if answer.get("status") != "success":
            raise RuntimeError(f"the metrics workspace answered {answer.get('error') or answer}")
        found = []
        for result in answer["data"]["result"]:
            labels = result["metric"]
            if labels.get("lab") in self.labs and labels.get("username"):
                found.append(Idle(labels["username"], labels.get("servername", ""), labels["lab"], labels["pod"]))
        return found

    async def _servers(self, username: str) -> dict[str, dict]:
        try:
            user = await self._hub("GET", f"/users/{quote(username, safe='')}")
        except HTTPClientError as error:
            if error.code == 404:
                return {}
            raise
        assert isinstance(user, dict)
        return user.get("servers") or {}

    async def stop(self, idle: Idle) -> bool:
        server = (await self._servers(idle.username)).get(idle.servername)
        if not server or not server.get("ready") or server.get("pending"):
            return False  # stopped already, or starting or stopping: nothing to give back now
        user = quote(idle.username, safe="")
        path = (
            f"/users/{user}/servers/{quote(idle.servername, safe='')}" if idle.servername else f"/users/{user}/server"
        )
        await self._hub("DELETE", path)
        lab = self.labs[idle.lab]
        name = f"{idle.username}'s server {idle.servername!r}" if idle.servername else f"{idle.username}'s server"
        log.info(
            "stopped %s (lab %s, pod %s): its GPU stayed under %d%% for %s",
            name,
            idle.lab,
            idle.pod,
            lab.percent,
            lab.timeout,
        )
        await self._hub("POST", f"{self._group_path}/users", {"users": [idle.username]})
        return True

    @property
    def _group_path(self) -> str:
        return f"/groups/{quote(self.group, safe='')}"

    async def _group(self) -> dict:
        """The group of learners told why, created on first use."""
        try:
            group = await self._hub("GET", self._group_path)
        except HTTPClientError as error:
            if error.code != 404:
                raise
            group = await self._hub("POST", self._group_path)
        assert isinstance(group, dict)
        return group

    async def welcome_back(self, group: dict) -> None:
        """Takes out of the group the learners whose server runs again: their notice is no longer news."""
        back = []
        for username in group.get("users", []):
            if any(server.get("ready") for server in (await self._servers(username)).values()):
                back.append(username)
        if back:
            await self._hub("DELETE", f"{self._group_path}/users", {"users": back})

    async def round(self) -> list[Idle]:
        """One pass: stops every idle learner's running server; returns those it stopped."""
        await self.welcome_back(await self._group())
        return [idle for idle in await self.idle_learners() if await self.stop(idle)]


async def run(culler: Culler, every: float) -> None:
    while True:
        try:
            await culler.round()
        except Exception as error:  # a round that fails is logged and the next one tried: the hub keeps its service
            log.error("round failed: %s", error)
        await asyncio.sleep(every)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub-url", default=os.environ.get("JUPYTERHUB_API_URL", "http://localhost:8081/hub/api"))
    parser.add_argument("--metrics-url", required=True, help="the workspace's Prometheus API, e.g. via the proxy")
    parser.add_argument("--lab", action="append", type=lab_setting, required=True, help="LAB=PERCENT/TIMEOUT")
    parser.add_argument("--every", type=float, default=60, help="seconds between rounds")
    parser.add_argument("--group", default="gpulab-gpu-idle", help="JupyterHub group of learners told why")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(name)s %(asctime)s] %(message)s", stream=sys.stdout)
    culler = Culler(args.hub_url, os.environ["JUPYTERHUB_API_TOKEN"], args.metrics_url, args.lab, args.group)
    asyncio.run(run(culler, args.every))
    return 0


if __name__ == "__main__":
    sys.exit(main())
