"""Every cookie the hub and a learner's server set is Secure, even for requests the proxy marks as plain http
(X-Forwarded-Proto: http): it marks them https, as it holds TLS (components/jupyterhub/proxy_tls.py), but the cookies
do not depend on it.

The hub is JupyterHub 5.5.0 itself, with each rendered stack's configuration (tests/support/hub_config.py), signing a
learner in through its own login handler (the dummy authenticator stands in for the stack's: the cookies are the hub's,
whoever signs in). A learner's server is the real one: jupyter-server 2.21.1 with jupyterhub 5.5.0's singleuser
extension (`jupyterhub-singleuser`, the chart's singleuser.cmd), spawned by a real JupyterHub 5.5.0 process with the
stack's rendered public_url and tornado_settings, reading the rendered singleuser config file; the learner signs in to
the hub, opens the server, and goes through the hub's OAuth and back. The notebook image's own jupyter-server version
is not known here: jupyter-server's merge of ServerApp.tornado_settings (serverapp.py, init_webapp) reads the same at
2.20.0 and 2.21.1, and jupyterhub's cookie code the same from 4.1.0 to 5.5.1 (docs/jupyterhub.md)."""

from __future__ import annotations

import asyncio
import copy
import http.client
import re
import sys
import urllib.parse
from pathlib import Path
from urllib.parse import urlencode

import pytest
from jupyterhub.app import JupyterHub
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from traitlets.config import Config

from components.jupyterhub.hub import RELEASE
from components.jupyterhub.values import SERVER_CONFIG_PATH, TORNADO_SETTINGS
from tests.support.hub_config import stack_hub_config
from tests.support.rendered import HUB_STACKS, rendered
from tests.test_gpu_culler import Hub, free_port

LEARNER = "ada"


def _flags(cookie: str) -> set[str]:
    return {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}


def _name(cookie: str) -> str:
    return cookie.split("=", 1)[0]


async def _fetch(port: int, host: str, method: str, path: str, body: str | None, cookies: dict[str, str]):
    headers = {"Host": host, "X-Forwarded-Proto": "http"}
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    request = HTTPRequest(
        f"http://127.0.0.1:{port}{path}", method=method, body=body, headers=headers, follow_redirects=False
    )
    return await AsyncHTTPClient().fetch(request, raise_error=False)


def _keep(answer, cookies: dict[str, str]) -> list[str]:
    set_cookies = answer.headers.get_list("Set-Cookie")
    for cookie in set_cookies:
        name, _, rest = cookie.partition("=")
        cookies[name] = rest.split(";", 1)[0]
    return set_cookies


def sign_in(stack: str) -> list[str]:
    """Every Set-Cookie header of the stack's hub as a learner opens the login page and signs in."""
    config: Config = copy.deepcopy(stack_hub_config(stack))
    config.JupyterHub.db_url = "sqlite://"
    config.ConfigurableHTTPProxy.auth_token = "the-proxy-token"
    config.JupyterHub.authenticator_class = "dummy"
    host = rendered(stack).run.stack.settings.jupyterhub.host
    http_client = AsyncHTTPClient.configured_class()

    async def run() -> list[str]:
        app = JupyterHub(config=config)
        await app.initialize([])
        server = HTTPServer(app.tornado_application, xheaders=True)
        sockets = bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        cookies: dict[str, str] = {}
        seen: list[str] = []
        try:
            login = await _fetch(port, host, "GET", "/hub/login", None, cookies)
            assert login.code == 200, login
            seen += _keep(login, cookies)
            form = urlencode({"username": LEARNER, "password": "x", "_xsrf": cookies["_xsrf"]})
            signed_in = await _fetch(port, host, "POST", "/hub/login?next=%2Fhub%2Fhome", form, cookies)
            assert signed_in.code == 302, (signed_in.code, signed_in.body[-500:])
            return seen + _keep(signed_in, cookies)
        finally:
            server.stop()
            await server.close_all_connections()

    try:
        return asyncio.run(run())
    finally:
        AsyncHTTPClient.configure(http_client)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_cookie_the_hub_sets_is_secure(stack):
    cookies = sign_in(stack)
    names = {_name(c) for c in cookies}
    # The login page's _xsrf, then the signed-in learner's: the hub's session, its login cookie and a new _xsrf.
    assert {"_xsrf", "jupyterhub-session-id", "jupyterhub-hub-login"} <= names, cookies
    assert [c for c in cookies if "secure" not in _flags(c)] == []


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hub_keeps_the_charts_spawn_setting_beside_cookies(stack):
    # hub.config replaces the chart's whole tornado_settings dict, so its slow_spawn_timeout: 0 must come along.
    settings = stack_hub_config(stack).JupyterHub.tornado_settings
    assert settings == TORNADO_SETTINGS
    assert settings["slow_spawn_timeout"] == 0


