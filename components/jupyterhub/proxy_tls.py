"""The certificate the hub's proxy serves to the load balancer, so that the proxy itself can redirect http to https.

The Classic Load Balancer is a TCP/SSL balancer and cannot answer a redirect; configurable-http-proxy 5.2.0 redirects
only when it terminates TLS itself (bin/configurable-http-proxy 289-293: --redirect-port without --ssl-key/--ssl-cert
exits, 363-392: the redirect server), which zero-to-jupyterhub 4.4.0 sets up for proxy.https.type secret
(templates/proxy/deployment.yaml 91-96: --port=8443, --redirect-port=8000, --redirect-to=443 and the Secret's key and
certificate). Learners never see this certificate: the load balancer still presents the ACM certificate, then opens
its own TLS connection to the proxy (values.py, backend-protocol ssl), and a Classic Load Balancer checks a back end's
certificate only with back-end authentication, which gpulab does not configure (Elastic Load Balancing User Guide for
Classic Load Balancers, "Configure an HTTPS listener": authentication of the instances is optional; REPORTED, not
testable here). So a self-signed certificate made and kept by Pulumi (pulumi-tls) serves; its key is a Pulumi secret.
"""

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls

# The kubernetes.io/tls Secret the chart's proxy mounts (proxy.https.secret.name; its default item names tls.key and
# tls.crt, values.yaml 350-353, are the type's own).
SECRET_NAME = "proxy-backend-tls"
# RSA rather than ECDSA: the Classic Load Balancer talks to back ends with "a static cipher suite" (User Guide, "HTTPS
# listeners for your Classic Load Balancer") that the guide does not list, and RSA certificates are what its examples
# use. 2048 bits, the size ACM issues.
KEY_ALGORITHM = "RSA"
KEY_BITS = 2048
# Ten years, renewed by the `pulumi up` that runs in its last year: nothing checks its dates (no back-end
# authentication), so the renewal only keeps it from looking stale.
VALIDITY_HOURS = 10 * 365 * 24
EARLY_RENEWAL_HOURS = 365 * 24


def backend_tls_secret(
    name: str, host: str, namespace: str, opts: pulumi.ResourceOptions, k8s_opts: pulumi.ResourceOptions
) -> k8s.core.v1.Secret:
    """The proxy's key and self-signed certificate for `host`, in the Secret the chart mounts."""
    key = tls.PrivateKey(f"{name}-proxy-tls", algorithm=KEY_ALGORITHM, rsa_bits=KEY_BITS, opts=opts)
    certificate = tls.SelfSignedCert(
        f"{name}-proxy-tls",
        private_key_pem=key.private_key_pem,
        subject={"common_name": host},
        dns_names=[host],
        validity_period_hours=VALIDITY_HOURS,
        early_renewal_hours=EARLY_RENEWAL_HOURS,
        allowed_uses=["digital_signature", "key_encipherment", "server_auth"],
        opts=opts,
    )
    return k8s.core.v1.Secret(
        f"{name}-proxy-tls",
        metadata={"name": SECRET_NAME, "namespace": namespace},
        type="kubernetes.io/tls",
        # The key stays a Pulumi secret: pulumi-tls marks privateKeyPem secret (PrivateKey additional_secret_outputs).
        string_data={"tls.crt": certificate.cert_pem, "tls.key": key.private_key_pem},
        opts=k8s_opts,
    )
