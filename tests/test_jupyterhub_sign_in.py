"""Sign-in behind the load balancer and the proxy: the hub of each rendered stack (JupyterHub 5.5.0 with the
authenticator's own handlers, tests/support/hub_app.py), even given requests marked as plain http, must send the
learner's browser, and the platform or provider, https:// URLs only, and mark every cookie it sets Secure."""

import asyncio
import functools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.conftest import ROOT
from tests.support.hub_app import Response, hub_responses
from tests.support.hub_config import authenticator_class, stack_hub_config
from tests.support.rendered import HUB_STACKS, STACKS, rendered

# The sign-in types that send the browser to a provider with a redirect URI of the hub's.
REDIRECTING = ("github", "oidc", "lti13")


def _hub(stack):
    return rendered(stack).run.stack.settings.jupyterhub


def _signing_in(*types: str) -> list[str]:
    """The stacks whose hub signs in with one of `types`, from their stack files (no render at collection)."""
    return [s for s in HUB_STACKS if json.loads(STACKS[s]["gpulab:jupyterhub"])["auth"]["type"] in types]


def _redirect_uri(answer: Response) -> str:
    assert answer.code == 302, answer
    assert answer.location is not None
    (uri,) = parse_qs(urlsplit(answer.location).query)["redirect_uri"]
    return uri


def _cookie_flags(answer: Response) -> list[set[str]]:
    return [{part.strip().lower() for part in cookie.split(";")[1:]} for cookie in answer.cookies]


@functools.cache
def lti13_sign_in(stack: str) -> tuple[Response, Response]:
    """A platform's LTI 1.3 login initiation (the platform's form post, IMS Security Framework 5.1.1.1), and the
    tool configuration the hub serves to platforms."""
    hub = _hub(stack)
    initiation = {
        "iss": hub.auth.issuer,
        "login_hint": "a-learner",
        "target_link_uri": hub.address,
        "client_id": hub.auth.client_ids[0],
        "lti_message_hint": "a-launch",
    }
    return tuple(  # type: ignore[return-value]
        hub_responses(
            stack_hub_config(stack),
            hub.host,
            [("POST", "/hub/lti13/oauth_login", urlencode(initiation)), ("GET", "/hub/lti13/config", None)],
        )
    )


# The synthetic stack whose LTI 1.3 URIs docs/jupyterhub.md gives: a platform's admin registers the tool with them.
DOCS_STACK = "synthetic-metrics"


def test_the_synthetic_hub_stacks_sign_in_every_way_that_redirects():
    # Whatever the repository's stack files sign in with, each way is tested on a stack of the tests.
    assert all([s for s in _signing_in(t) if s.startswith("synthetic-")] for t in REDIRECTING)


@pytest.mark.parametrize("stack", _signing_in("lti13"))
def test_an_lti13_launch_gives_https_uris_and_secure_cookies(stack):
    hub = _hub(stack)
    login, tool = lti13_sign_in(stack)
    assert _redirect_uri(login) == f"https://{hub.host}/hub/lti13/oauth_callback"
    assert urlsplit(login.location).netloc == urlsplit(hub.auth.authorize_url).netloc
    assert login.cookies, "the login sets its state and nonce cookies"
    assert all("secure" in flags for flags in _cookie_flags(login)), login.cookies
    configuration = json.loads(tool.body)
    assert configuration["target_link_uri"] == f"https://{hub.host}"
    assert configuration["oidc_initiation_url"] == f"https://{hub.host}/hub/lti13/oauth_login"
    placements = configuration["extensions"][0]["settings"]["placements"]
    assert {p["target_link_uri"] for p in placements} == {f"https://{hub.host}"}


@pytest.mark.parametrize("stack", _signing_in("github", "oidc"))
def test_oauth_sign_in_gives_https_callback_and_secure_cookies(stack):
    hub = _hub(stack)
    (login,) = hub_responses(stack_hub_config(stack), hub.host, [("GET", "/hub/oauth_login", None)])
    assert _redirect_uri(login) == f"https://{hub.host}/hub/oauth_callback"
    assert login.cookies, "the login sets its state cookie"
    assert all("secure" in flags for flags in _cookie_flags(login)), login.cookies


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_hub_knows_its_https_address_whatever_the_request(stack):
    # Without it JupyterHub takes scheme and host from the request for its cookies and redirects (handlers/base.py).
    assert stack_hub_config(stack).JupyterHub.public_url == _hub(stack).address


def test_the_uris_the_docs_give_are_the_lti13_hubs_own():
    assert DOCS_STACK in _signing_in("lti13")
    login, tool = lti13_sign_in(DOCS_STACK)
    configuration = json.loads(tool.body)
    docs = (ROOT / "docs" / "jupyterhub.md").read_text()
    sent = [
        f"redirect_uri={_redirect_uri(login)}",
        configuration["target_link_uri"],
        configuration["oidc_initiation_url"],
    ]
    assert [uri for uri in sent if f"`{uri}`" not in docs] == []


class _GitHub:
    """GitHub's API as an allow-list check sees it: a token of the scopes the sign-in asked for, and an organization
    team whose member `private` is visible only to a token with read:org (GitHub REST API, "Get team membership for a
    user": private memberships need read:org; without it GitHub answers 404)."""

    def __init__(self, org_team: str, member: str):
        org, _, team = org_team.partition(":")
        self.path = f"/api/v3/orgs/{org}/teams/{team}/members/{member}"
        self.tokens: dict[str, list[str]] = {}
        github = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                token = self.headers.get("Authorization", "").split()[-1]
                member = self.path == github.path and "read:org" in github.tokens.get(token, [])
                self.send_response(204 if member else 404)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def grant(self, authorize_location: str) -> str:
        """A token of the scopes the hub's authorize redirect asks for (space-separated, RFC 6749 3.3)."""
        (scope,) = parse_qs(urlsplit(authorize_location).query).get("scope", [""])
        token = f"token-{len(self.tokens)}"
        self.tokens[token] = scope.split()
        return token


@pytest.mark.parametrize("stack", _signing_in("github"))
def test_a_private_team_member_signs_in_with_github(stack):
    # GitHubOAuthenticator (oauthenticator 17.4.0, github.py) checks allowed_organizations with the learner's own
    # token: without the read:org scope only public members get in.
    hub = _hub(stack)
    assert hub.auth.allowed_organizations, "the GitHub stack lets an organization in"
    org_team = hub.auth.allowed_organizations[0]
    config = stack_hub_config(stack)
    assert "read:org" in config.GitHubOAuthenticator.scope
    github = _GitHub(org_team, "private-member")
    try:
        (login,) = hub_responses(config, hub.host, [("GET", "/hub/oauth_login", None)])
        assert login.location is not None and login.location.startswith("https://github.com/login/oauth/authorize?")
        token = github.grant(login.location)
        authenticator = authenticator_class("github")(config=config, github_url=github.url)
        auth_model = {
            "name": "private-member",
            "admin": None,  # as OAuthenticator builds it for a user not in admin_users (oauth2.py, authenticate)
            "auth_state": {"token_response": {"access_token": token, "token_type": "bearer"}},
        }
        allowed = asyncio.run(authenticator.check_allowed("private-member", auth_model))
        outsider = asyncio.run(authenticator.check_allowed("outsider", auth_model))
    finally:
        github.server.shutdown()
    assert (allowed, outsider) == (True, False)
