"""A learner who types http:// is sent to https://, and nothing else is ever served in clear.

The rendered objects of each hub stack say so (the proxy-public Service's ports and the annotations the in-tree AWS
load balancer reads, the proxy's flags and its certificate's Secret), and configurable-http-proxy 5.2.0 itself, run
with the rendered proxy's own flags (devtools/chp, `make chp`), answers an http request with a redirect to https and
passes an https one on to the hub as https."""

from __future__ import annotations

import datetime
import http.client
import os
import socket
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from components.jupyterhub import proxy_tls
from components.jupyterhub.hub import RELEASE
from render import harness
from tests.conftest import ROOT
from tests.support.chart_checks import one
from tests.support.rendered import HUB_STACKS, rendered

LB = "service.beta.kubernetes.io/aws-load-balancer-"
CHP = ROOT / "devtools" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"


def _proxy(stack: str) -> dict:
    return one(rendered(stack).chart(RELEASE), "Deployment", "the proxy", name="proxy")


def _public(stack: str) -> dict:
    return one(rendered(stack).chart(RELEASE), "Service", "the proxy's public Service", name="proxy-public")


def _container_ports(stack: str) -> dict[str, int]:
    (chp,) = _proxy(stack)["spec"]["template"]["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in chp["ports"]}


def _flags(stack: str) -> dict[str, str]:
    (chp,) = _proxy(stack)["spec"]["template"]["spec"]["containers"]
    assert chp["command"][0] == "configurable-http-proxy"
    return dict(flag.removeprefix("--").split("=", 1) for flag in chp["command"][1:])


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_load_balancer_serves_https_on_443_and_port_80_too(stack):
    service = _public(stack)
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports == {"https": (443, "https"), "http": (80, "http")}
    # cloud-provider-aws v1.34.3 health-checks the first port, with SSL for backend-protocol ssl (aws.go 2535-2563):
    # 443, where the proxy speaks TLS; on 80 an SSL check would fail and take every node out.
    assert service["spec"]["ports"][0]["port"] == 443
    annotations = service["metadata"]["annotations"]
    certificate = rendered(stack).run.stack.settings.jupyterhub.load_balancer.certificate_arn
    # The ACM certificate on the listener of the port named https only (buildListener, aws.go 2011-2045): 443 is
    # SSL to the learner and SSL again to the proxy, 80 plain TCP to the proxy's redirect.
    assert (annotations[f"{LB}ssl-cert"], annotations[f"{LB}ssl-ports"]) == (certificate, "https")
    assert annotations[f"{LB}backend-protocol"] == "ssl"


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_proxy_speaks_tls_on_https_and_redirects_on_http(stack):
    flags, ports = _flags(stack), _container_ports(stack)
    assert int(flags["port"]) == ports["https"]
    assert int(flags["redirect-port"]) == ports["http"]
    assert flags["redirect-to"] == "443"
    # Its key and certificate are the ones Pulumi makes, in the Secret the pod mounts.
    spec = _proxy(stack)["spec"]["template"]["spec"]
    (volume,) = spec["volumes"]
    (mount,) = spec["containers"][0]["volumeMounts"]
    assert volume["secret"]["secretName"] == proxy_tls.SECRET_NAME and mount["name"] == volume["name"]
    assert (flags["ssl-key"], flags["ssl-cert"]) == (f"{mount['mountPath']}/tls.key", f"{mount['mountPath']}/tls.crt")
    (secret,) = [
        r
        for r in rendered(stack).run.resources
        if r.type == "kubernetes:core/v1:Secret" and r.inputs["metadata"]["name"] == proxy_tls.SECRET_NAME
    ]
    assert secret.inputs["metadata"]["namespace"] == rendered(stack).run.stack.settings.jupyterhub.namespace
    assert secret.inputs["type"] == "kubernetes.io/tls"
    assert set(secret.inputs["stringData"]) == {"tls.key", "tls.crt"}
    # The key never shows in clear: a secret output of pulumi-tls, which the render writes as such.
    assert secret.inputs["stringData"]["tls.key"] == harness.SECRET
    release = rendered(stack).run.one("kubernetes:helm.sh/v3:Release", RELEASE)
    assert f"{secret.type}::{secret.name}" in release.dependencies


@pytest.mark.parametrize("stack", HUB_STACKS)
def test_the_proxys_certificate_names_the_hubs_host(stack):
    resources = {r.type: r for r in rendered(stack).run.resources if r.name == f"{RELEASE}-proxy-tls"}
    host = rendered(stack).run.stack.settings.jupyterhub.host
    certificate = resources["tls:index/selfSignedCert:SelfSignedCert"].inputs
    assert (certificate["dnsNames"], certificate["subject"]) == ([host], {"commonName": host})
    assert "server_auth" in certificate["allowedUses"]
    key = resources["tls:index/privateKey:PrivateKey"].inputs
    assert (key["algorithm"], key["rsaBits"]) == ("RSA", 2048)


# --- configurable-http-proxy 5.2.0 itself ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _self_signed(folder: Path, host: str) -> None:
    """A key and certificate standing in for the ones Pulumi makes (proxy_tls.py), under the Secret's item names."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    (folder / "tls.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "tls.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


class StandInHub:
    """The hub behind the proxy: answers every request with the X-Forwarded-Proto the proxy passed on."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = (self.headers.get("X-Forwarded-Proto") or "").encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _proxy_command(stack: str, folder: Path, hub_url: str) -> tuple[list[str], dict[str, int]]:
    """The rendered proxy's command, run here: its flags kept but for the ports (free ones on 127.0.0.1), the hub's
    address (the stand-in's) and the mounted Secret's folder (one with a stand-in certificate)."""
    (chp,) = _proxy(stack)["spec"]["template"]["spec"]["containers"]
    (mount,) = chp["volumeMounts"]
    ports = {"port": _free_port(), "redirect-port": _free_port(), "api-port": _free_port()}
    command = [str(CHP)]
    for flag in chp["command"][1:]:
        name, _, value = flag.removeprefix("--").partition("=")
        if name in ports:
            value = str(ports[name])
        elif name in ("ip", "api-ip"):
            value = "127.0.0.1"
        elif name in ("default-target", "error-target"):
            value = hub_url + value.split(")", 1)[1]  # http://hub:$(HUB_SERVICE_PORT)<path>
        elif name in ("ssl-key", "ssl-cert"):
            value = value.replace(mount["mountPath"], str(folder))
        command.append(f"--{name}={value}")
    return command, ports


def _wait_for(port: int, process: subprocess.Popen, log: Path) -> None:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if process.poll() is not None:
            pytest.fail(f"configurable-http-proxy exited: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"configurable-http-proxy did not listen on {port}: {log.read_text()[-2000:]}")


# The hub stack whose rendered proxy runs here: a synthetic one (tests/support/synthetic.py), so that the test holds
# whatever the repository's stack files say, a hub or none.
PROXY_STACK = "synthetic-jupyterhub"


@pytest.fixture(scope="module")
def hub_proxy(tmp_path_factory):
    """configurable-http-proxy 5.2.0 with a hub stack's rendered flags, in front of a stand-in hub."""
    if not CHP.exists():
        pytest.skip(f"no {CHP.relative_to(ROOT)}: make chp installs configurable-http-proxy 5.2.0 with npm")
    folder = tmp_path_factory.mktemp("chp")
    host = rendered(PROXY_STACK).run.stack.settings.jupyterhub.host
    _self_signed(folder, host)
    hub = StandInHub()
    command, ports = _proxy_command(PROXY_STACK, folder, hub.url)
    log = folder / "chp.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            command, env={**os.environ, "CONFIGPROXY_AUTH_TOKEN": "the-proxy-token"}, stdout=out, stderr=out
        )
    try:
        for port in ports.values():
            _wait_for(port, process, log)
        yield host, ports
    finally:
        process.terminate()
        process.wait(timeout=10)
        hub.server.shutdown()


def test_an_http_request_is_redirected_to_https(hub_proxy):
    host, ports = hub_proxy
    connection = http.client.HTTPConnection("127.0.0.1", ports["redirect-port"], timeout=10)
    connection.request("GET", "/hub/login?next=%2Fhub%2Fhome", headers={"Host": host})
    answer = connection.getresponse()
    # 5.2.0 appends the --redirect-to port it got as text, even 443 (bin/configurable-http-proxy 382: a string is
    # never !== 443): the same origin as https://<host>/ for a browser.
    assert (answer.status, answer.getheader("Location")) == (301, f"https://{host}:443/hub/login?next=%2Fhub%2Fhome")
    assert answer.read() == b""


def test_an_https_request_reaches_the_hub_as_https(hub_proxy):
    host, ports = hub_proxy
    # The load balancer checks no back-end certificate, nor does this client.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", ports["port"], timeout=10, context=context)
    connection.request("GET", "/hub/login", headers={"Host": host})
    answer = connection.getresponse()
    assert (answer.status, answer.read()) == (200, b"https")


def test_the_tls_port_serves_nothing_in_clear(hub_proxy):
    host, ports = hub_proxy
    connection = http.client.HTTPConnection("127.0.0.1", ports["port"], timeout=10)
    connection.request("GET", "/hub/login", headers={"Host": host})
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        connection.getresponse()
