"""Pure builder of the jupyterhub chart's values (zero-to-jupyterhub-k8s 4.4.0, values.yaml and
files/hub/jupyterhub_config.py at that tag), from gpulab:jupyterhub and the labs.

"""

import copy
import json
from collections.abc import Mapping
from typing import Any

from components.jupyterhub import notices, proxy_tls
from components.jupyterhub.spawn_profiles import profile_list
from components.jupyterhub.user_scheduler import user_scheduler
from components.jupyterhub.walls import LEARNER_POD_NAME_TEMPLATE, learner_network_policy
from components.labels import SYSTEM_NODE_LABEL, SYSTEM_NODE_SELECTOR, SYSTEM_NODE_VALUE
from domain.stack.classes import DEFAULT_WARMUP
from domain.stack.jupyterhub import JupyterHub
from domain.stack.model import Lab
from domain.time import durations

# The encrypted gp3 StorageClass of the hub's database and learners' homes (components/jupyterhub/hub.py).
STORAGE_CLASS = "gpulab-encrypted-gp3"
# The Kubernetes Secret with the OAuth client secret, and the variable the hub reads it from: OAuthenticator 17.4.0
# falls back to OAUTH_CLIENT_SECRET when its own variable (GITHUB_CLIENT_SECRET for GitHub) is unset
# (oauthenticator/oauth2.py, OAuthenticator._client_secret_default).
CLIENT_SECRET_NAME = "jupyterhub-oauth-client"
CLIENT_SECRET_ITEM = "client-secret"
CLIENT_SECRET_ENV = "OAUTH_CLIENT_SECRET"
# ltiauthenticator 1.6.3 registers no entry point name, so the hub loads it by its import path.
LTI13_AUTHENTICATOR = "ltiauthenticator.lti13.auth.LTI13Authenticator"

# The in-tree AWS load balancer of the Service (kubernetes/cloud-provider-aws pkg/providers/v1/aws.go, which EKS
# runs): a Classic Load Balancer with raw SSL and TCP listeners, so that websockets (the kernels) work, with an idle
# timeout of an hour for quiet kernels. At cloud-provider-aws v1.34.3 (aws.go 2011-2045, buildListener): the port
# named in ssl-ports, 443, gets an SSL listener with the ACM certificate and, for backend-protocol ssl, SSL to the
# proxy's https port (backendProtocolMapping, 295-300); port 80 is not an ssl port and gets plain TCP to the proxy's
# http port, where the proxy answers every request with a redirect to https (proxy_tls.py). The health check is SSL on
# the first port's node port (aws.go 2535-2563), which is 443's: the chart lists https before http
# (templates/proxy/service.yaml 55-77).
_LB = "service.beta.kubernetes.io/aws-load-balancer-"
# A Classic Load Balancer takes 1 to 4000 seconds (cloud-provider-aws v1.34.3 docs/service_controller.md).
LB_IDLE_TIMEOUT_SECONDS = 3600
# Without a policy the controller leaves the listener on the Classic Load Balancer's default, ELBSecurityPolicy-2016-08,
# which still accepts TLS 1.0 and 1.1; this predefined Classic Load Balancer policy offers TLS 1.2 only, with RSA
# suites for ACM's RSA certificates (Elastic Load Balancing User Guide for Classic Load Balancers, "Predefined SSL
# security policies"). The controller makes it the HTTPS listener's policy (aws.go, ensureSSLNegotiationPolicy with
# Reference-Security-Policy).
LB_TLS_POLICY = "ELBSecurityPolicy-TLS-1-2-2017-01"


def load_balancer_annotations(hub: JupyterHub) -> dict[str, str]:
    lb = hub.load_balancer
    annotations = {
        f"{_LB}ssl-cert": lb.certificate_arn,
        f"{_LB}backend-protocol": "ssl",
        f"{_LB}ssl-ports": "https",
        f"{_LB}ssl-negotiation-policy": LB_TLS_POLICY,
        f"{_LB}connection-idle-timeout": str(LB_IDLE_TIMEOUT_SECONDS),
        f"{_LB}subnets": ",".join(lb.subnet_ids),
        # Only the system nodes take the load balancer's traffic, so that GPU nodes coming and going never change
        # its registered instances.
        f"{_LB}target-node-labels": f"{SYSTEM_NODE_LABEL}={SYSTEM_NODE_VALUE}",
    }
    if lb.scheme == "internal":
        annotations[f"{_LB}internal"] = "true"
    return annotations


