"""The hub of a rendered jupyterhub release, answering HTTP as it does behind the load balancer.

JupyterHub 5.5.0 itself (its `JupyterHub` application, initialised with the configuration the chart's
jupyterhub_config.py gives it: tests/support/hub_config.py) serves the requests on a local port with its own handlers
and the authenticator's, as the proxy passes them on: over plain http, with the learner's Host header and the
X-Forwarded-Proto the proxy (configurable-http-proxy, `xfwd`) adds for the connection it got. The proxy holds TLS
(components/jupyterhub/proxy_tls.py), so it says https; the requests here say http, the worst case, so that what the
tests see of URLs and cookies holds without it.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from dataclasses import dataclass

from jupyterhub.app import JupyterHub
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from traitlets.config import Config


@dataclass(frozen=True)
class Response:
    code: int
    location: str | None
    cookies: list[str]  # each Set-Cookie header
    body: bytes


def hub_responses(config: Config, host: str, requests: Sequence[tuple[str, str, str | None]]) -> list[Response]:
    """The hub's answer to each (method, path, form body) request for `host`, as the proxy would pass it on had it
    got plain http."""
    config = copy.deepcopy(config)
    # What the hub's pod has beside the configuration: its database volume (here in memory) and the proxy's token,
    # which the hub Deployment sets as CONFIGPROXY_AUTH_TOKEN from the chart's Secret.
    config.JupyterHub.db_url = "sqlite://"
    config.ConfigurableHTTPProxy.auth_token = "the-proxy-token"
    http_client = AsyncHTTPClient.configured_class()

    async def serve() -> list[Response]:
        app = JupyterHub(config=config)
        await app.initialize([])
        server = HTTPServer(app.tornado_application, xheaders=True)  # as the hub serves (JupyterHub.start)
        sockets = bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        port = sockets[0].getsockname()[1]
        try:
            answers = []
            for method, path, body in requests:
                request = HTTPRequest(
                    f"http://127.0.0.1:{port}{path}",
                    method=method,
                    body=body,
                    headers={"Host": host, "X-Forwarded-Proto": "http"},
                    follow_redirects=False,
                )
                answer = await AsyncHTTPClient().fetch(request, raise_error=False)
                answers.append(
                    Response(
                        answer.code, answer.headers.get("Location"), answer.headers.get_list("Set-Cookie"), answer.body
                    )
                )
            return answers
        finally:
            server.stop()
            await server.close_all_connections()

    try:
        return asyncio.run(serve())
    finally:
        AsyncHTTPClient.configure(http_client)  # the hub picks the curl client for the process