def _server_config(stack: str) -> str:
    """The singleuser config file the rendered chart mounts in every learner's server (values.py SERVER_CONFIG_PATH)."""
    (secret,) = [
        o for o in rendered(stack).chart(RELEASE) if o["kind"] == "Secret" and o["metadata"]["name"] == "singleuser"
    ]
    values = rendered(stack).release(RELEASE).values["singleuser"]["extraFiles"]
    (key,) = [k for k, f in values.items() if f["mountPath"] == SERVER_CONFIG_PATH]
    return secret["stringData"][key]


class Browser:
    """A learner's browser on http://<host>/, with the proxy's routing done by hand: /hub/ to the hub, /user/ to the
    learner's server; every request marked X-Forwarded-Proto: http. It keeps every cookie, Secure or not, and sends
    them all back (a browser would send no Secure cookie over http: here they must reach the server to see what it
    sets next)."""

    def __init__(self, host: str, hub_port: int, server_port: int):
        self.host, self.ports = host, {"hub": hub_port, "user": server_port}
        self.cookies: dict[str, str] = {}
        self.set_cookies: dict[str, list[str]] = {"hub": [], "user": []}

    def get(self, url: str, method: str = "GET", body: str | None = None) -> http.client.HTTPResponse:
        path = urllib.parse.urlsplit(url)._replace(scheme="", netloc="").geturl()
        side = path.split("/")[1]
        connection = http.client.HTTPConnection("127.0.0.1", self.ports[side], timeout=60)
        headers = {"Host": self.host, "X-Forwarded-Proto": "http"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read()
        for cookie in answer.headers.get_all("Set-Cookie") or []:
            self.set_cookies[side].append(cookie)
            name, _, rest = cookie.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return answer

    def follow(self, url: str) -> list[tuple[int, str]]:
        """Each (status, URL) from `url` through its redirects."""
        seen = []
        for _ in range(10):
            answer = self.get(url)
            seen.append((answer.status, url))
            if answer.status not in (301, 302, 303, 307):
                return seen
            url = answer.getheader("Location")
        raise AssertionError(f"too many redirects: {seen}")


SINGLEUSER = Path(sys.executable).parent / "jupyterhub-singleuser"


def server_cookies(stack: str, folder: Path) -> tuple[list[tuple[int, str]], list[str]]:
    """Each (status, URL) a learner's browser goes through as it opens a file of the learner's on their real server,
    and every Set-Cookie header of that server: jupyter-server 2.21.1 with jupyterhub 5.5.0's singleuser extension
    (jupyterhub-singleuser, the chart's singleuser.cmd), spawned by a real JupyterHub 5.5.0 with the stack's rendered
    public_url and tornado_settings, reading the rendered singleuser config file. The learner has signed in to the
    hub; the server sends them through the hub's OAuth and back."""
    hub_config = stack_hub_config(stack).JupyterHub
    host = rendered(stack).run.stack.settings.jupyterhub.host
    config_dir = folder / "jupyter"
    config_dir.mkdir()
    (config_dir / Path(SERVER_CONFIG_PATH).name).write_text(_server_config(stack))
    port = free_port()
    hub = Hub(
        folder / "hub",
        stack,
        config=(
            f"c.JupyterHub.public_url = {hub_config.public_url!r}",
            f"c.JupyterHub.tornado_settings = {dict(hub_config.tornado_settings)!r}",
            "c.JupyterHub.spawner_class = 'jupyterhub.spawner.SimpleLocalProcessSpawner'",
            f"c.SimpleLocalProcessSpawner.home_dir_template = '{folder}/home-{{username}}'",
            f"c.Spawner.cmd = [{str(SINGLEUSER)!r}]",
            # jupyter-server refuses root, which the tests may run as; the notebook image's user is jovyan.
            "c.Spawner.args = ['--allow-root']",
            f"c.Spawner.port = {port}",
            # The folder the rendered file is mounted in, /usr/local/etc/jupyter, is one of Jupyter's; here another.
            f"c.Spawner.environment = {{'JUPYTER_CONFIG_PATH': {str(config_dir)!r}}}",
            "c.Spawner.http_timeout = 180",
            "c.Spawner.start_timeout = 180",
        ),
    )
    home = folder / f"home-{LEARNER}"
    home.mkdir()
    (home / "notes.txt").write_text("a learner's notes")
    try:
        hub.call("POST", f"/users/{LEARNER}", {})
        hub.start(LEARNER, seconds=180)
        browser = Browser(host, hub.port, port)
        browser.get("/hub/login")
        form = urlencode({"username": LEARNER, "password": "x", "_xsrf": browser.cookies["_xsrf"]})
        signed_in = browser.get("/hub/login?next=%2Fhub%2Fhome", "POST", form)
        assert signed_in.status == 302, signed_in.status
        # jupyter-server's file handler wants a signed-in learner, and sends a stranger to the hub's OAuth.
        return browser.follow(f"/user/{LEARNER}/files/notes.txt"), browser.set_cookies["user"]
    finally:
        hub.close()


def _cleared(cookie: str) -> bool:
    """A header that deletes a cookie: tornado's clear_cookie, an empty value with an expiry (a year ago)."""
    return cookie.split(";", 1)[0].partition("=")[2] in ("", '""') and "expires=" in cookie.lower()


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_hub_stack_gives_servers_the_same_cookie_settings(stack):
    # The learner's server below runs with the first hub stack's; every other stack's are the same.
    first = HUB_STACKS[0]
    assert _server_config(stack) == _server_config(first)
    assert stack_hub_config(stack).JupyterHub.tornado_settings == stack_hub_config(first).JupyterHub.tornado_settings


def test_every_cookie_a_learners_server_sets_is_secure(tmp_path):
    stack = HUB_STACKS[0]
    host = rendered(stack).run.stack.settings.jupyterhub.host
    visited, cookies = server_cookies(stack, tmp_path)
    assert [status for status, _ in visited] == [302, 302, 302, 200], visited
    assert visited[1][1].startswith(f"https://{host}/hub/api/oauth2/authorize?client_id=jupyterhub-user-{LEARNER}&")
    assert visited[2][1].startswith(f"/user/{LEARNER}/oauth_callback?code=")
    given = [c for c in cookies if not _cleared(c)]
    names = {_name(c) for c in given}
    # The OAuth state cookie as it leaves for the hub, then the session cookie and the server's _xsrf on the way back.
    assert {f"jupyterhub-user-{LEARNER}", "_xsrf"} <= names, cookies
    assert any(re.fullmatch(f"jupyterhub-user-{LEARNER}-oauth-state.*", n) for n in names), cookies
    assert [c for c in given if "secure" not in _flags(c)] == []
    # On the server's own path, as the singleuser server sets them.
    assert {c.split("Path=")[1].split(";")[0] for c in cookies} == {f"/user/{LEARNER}/"}, cookies
    # The one header without Secure clears the state cookie once it is used: jupyterhub 5.5.0's HubOAuth clears it
    # without the cookie options (services/auth.py, _clear_cookie: Secure only for a __Host- cookie); it carries no
    # value.
    assert [_name(c) for c in cookies if _cleared(c)] == [f"jupyterhub-user-{LEARNER}-oauth-state"], cookies
