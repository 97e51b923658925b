"""gpulab's idle-GPU culler against a real JupyterHub 5.5 (its REST API and pages, started here with a dummy spawner,
and the pages a stack with the meter renders) and a fake metrics workspace: it stops the idle learner's server and
only that one, with the token scopes it is given in production, logs the stop, and the learner's page says why and
what happened to their files."""

import asyncio
import html
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.jupyterhub import culling, gpu_culler, notices
from components.jupyterhub.hub import RELEASE
from tests.conftest import ROOT
from tests.support.rendered import rendered

# The stack whose hub pages the learners read: the synthetic one with the meter (tests/support/synthetic.py), which
# culls a lab's idle GPUs and keeps a home volume per learner, whatever the repository's stack files say.
STACK = "synthetic-metrics"
CULLER_TOKEN = "culler-" + "0" * 32
ADMIN_TOKEN = "admin-" + "1" * 32
LEARNERS = ("ada", "grace", "alan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Workspace:
    """A Prometheus query API that answers the idle learners it is given, and keeps the queries it is asked; a
    subclass answers other queries (`result`)."""

    def __init__(self):
        self.idle: list[dict[str, str]] = []
        self.queries: list[str] = []
        workspace = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                query = urllib.parse.parse_qs(url.query)["query"][0]
                workspace.queries.append(query)
                result = workspace.result(query)
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
                self.send_response(200 if url.path == "/workspaces/ws-test/api/v1/query" else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/workspaces/ws-test"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def result(self, query: str) -> list[dict]:
        return [{"metric": {"__name__": gpu_culler.IDLE_SERIES, **m}, "value": [0, "0"]} for m in self.idle]


def stack_pages(stack: str) -> dict[str, str]:
    """The hub's page templates of a rendered stack, by file name, as its hub's pod mounts them."""
    files = rendered(stack).release(RELEASE).values["hub"]["extraFiles"]
    return {
        Path(f["mountPath"]).name: f["stringData"]
        for f in files.values()
        if Path(f["mountPath"]).parent == Path(notices.TEMPLATES)
    }


def notice(page: str, id_: str) -> str | None:
    """The text of the page's notice of that id, or None."""
    found = re.search(f'<div class="alert alert-info" role="status" id="{id_}">(.*?)</div>', page, re.DOTALL)
    return html.unescape(found[1]) if found else None


class Hub:
    """A JupyterHub process with a stack's pages, and a client of its API; `services` and `roles` are added to the
    culler's and the test admin's, and `config` lines to its configuration file, after its own."""

    def __init__(
        self,
        folder: Path,
        stack: str = STACK,
        services: tuple[dict, ...] = (),
        roles: tuple[dict, ...] = (),
        config: tuple[str, ...] = (),
    ):
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}/hub/api"
        templates = folder / "templates"
        templates.mkdir(parents=True)
        for page, text in stack_pages(stack).items():
            (templates / page).write_text(text)
        all_roles = [
            {"name": culling.SERVICE, "scopes": culling.SCOPES, "services": [culling.SERVICE]},
            {
                "name": "test-admin",
                "scopes": ["admin:users", "admin:servers", "admin:groups"],
                "services": ["test-admin"],
            },
            *roles,
        ]
        all_services = [
            {"name": culling.SERVICE, "api_token": CULLER_TOKEN},
            {"name": "test-admin", "api_token": ADMIN_TOKEN},
            *services,
        ]
        (folder / "jupyterhub_config.py").write_text(
            "\n".join(
                [
                    "from tests.support.hub_doubles import DummySpawner, MemoryProxy",
                    "c.JupyterHub.ip = '127.0.0.1'",
                    f"c.JupyterHub.port = {free_port()}",
                    "c.JupyterHub.hub_ip = '127.0.0.1'",
                    f"c.JupyterHub.hub_port = {self.port}",
                    "c.JupyterHub.proxy_class = MemoryProxy",
                    "c.JupyterHub.spawner_class = DummySpawner",
                    "c.JupyterHub.authenticator_class = 'dummy'",
                    f"c.JupyterHub.db_url = 'sqlite:///{folder / 'hub.sqlite'}'",
                    f"c.JupyterHub.cookie_secret_file = '{folder / 'cookie_secret'}'",
                    f"c.JupyterHub.pid_file = '{folder / 'hub.pid'}'",
                    f"c.JupyterHub.template_paths = ['{templates}']",
                    f"c.JupyterHub.services = {all_services!r}",
                    f"c.JupyterHub.load_roles = {all_roles!r}",
                    *config,
                ]
            )
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.log = (folder / "hub.log").open("w")
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "jupyterhub"), "-f", "jupyterhub_config.py"],
            cwd=folder,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.folder = folder
        self.wait(lambda: self.call("GET", "/") is not None, "the hub to answer", seconds=180)

    def call(self, method: str, path: str, body: object = None, token: str = ADMIN_TOKEN):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.api}{path}", data=data, method=method)
        request.add_header("Authorization", f"token {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
                return json.loads(text) if text else {}
        except (urllib.error.URLError, ConnectionError):
            if self.process.poll() is not None:
                pytest.fail(f"the hub exited: {(self.folder / 'hub.log').read_text()[-2000:]}")
            return None

    def wait(self, done, what: str, seconds: float = 30) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if done():
                return
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}: {(self.folder / 'hub.log').read_text()[-2000:]}")

    def servers(self, name: str) -> dict:
        return (self.call("GET", f"/users/{name}") or {}).get("servers", {})

    def start(self, name: str, seconds: float = 30) -> None:
        self.call("POST", f"/users/{name}/server", {})
        self.wait(lambda: self.servers(name).get("", {}).get("ready"), f"{name}'s server", seconds)

    def signed_in(self, name: str) -> tuple[urllib.request.OpenerDirector, CookieJar]:
        """A browser of the learner's, signed in through the dummy authenticator's form, and its cookies."""
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        base = f"http://127.0.0.1:{self.port}/hub"
        opener.open(f"{base}/login").read()
        xsrf = next(c.value for c in jar if c.name == "_xsrf")
        form = urllib.parse.urlencode({"username": name, "password": "x", "_xsrf": xsrf}).encode()
        # To the home page, not the default /hub/spawn, which would start the learner's server.
        opener.open(f"{base}/login?next=%2Fhub%2Fhome", data=form).read()
        return opener, jar

    def page(self, name: str, path: str, form: dict[str, str] | None = None) -> str:
        """A hub page as the learner sees it, signed in; with `form`, the page that answers posting it."""
        opener, jar = self.signed_in(name)
        data = None
        if form is not None:
            xsrf = next(c.value for c in jar if c.name == "_xsrf")
            data = urllib.parse.urlencode({**form, "_xsrf": xsrf}).encode()
        try:
            return opener.open(f"http://127.0.0.1:{self.port}/hub{path}", data=data).read().decode()
        except urllib.error.HTTPError as error:  # a stopped server's page answers 424
            return error.read().decode()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A JupyterHub with three learners' servers running. Starting it is mostly the hub's imports: 100 s on this shared
    2-core machine under a load of 20."""
    running = Hub(tmp_path_factory.mktemp("hub"))
    try:
        for name in LEARNERS:
            running.call("POST", f"/users/{name}", {})
            running.start(name)
        yield running
    finally:
        running.close()


def idle(username: str, lab: str) -> dict[str, str]:
    return {"username": username, "lab": lab, "namespace": "jupyterhub", "pod": f"jupyter-{username}"}


def one_round(hub: Hub, workspace: Workspace) -> list[gpu_culler.Idle]:
    async def run():
        labs = [gpu_culler.Lab("alpha", 5, "20m")]
        culler = gpu_culler.Culler(hub.api, CULLER_TOKEN, workspace.url, labs, culling.GROUP)
        return await culler.round()

    return asyncio.run(run())


def test_the_culler_stops_only_the_idle_learners_server(hub, caplog):
    workspace = Workspace()
    # ada idle in alpha, which culls; alan idle in beta, which does not; grace busy, so not in the series; a learner
    # the hub does not know.
    workspace.idle = [idle("ada", "alpha"), idle("alan", "beta"), idle("nobody", "alpha")]
    with caplog.at_level(logging.INFO, logger="gpu-culler"):
        stopped = one_round(hub, workspace)
    assert [s.username for s in stopped] == ["ada"]
    hub.wait(lambda: "" not in hub.servers("ada"), "ada's server to stop")
    assert all(hub.servers(name)[""]["ready"] for name in ("grace", "alan"))
    assert workspace.queries == [f'{gpu_culler.IDLE_SERIES}{{lab=~"alpha"}}']
    assert "stopped ada's server (lab alpha, pod jupyter-ada): its GPU stayed under 5% for 20m" in caplog.text
    assert hub.call("GET", f"/groups/{culling.GROUP}")["users"] == ["ada"]

    # ada's page says why, and what happened to her files: the stack keeps a volume per learner; grace's page has only
    # what the hub says to everyone about files.
    stack = rendered(STACK).run.stack.settings
    hub_settings = stack.jupyterhub
    assert hub_settings.homes == "perLearner"
    ada = hub.page("ada", "/user/ada/")
    assert notice(ada, "gpulab-gpu-idle") == notices.gpu_idle_notice()
    assert "files you saved in your home folder (/home/jovyan) are kept" in notice(ada, "gpulab-gpu-idle")
    grace = hub.page("grace", "/home")
    assert notice(grace, "gpulab-gpu-idle") is None
    for page in (ada, grace):
        assert notice(page, "gpulab-files") == notices.files_notice(hub_settings, stack.labs)
    assert notice(grace, "gpulab-files").startswith(
        "When your server stops, the files you saved in your home folder (/home/jovyan) are kept on a volume of your "
        "own"
    )

    # ada starts again and the series no longer has her: her notice goes, and nobody is stopped.
    hub.start("ada")
    workspace.idle = []
    assert one_round(hub, workspace) == []
    assert hub.call("GET", f"/groups/{culling.GROUP}")["users"] == []
    assert all(hub.servers(name)[""]["ready"] for name in LEARNERS)


def test_the_cullers_token_may_not_do_more_than_it_needs(hub):
    # Its role's scopes (components/jupyterhub/culling.py) stop servers; they neither create users nor change others'
    # groups.
    assert hub.call("POST", "/users/mallory", {}, token=CULLER_TOKEN) is None
    assert hub.call("GET", "/groups/other", token=CULLER_TOKEN) is None