def authenticator_config(hub: JupyterHub) -> dict[str, Any]:
    """The chart's hub.config: the authenticator class and its settings (traitlets config sections)."""
    auth = hub.auth
    callback = f"{hub.address}hub/oauth_callback"
    if auth.type == "github":
        github: dict[str, Any] = {
            "client_id": auth.client_id,
            "oauth_callback_url": callback,
            "allowed_users": list(auth.allowed_users),
            "allowed_organizations": list(auth.allowed_organizations),
            "admin_users": list(auth.admin_users),
        }
        if auth.allowed_organizations:
            # Private organization and team membership is visible only with this scope (GitHubOAuthenticator).
            github["scope"] = ["read:org"]
        return {"JupyterHub": {"authenticator_class": "github"}, "GitHubOAuthenticator": github}
    if auth.type == "oidc":
        generic: dict[str, Any] = {
            "client_id": auth.client_id,
            "oauth_callback_url": callback,
            "authorize_url": auth.authorize_url,
            "token_url": auth.token_url,
            "userdata_url": auth.userdata_url,
            "scope": list(auth.scope),
            "username_claim": auth.username_claim,
            "allowed_users": list(auth.allowed_users),
            "admin_users": list(auth.admin_users),
        }
        if auth.allowed_groups:
            # OAuthenticator 17: allowed_groups are JupyterHub groups, filled from the user's claims only with
            # manage_groups; the userinfo response is kept in auth_state under oauth_user.
            generic |= {
                "allowed_groups": list(auth.allowed_groups),
                "manage_groups": True,
                "auth_state_groups_key": f"oauth_user.{auth.groups_claim}",
            }
        return {"JupyterHub": {"authenticator_class": "generic-oauth"}, "GenericOAuthenticator": generic}
    if auth.type == "lti13":
        lti: dict[str, Any] = {
            "client_id": list(auth.client_ids),
            "issuer": auth.issuer,
            "authorize_url": auth.authorize_url,
            "jwks_endpoint": auth.jwks_endpoint,
            "username_key": auth.username_key,
            "admin_users": list(auth.admin_users),
        }
        # JupyterHub 5 lets nobody in by default (Authenticator.allow_all is False): without an allow list, whoever
        # the platform launches may sign in.
        lti |= {"allowed_users": list(auth.allowed_users)} if auth.allowed_users else {"allow_all": True}
        # ltiauthenticator 1.6.3's default ("auto", lti13/auth.py) builds the redirect URI and /hub/lti13/config's
        # URLs from the scheme of the request the hub sees, which is https only as long as the proxy holds TLS
        # (proxy_tls.py); a request seen as http would give http:// URIs, which a platform that registered the
        # https:// ones refuses. Written out, so that they never depend on it.
        lti["uri_scheme"] = "https"
        return {"JupyterHub": {"authenticator_class": LTI13_AUTHENTICATOR}, "LTI13Authenticator": lti}
    # DummyAuthenticator lets anyone in under any name (allow_all defaults to True for it).
    return {"JupyterHub": {"authenticator_class": "dummy"}}


def culler(hub: JupyterHub) -> dict[str, Any]:
    """The chart's jupyterhub-idle-culler (z2jh 4.4.0 files/hub/jupyterhub_config.py turns these into its flags)."""
    culling = hub.culling
    if not culling.enabled:
        return {"enabled": False}
    return {
        "enabled": True,
        "timeout": durations.seconds(culling.idle_timeout),
        "every": durations.seconds(culling.every),
        # The chart reads 0 as no maximum age.
        "maxAge": durations.seconds(culling.max_age) if culling.max_age else 0,
        # It stops servers, never deletes users: deleting a user deletes their home volume (KubeSpawner 7.0.0
        # delete_pvc, True by default: delete_forever deletes claim-<user>), and users: true (--cull-users) deletes
        # every user idle for the timeout. Named servers are not offered; removing one would delete its claim too.
        # Both are the chart's defaults, written here so that a change is a decision.
        "users": False,
        "removeNamedServers": False,
    }


# Every cookie the hub and the learners' servers set is Secure, whatever the proxy says of the request. Behind the proxy
# holding TLS it says https (X-Forwarded-Proto, http-proxy-3 as configurable-http-proxy 5.2.0 runs it); should a request
# ever arrive as http (X-Forwarded-Proto: http), JupyterHub 5.5.0 decides alone (handlers/base.py _set_cookie:
# Secure from an https public_url; _xsrf_utils.py: the hub's _xsrf from xsrf_cookie_kwargs, which app.py fills from
# cookie_options only), and a learner's server (services/auth.py HubOAuth.set_cookie: Secure only for an https
# request) learns the hub's cookie_options from JUPYTERHUB_COOKIE_OPTIONS, which the spawner sets from them
# (spawner.py get_env; user.py passes the hub's tornado_settings cookie_options). The chart sets tornado_settings to
# {"slow_spawn_timeout": 0} and hub.config replaces the whole dict (jupyterhub_config.py, c[section].update), so it is
# repeated here.
TORNADO_SETTINGS = {"slow_spawn_timeout": 0, "cookie_options": {"secure": True}}
# A learner's server's own _xsrf cookie takes only its web app's xsrf_cookie_kwargs (jupyterhub 5.5.0 _xsrf_utils.py,
# which the singleuser extension uses: the path defaults to the server's prefix, as jupyter-server's own default);
# jupyter-server (serverapp.py, init_webapp) merges ServerApp.tornado_settings into those settings. A config file in
# /usr/local/etc/jupyter, a config directory of Jupyter (jupyter_core.paths SYSTEM_CONFIG_PATH) that the Jupyter
# Docker Stacks images leave free (theirs is /etc/jupyter/jupyter_server_config.py, which sets no tornado_settings).
SERVER_CONFIG_PATH = "/usr/local/etc/jupyter/jupyter_server_config.json"
SERVER_CONFIG = {"ServerApp": {"tornado_settings": {"xsrf_cookie_kwargs": {"secure": True}}}}


