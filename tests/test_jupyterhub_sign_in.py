"""Sign-in behind the load balancer, which ends TLS: the hub of each rendered stack (JupyterHub 5.5.0 with the
authenticator's own handlers, tests/support/hub_app.py) gets plain http from the proxy and must still send the learner's
browser, and the platform or provider, https:// URLs only, and mark every cookie it sets Secure."""

import functools
import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.conftest import ROOT
from tests.support.hub_app import Response, hub_responses
from tests.support.hub_config import stack_hub_config
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


def test_the_hub_stacks_sign_in_every_way_that_redirects():
    assert all(_signing_in(t) for t in REDIRECTING)


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


def test_the_uris_the_docs_give_are_the_staging_hubs_own():
    if "staging" not in _signing_in("lti13"):
        pytest.skip("the staging stack signs in without LTI 1.3: docs/jupyterhub.md names its LTI 1.3 URIs")
    login, tool = lti13_sign_in("staging")
    configuration = json.loads(tool.body)
    docs = (ROOT / "docs" / "jupyterhub.md").read_text()
    sent = [
        f"redirect_uri={_redirect_uri(login)}",
        configuration["target_link_uri"],
        configuration["oidc_initiation_url"],
    ]
    assert [uri for uri in sent if f"`{uri}`" not in docs] == []
