"""Every cookie the hub and a learner's server set is Secure, even for requests the proxy marks as plain http
(X-Forwarded-Proto: http): it marks them https, as it holds TLS (components/jupyterhub/proxy_tls.py), but the cookies
do not depend on it.

The hub is JupyterHub 5.5.0 itself, with each rendered stack's configuration (tests/hub_pods.py), signing a learner in
through its own login handler (the dummy authenticator stands in for the stack's: the cookies are the hub's, whoever
signs in). A learner's server is jupyterhub 5.5.0's own HubOAuth (services/auth.py), which the singleuser server runs,
given the environment the hub's spawner gives the server and the jupyter-server settings the rendered singleuser
config file holds; jupyter-server itself is not installed here, so its loading of that file is taken from its source
(serverapp.py, init_webapp: ServerApp.tornado_settings merged into the web app's settings)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
from unittest import mock
from urllib.parse import urlencode

import pytest
import tornado.web
from jupyterhub import orm
from jupyterhub.app import JupyterHub
from jupyterhub.services.auth import HubOAuth, HubOAuthenticated
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from traitlets.config import Config

from components.jupyterhub.hub import RELEASE
from components.jupyterhub.values import SERVER_CONFIG_PATH, TORNADO_SETTINGS
from tests.support.hub_config import stack_hub_config
from tests.support.rendered import HUB_STACKS, rendered

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


def sign_in(stack: str) -> tuple[list[str], dict[str, str]]:
    """Every Set-Cookie header of the stack's hub as a learner opens the login page and signs in, and the environment
    the hub's spawner gives the learner's server."""
    config: Config = copy.deepcopy(stack_hub_config(stack))
    config.JupyterHub.db_url = "sqlite://"
    config.ConfigurableHTTPProxy.auth_token = "the-proxy-token"
    config.JupyterHub.authenticator_class = "dummy"
    # KubeSpawner.get_env extends Spawner.get_env (kubespawner 7.0.0 spawner.py), where the cookie options are set;
    # the base class needs no cluster.
    config.JupyterHub.spawner_class = "jupyterhub.spawner.Spawner"
    host = rendered(stack).run.stack.settings.jupyterhub.host
    http_client = AsyncHTTPClient.configured_class()

    async def run() -> tuple[list[str], dict[str, str]]:
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
            seen += _keep(signed_in, cookies)
            user = app.users[orm.User.find(app.db, LEARNER)]
            return seen, user.spawner.get_env()
        finally:
            server.stop()
            await server.close_all_connections()

    try:
        return asyncio.run(run())
    finally:
        AsyncHTTPClient.configure(http_client)


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_cookie_the_hub_sets_is_secure(stack):
    cookies, _ = sign_in(stack)
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


def _server_settings(stack: str) -> dict:
    """The web app settings jupyter-server takes from the rendered singleuser config file."""
    (secret,) = [
        o for o in rendered(stack).chart(RELEASE) if o["kind"] == "Secret" and o["metadata"]["name"] == "singleuser"
    ]
    values = rendered(stack).release(RELEASE).values["singleuser"]["extraFiles"]
    (key,) = [k for k, f in values.items() if f["mountPath"] == SERVER_CONFIG_PATH]
    server_config = json.loads(secret["stringData"][key])
    return dict(server_config["ServerApp"]["tornado_settings"])


def server_cookies(stack: str) -> list[str]:
    """The Set-Cookie headers of a learner's server as it finishes the learner's OAuth sign-in (HubOAuth.set_cookie,
    which also sets the server's _xsrf) and as it starts one (set_state_cookie), for a request the proxy passed on as
    http, in the environment the hub's spawner gives the server."""
    _, env = sign_in(stack)
    prefix = f"/user/{LEARNER}/"
    env = {
        **{k: v for k, v in env.items() if k.startswith("JUPYTERHUB_")},
        "JUPYTERHUB_SERVICE_PREFIX": env.get("JUPYTERHUB_SERVICE_PREFIX", prefix),
        "JUPYTERHUB_API_TOKEN": "the-servers-token",
        "JUPYTERHUB_CLIENT_ID": env.get("JUPYTERHUB_CLIENT_ID") or f"jupyterhub-user-{LEARNER}",
    }
    seen: list[str] = []

    # The singleuser server's handlers are HubOAuthenticated (jupyterhub/singleuser/mixins.py, extension.py).
    class Callback(HubOAuthenticated, tornado.web.RequestHandler):
        def get(self):
            self.hub_auth = auth = self.settings["hub_auth"]
            auth.set_state_cookie(self, next_url=prefix)
            auth.set_cookie(self, "an-access-token")
            self.finish("ok")

    async def run() -> None:
        # HubAuth reads JUPYTERHUB_SERVICE_PREFIX for base_url's default once, as jupyterhub is imported.
        auth = HubOAuth(base_url=env["JUPYTERHUB_SERVICE_PREFIX"])
        settings = {"hub_auth": auth, "cookie_secret": b"0" * 32, **_server_settings(stack)}
        app = tornado.web.Application([(f"{prefix}oauth_callback", Callback)], **settings)
        server = HTTPServer(app, xheaders=True)
        sockets = bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        try:
            answer = await _fetch(port, "lab.example.edu", "GET", f"{prefix}oauth_callback", None, {})
            assert answer.code == 200, answer
            seen.extend(answer.headers.get_list("Set-Cookie"))
        finally:
            server.stop()
            await server.close_all_connections()

    http_client = AsyncHTTPClient.configured_class()
    with mock.patch.dict(os.environ, env):
        try:
            asyncio.run(run())
        finally:
            AsyncHTTPClient.configure(http_client)
    return seen


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_every_cookie_a_learners_server_sets_is_secure(stack):
    cookies = server_cookies(stack)
    names = {_name(c) for c in cookies}
    assert {f"jupyterhub-user-{LEARNER}", "_xsrf"} <= names, cookies
    assert any(re.fullmatch(f"jupyterhub-user-{LEARNER}-oauth-state.*", n) for n in names), cookies
    assert [c for c in cookies if "secure" not in _flags(c)] == []
    # On the server's own path, as the singleuser server sets them.
    assert {c.split("Path=")[1].split(";")[0] for c in cookies} == {f"/user/{LEARNER}/"}, cookies