def helm_values(hub: JupyterHub, labs: Mapping[str, Lab], kubernetes_version: str) -> dict[str, Any]:
    """The release's values. They hold no secret: the chart makes up the hub's cookie secret, the proxy's token and
    the auth-state key on first install and finds them again in its own Secret on upgrades (`lookup`,
    templates/hub/_helpers-passwords.tpl), and the OAuth client secret comes from a Secret of its own."""
    config = authenticator_config(hub)
    # JupyterHub 5.5 marks its cookies Secure when public_url is https or the request was (handlers/base.py,
    # _set_cookie): with public_url, whatever the proxy says of the request; the redirects it builds take their host
    # from it too.
    config["JupyterHub"]["public_url"] = hub.address
    config["JupyterHub"]["tornado_settings"] = copy.deepcopy(TORNADO_SETTINGS)
    hub_values: dict[str, Any] = {
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "config": config,
        "db": {
            "type": "sqlite-pvc",
            "pvc": {"storageClassName": STORAGE_CLASS, "storage": f"{hub.hub_database_size_gib}Gi"},
        },
        # What the hub's pages tell learners about their files (notices.py).
        **notices.hub_values(hub, labs),
    }
    if hub.auth.type in ("github", "oidc"):
        hub_values["extraEnv"] = {
            CLIENT_SECRET_ENV: {"valueFrom": {"secretKeyRef": {"name": CLIENT_SECRET_NAME, "key": CLIENT_SECRET_ITEM}}}
        }
    storage: dict[str, Any] = {"type": "none"}
    if hub.homes == "perLearner":
        # One PVC per learner (claim-<user>), created by KubeSpawner on first start and kept when the server stops.
        storage = {"type": "dynamic", "capacity": f"{hub.home_size_gib}Gi", "dynamic": {"storageClass": STORAGE_CLASS}}
    return {
        "hub": hub_values,
        "proxy": {
            "chp": {"nodeSelector": dict(SYSTEM_NODE_SELECTOR)},
            # The load balancer's 443 reaches the proxy's TLS port with its own TLS connection, and its 80 the
            # proxy's redirect to https (proxy_tls.py): nothing but the redirect is ever served in clear.
            "https": {"enabled": True, "type": "secret", "secret": {"name": proxy_tls.SECRET_NAME}},
            "service": {
                "type": "LoadBalancer",
                "annotations": load_balancer_annotations(hub),
                "disableHttpPort": False,
            },
        },
        "scheduling": {
            "userScheduler": user_scheduler(kubernetes_version),
            # Warm seats are the CapacityBuffers' job (class seats); placeholders would hold GPU slices all day.
            "userPlaceholder": {"enabled": False},
            # No gpulab node has the chart's hub.jupyter.org/node-purpose label: the preference would only add noise.
            "userPods": {"nodeAffinity": {"matchNodePurpose": "ignore"}},
        },
        # Each lab's nodes pull its notebook image as they boot (EC2NodeClass user data); the chart's pullers would
        # run on every GPU node and pull the chart's sample image.
        "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
        "singleuser": {
            "profileList": profile_list(labs),
            "storage": storage,
            # The lab nodes' instance metadata already answers no pod (hop limit 1, IMDSv2 only: the policy pack's
            # ec2nodeclass-hardening), so the chart's privileged iptables init container would only add a pull.
            "cloudMetadata": {"blockWithIptables": False},
            # Learners walled off from each other, the cluster and the VPC (components/jupyterhub/walls.py).
            "networkPolicy": learner_network_policy(),
            # One set of the network policy agent's rules per learner's server (walls.py).
            "podNameTemplate": LEARNER_POD_NAME_TEMPLATE,
            # A learner without a warm seat waits for a new GPU node and its notebook image: as long as gpulab's
            # default class warmup reckons that takes, not the chart's 300 s, after which the hub gives up.
            "startTimeout": durations.seconds(DEFAULT_WARMUP),
            # The server's _xsrf cookie Secure (SERVER_CONFIG above).
            "extraFiles": {
                "gpulab-secure-cookies": {"mountPath": SERVER_CONFIG_PATH, "stringData": json.dumps(SERVER_CONFIG)}
            },
        },
        "cull": culler(hub),
    }
