"""Stack files as a user writes them, bad and good, through the render: a bad one exits 2 with one `gpulab:<key>` line
per problem and writes nothing; a good one renders. Each is YAML text, so that what YAML makes of it is tested too."""

import json
import textwrap
from pathlib import Path

import pytest

import render.run

HEAD = """\
config:
  aws:region: eu-west-1
  gpulab:cluster:
    name: lab-test
    kubernetesVersion: "1.36"
    vpcId: vpc-0a1b2c3d4e5f60718
    privateSubnetIds: [subnet-0a1b2c3d4e5f60001, subnet-0a1b2c3d4e5f60002]
"""
LAB = """\
      instanceTypes: [g4dn.xlarge]
      slicesPerGpu: 3
      maxGpus: 4
      ami: al2023@v20260714
"""
CERTIFICATE = "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
SECRET = "  gpulab:jupyterhubClientSecret: {secure: v1:c2VjcmV0}\n"
CLASSES = "classes: [{schedule: '0 9 * * mon', duration: 1h}]\n"


def labs(body: str = "", name: str = "intro") -> str:
    """gpulab:labs with one lab of LAB's keys, `body` added to them."""
    return f"  gpulab:labs:\n    {name}:\n{LAB}{textwrap.indent(textwrap.dedent(body), '      ')}"


def hub(auth: str = "type: dummy\n", **changes: str) -> str:
    keys = {
        "host": "lab.example.edu",
        "notebookImage": "quay.io/jupyter/pytorch-notebook:cuda12-a4c8c5467c74",
        "scheme": "internet-facing",
        "subnetIds": "[subnet-0a1b2c3d4e5f60101, subnet-0a1b2c3d4e5f60102]",
        "certificateArn": CERTIFICATE,
        **changes,
    }
    return (
        "  gpulab:jupyterhub:\n"
        f"    host: {keys['host']}\n"
        f"    notebookImage: {keys['notebookImage']}\n"
        # The hub culls idle servers, so learners' files need volumes of their own (homes: none is refused).
        "    homes: perLearner\n"
        "    loadBalancer:\n"
        f"      scheme: {keys['scheme']}\n"
        f"      subnetIds: {keys['subnetIds']}\n"
        f"      certificateArn: {keys['certificateArn']}\n"
        f"    auth:\n{textwrap.indent(textwrap.dedent(auth), '      ')}"
    )


GITHUB = "type: github\nclientId: Iv1.0123456789abcdef\n"
OIDC = """\
type: oidc
clientId: 0a1b2c3d
authorizeUrl: https://t.b2clogin.com/t.onmicrosoft.com/oauth2/v2.0/authorize?p=B2C_1_signin
tokenUrl: https://t.b2clogin.com/t.onmicrosoft.com/oauth2/v2.0/token?p=B2C_1_signin
userdataUrl: https://graph.microsoft.com/oidc/userinfo
allowedUsers: [alice]
"""


def render_text(tmp_path: Path, text: str, capsys) -> tuple[int, list[str], list[Path]]:
    """The render's status, its stderr lines and what it wrote, for a stack file of `text`."""
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(text)
    out = tmp_path / "out"
    status = render.run.main([str(stack), "--out", str(out), "--no-charts"])
    written = sorted(out.rglob("*")) if out.exists() else []
    return status, capsys.readouterr().err.splitlines(), written


# Each bad stack file and the line it must print (its start).
BAD = {
    "a lab named by a number": (
        HEAD + labs(name="1"),
        "gpulab:labs.1: a key must be a string, and YAML reads 1 as a number; quote it ('1')",
    ),
    "labs 1 and '1', which JSON would merge": (
        HEAD + labs(name="1") + f"    '1':\n{LAB}",
        "gpulab:labs.1: a key must be a string",
    ),
    "a lab named by a date": (
        HEAD + labs(name="2027-01-11"),
        "gpulab:labs.2027-01-11: a key must be a string, and YAML reads 2027-01-11 as a date",
    ),
    "a lab named on (YAML 1.1's true)": (
        HEAD + labs(name="on"),
        "gpulab:labs.on: a key must be a string, and YAML reads on as true or false; quote it ('on')",
    ),
    "a key not a string deep in a lab": (
        HEAD + labs("rootVolume: {8: 100}\n"),
        "gpulab:labs.intro.rootVolume.8: a key must be a string",
    ),
    "a top-level key not a string": (HEAD + "  3: x\n", "3: a key must be a string"),
    "a duration written as a date": (
        HEAD + labs("expireAfter: 2027-01-11\n"),
        "gpulab:labs.intro.expireAfter: must be a duration such as 720h, or Never, got '2027-01-11'",
    ),
    "a duration written as a time (YAML 1.1's base 60)": (
        HEAD + labs("terminationGracePeriod: 1:30\n"),
        "gpulab:labs.intro.terminationGracePeriod: must be a duration such as 10m, 1h30m or 720h, got '1:30'",
    ),
    "a class lasting a date": (
        HEAD + labs("classes: [{schedule: '0 9 * * mon', duration: 2027-01-11}]\n"),
        "gpulab:labs.intro.classes[0].duration: must be hours and minutes such as 45m, 2h or 1h30m, got '2027-01-11'",
    ),
    "a misspelt instance type": (
        HEAD + labs().replace("g4dn.xlarge", "g4dn.xlarg"),
        "gpulab:labs.intro.instanceTypes[0]: 'g4dn.xlarg' is not an NVIDIA GPU instance type that gpulab knows "
        "(the list is in domain/capacity/instance_types.py); did you mean g4dn.xlarge?",
    ),
    "an AMI release without its v": (
        HEAD + labs().replace("@v20260714", "@20260714"),
        "gpulab:labs.intro.ami: must be an AL2023 AMI alias, al2023@v<YYYYMMDD> or al2023@latest, got "
        "'al2023@20260714'; did you mean al2023@v20260714?",
    ),
    "a host name past DNS's 253 characters": (
        HEAD + labs() + hub(host=".".join(["a" * 63] * 4) + ".edu"),
        "gpulab:jupyterhub.host: must be at most 253 characters, as DNS names are, got 259",
    ),
    "a host name with a label past 63 characters": (
        HEAD + labs() + hub(host="a" * 64 + ".example.edu"),
        "gpulab:jupyterhub.host: must be a lowercase DNS name of labels of at most 63 characters",
    ),
    "a digest too short for sha256": (
        HEAD + labs(f"prepullImages: [ubuntu@sha256:{'a' * 32}]\n"),
        "gpulab:labs.intro.prepullImages[0]: image reference 'ubuntu@sha256:" + "a" * 32 + "' has a digest "
        "containerd refuses: a sha256 digest is 64 lowercase hex digits, got 32 characters",
    ),
    "a digest in uppercase hex": (
        HEAD + labs(f"prepullImages: [ubuntu@sha256:{'A' * 64}]\n"),
        "gpulab:labs.intro.prepullImages[0]: image reference 'ubuntu@sha256:" + "A" * 64 + "' has a digest "
        "containerd refuses",
    ),
    "a digest of an algorithm containerd does not know": (
        HEAD + labs(f"notebookImage: quay.io/jupyter/base-notebook@md5:{'a' * 32}\n"),
        "gpulab:labs.intro.notebookImage: image reference 'quay.io/jupyter/base-notebook@md5:" + "a" * 32 + "' has "
        "a digest containerd refuses: md5 is not a digest algorithm it knows (sha256, sha384, sha512)",
    ),
    "a GitHub team written org/team": (
        HEAD + labs() + hub(GITHUB + "allowedOrganizations: [my-org/my-team]\n") + SECRET,
        "gpulab:jupyterhub.auth.allowedOrganizations[0]: must be a GitHub organization (org) or one of its teams "
        "(org:team-slug), the form OAuthenticator reads, got 'my-org/my-team'; did you mean my-org:my-team?",
    ),
    "a GitHub team of two colons": (
        HEAD + labs() + hub(GITHUB + "allowedOrganizations: ['my-org:my-team:x']\n") + SECRET,
        "gpulab:jupyterhub.auth.allowedOrganizations[0]: must be a GitHub organization (org) or one of its teams",
    ),
    "a GitHub user that is an email": (
        HEAD + labs() + hub(GITHUB + "allowedUsers: [alice@example.edu]\n") + SECRET,
        "gpulab:jupyterhub.auth.allowedUsers[0]: must be a GitHub user name",
    ),
    "the client secret under auth": (
        HEAD + labs() + hub(GITHUB + "allowedUsers: [alice]\nclientSecret: x\n") + SECRET,
        "gpulab:jupyterhub.auth.clientSecret: unknown key; did you mean gpulab:jupyterhubClientSecret?",
    ),
    "the client secret misspelt": (
        HEAD + labs() + hub(GITHUB + "allowedUsers: [alice]\n") + SECRET.replace("Secret:", "Secrets:"),
        "gpulab:jupyterhubClientSecrets: unknown key; did you mean gpulab:jupyterhubClientSecret?",
    ),
    "an issuer with a query": (
        HEAD
        + labs()
        + hub(
            "type: lti13\nclientIds: ['1']\nissuer: https://canvas.example.edu?x=1\n"
            "authorizeUrl: https://canvas.example.edu/auth\njwksEndpoint: https://canvas.example.edu/jwks\n"
        ),
        "gpulab:jupyterhub.auth.issuer: must be an https:// URL without query or fragment",
    ),
    "an endpoint with a fragment": (
        HEAD + labs() + hub(OIDC.replace("?p=B2C_1_signin\ntoken", "#signin\ntoken")) + SECRET,
        "gpulab:jupyterhub.auth.authorizeUrl: must be an https:// URL without a fragment",
    ),
    "the hub's certificate in another region": (
        HEAD + labs() + hub(certificateArn=CERTIFICATE.replace("eu-west-1", "us-east-1")),
        "gpulab:jupyterhub.loadBalancer.certificateArn: must be an ACM certificate in the stack's region eu-west-1, "
        "where the load balancer is, got one in us-east-1",
    ),
    "an internet-facing hub on the cluster's private subnets": (
        HEAD + labs() + hub(subnetIds="[subnet-0a1b2c3d4e5f60001, subnet-0a1b2c3d4e5f60101]"),
        "gpulab:jupyterhub.loadBalancer.subnetIds: must be public subnets with scheme internet-facing, but "
        "subnet-0a1b2c3d4e5f60001 is in gpulab:cluster.privateSubnetIds",
    ),
    "the hub in a lab's class namespace": (
        HEAD + labs(CLASSES) + hub() + "    namespace: intro-classes\n",
        "gpulab:jupyterhub.namespace: must be a namespace of its own, not 'intro-classes', which the classes of lab "
        "intro use",
    ),
    "the metrics in a lab's class namespace": (
        HEAD + labs(CLASSES) + "  gpulab:metrics: {namespace: intro-classes}\n",
        "gpulab:metrics.namespace: must be a namespace of its own, not 'intro-classes', which the classes of lab "
        "intro use",
    ),
    "the device plugin in a lab's class namespace": (
        HEAD + labs(CLASSES) + "  gpulab:nvidiaDevicePlugin: {namespace: intro-classes}\n",
        "gpulab:nvidiaDevicePlugin.namespace: must be a namespace of its own, not 'intro-classes', which the classes "
        "of lab intro use",
    ),
}


@pytest.mark.parametrize(("text", "expected"), BAD.values(), ids=BAD.keys())
def test_a_bad_stack_exits_2_with_its_line_and_writes_nothing(tmp_path, capsys, text, expected):
    status, lines, written = render_text(tmp_path, text, capsys)
    assert (status, written) == (2, []), lines
    assert any(line.startswith(expected) for line in lines), lines
    assert all(line.startswith("gpulab") or line.startswith("3:") for line in lines), lines


GOOD = {
    "a lab named '1', quoted": HEAD + labs(name="'1'"),
    "a lab named '2027-01-11', quoted": HEAD + labs(name="'2027-01-11'"),
    "learner requests written as numbers": HEAD + labs("learnerPod: {cpu: 1, memory: 4e9}\n"),
    "a learner CPU of half a core as a number": HEAD + labs("learnerPod: {cpu: 0.5}\n"),
    "OAuth endpoints with a query (Azure AD B2C)": HEAD + labs() + hub(OIDC) + SECRET,
    "a GitHub team as org:team": HEAD
    + labs()
    + hub(GITHUB + "allowedOrganizations: [my-org, my-org:my-team]\n")
    + SECRET,
    "a secure value nested in the hub's settings": HEAD
    + labs()
    + hub(GITHUB.replace("Iv1.0123456789abcdef", "{secure: v1:aWQ=}") + "allowedUsers: [alice]\n")
    + SECRET,
    "a sha256 digest": HEAD + labs(f"prepullImages: [ubuntu@sha256:{'0a' * 32}]\n"),
    "a host name of 253 characters": HEAD + labs() + hub(host=".".join(["a" * 62] * 4)[:249] + ".edu"),
    # The CronJob controller misses a day whose midnight is skipped only where time.Date puts it after the gap (east
    # of UTC), and only for a schedule that does not fire the day before (tests/test_schedule.py, robfig_next).
    "a daily class in Cairo over its skipped midnight": HEAD
    + labs(
        "classes: [{schedule: '0 9 * * *', duration: 1h, timeZone: Africa/Cairo, "
        "term: {start: '2026-04-20', end: '2026-04-30'}}]\n"
    ),
    "a weekly Cairo class that skips the day of the change": HEAD
    + labs(
        "classes: [{schedule: '0 9 * * fri', duration: 1h, timeZone: Africa/Cairo, "
        "term: {start: '2026-04-03', end: '2026-05-29', skip: ['2026-04-24']}}]\n"
    ),
    "a weekly class in Havana, whose midnight goes forward west of UTC": HEAD
    + labs("classes: [{schedule: '0 9 * * sun', duration: 1h, timeZone: America/Havana}]\n"),
    "two classes of terms that do not overlap": HEAD
    + labs(
        "classes:\n"
        "- {schedule: '0 9 * * mon', duration: 2h, warmSeats: 8, timeZone: Europe/Berlin, "
        "term: {start: '2027-01-11', end: '2027-04-12'}}\n"
        "- {schedule: '30 10 * * mon', duration: 1h, warmSeats: 8, timeZone: Europe/Berlin, "
        "term: {start: '2027-04-19', end: '2027-07-12'}}\n"
    ),
}


@pytest.mark.parametrize("text", GOOD.values(), ids=GOOD.keys())
def test_a_good_stack_file_renders(tmp_path, capsys, text):
    status, lines, written = render_text(tmp_path, text, capsys)
    assert status == 0, lines
    assert (tmp_path / "out" / "resources.json") in written


def test_a_numeric_quantity_reaches_pods_as_kubernetes_reads_it(tmp_path, capsys):
    status, lines, _ = render_text(tmp_path, HEAD + labs("learnerPod: {cpu: 1, memory: 4e9}\n"), capsys)
    assert status == 0, lines
    outputs = json.loads((tmp_path / "out" / "outputs.json").read_text())
    assert (outputs["labs"]["intro"]["learnerCpu"], outputs["labs"]["intro"]["learnerMemory"]) == ("1", "4e9")


# Stack files with several problems, and every line they must print, in order: each cause before its consequences.
SEVERAL = {
    "a misspelt slicesPerGpu before the MPS check its default fails": (
        HEAD + labs("sharing: mps\n").replace("slicesPerGpu", "slicesPerGPU"),
        [
            "gpulab:labs.intro.slicesPerGPU: unknown key; did you mean slicesPerGpu?",
            "gpulab:labs.intro.slicesPerGpu: must be at least 2 with sharing 'mps'",
        ],
    ),
    "two problems of one maxGpus": (
        HEAD
        + labs()
        .replace("[g4dn.xlarge]", "[g4dn.xlarge, g4dn.12xlarge, p4d.24xlarge]")
        .replace("maxGpus: 4", "maxGpus: 6"),
        [
            "gpulab:labs.intro.maxGpus: must be at least 8: p4d.24xlarge has 8 GPUs",
            "gpulab:labs.intro.maxGpus: must be a multiple of 4: g4dn.12xlarge has 4 GPUs",
        ],
    ),
    "two labs without a notebook image, and the hub's namespace taken": (
        HEAD
        + labs(CLASSES)
        + f"    other:\n{LAB}"
        + hub().replace("    notebookImage: quay.io/jupyter/pytorch-notebook:cuda12-a4c8c5467c74\n", "")
        + "    namespace: intro-classes\n",
        [
            "gpulab:jupyterhub.namespace: must be a namespace of its own, not 'intro-classes'",
            "gpulab:labs.intro.notebookImage: required for a lab on the JupyterHub spawn page",
            "gpulab:labs.other.notebookImage: required for a lab on the JupyterHub spawn page",
        ],
    ),
    "Karpenter and the device plugin both in a class namespace": (
        HEAD + labs(CLASSES) + "  gpulab:karpenter: {namespace: intro-classes}\n"
        "  gpulab:nvidiaDevicePlugin: {namespace: intro-classes}\n",
        [
            "gpulab:karpenter.namespace: must be a namespace of its own, not 'intro-classes', which the classes of "
            "lab intro use",
            "gpulab:nvidiaDevicePlugin.namespace: must be a namespace of its own, not 'intro-classes', which "
            "gpulab:karpenter uses",
        ],
    ),
    "two skipped days outside the term": (
        HEAD
        + labs(
            "classes:\n- schedule: '0 9 * * mon'\n  duration: 1h\n"
            "  term: {start: '2027-01-11', end: '2027-02-01', skip: ['2027-03-01', '2027-03-08']}\n"
        ),
        [
            "gpulab:labs.intro.classes[0].term.skip[0]: 2027-03-01 is outside the term",
            "gpulab:labs.intro.classes[0].term.skip[1]: 2027-03-08 is outside the term",
        ],
    ),
    # Every error at once (#50): a wrong key hides no problem of another key, and causes none.
    "a wrong warmSeats beside two classes of one start": (
        HEAD
        + labs(
            "classes:\n- {schedule: '0 9 * * mon', duration: 1h, warmSeats: 0}\n"
            "- {schedule: '0 10 * * *', duration: 1h}\n- {schedule: '0 10 * * *', duration: 1h}\n"
        ),
        [
            "gpulab:labs.intro.classes[0].warmSeats: must be at least 1, got 0",
            "gpulab:labs.intro.classes[2].schedule: starts when classes[1] does",
        ],
    ),
    "a wrong timeZone beside a skipped day the class does not meet on": (
        HEAD
        + labs(
            "classes:\n- schedule: '0 9 * * mon'\n  duration: 1h\n  timeZone: Europe/Berln\n"
            "  term: {start: '2027-01-11', end: '2027-04-30', skip: ['2027-01-12']}\n"
        ),
        [
            "gpulab:labs.intro.classes[0].timeZone: 'Europe/Berln' is not a time zone of the IANA tz database "
            "(2026f); did you mean Europe/Berlin? names look like Europe/Berlin, America/New_York or Etc/UTC",
            "gpulab:labs.intro.classes[0].term.skip[0]: 2027-01-12 is a Tuesday, on which the class does not start; "
            "remove it",
        ],
    ),
    "a wrong warmup beside a start the clock skips": (
        HEAD
        + labs(
            "classes:\n- schedule: '30 2 * * sun'\n  duration: 1h\n  warmup: 7h\n  timeZone: Europe/Berlin\n"
            "  term: {start: '2027-01-11', end: '2027-04-30'}\n"
        ),
        [
            "gpulab:labs.intro.classes[0].warmup: must be between 1m and 6h",
            "gpulab:labs.intro.classes[0].schedule: its start, 02:30 on Sun 2027-03-28 does not exist in "
            "Europe/Berlin: its clocks go forward 1h then (UTC+01:00 to UTC+02:00); choose a start the clock shows "
            "once",
        ],
    ),
    "a wrong duration beside a term without a class day": (
        HEAD
        + labs(
            "classes:\n- schedule: '0 9 * * mon'\n  duration: 1 hour\n"
            "  term: {start: '2027-01-12', end: '2027-01-15'}\n"
        ),
        [
            "gpulab:labs.intro.classes[0].duration: must be hours and minutes such as 45m, 2h or 1h30m, got '1 hour'",
            "gpulab:labs.intro.classes[0].term: has no day on which the class starts (0 9 * * mon)",
        ],
    ),
    "a wrong lab beside the hub's problems with the others": (
        HEAD
        + labs().replace("al2023@v20260714", "al2023@20260714")
        + f"    other:\n{LAB}"
        + f"    exam:\n{LAB}      internet: false\n      onSpawnPage: false\n"
        + hub(subnetIds="[subnet-0a1b2c3d4e5f60001, subnet-0a1b2c3d4e5f60101]").replace(
            "    notebookImage: quay.io/jupyter/pytorch-notebook:cuda12-a4c8c5467c74\n", ""
        )
        + "    namespace: kube-system\n",
        [
            "gpulab:labs.intro.ami: must be an AL2023 AMI alias, al2023@v<YYYYMMDD> or al2023@latest, got "
            "'al2023@20260714'; did you mean al2023@v20260714? (amazon-eks-ami names its releases v<YYYYMMDD>)",
            "gpulab:labs.exam.internet: false closes the internet to the lab's JupyterHub learners: it needs "
            "gpulab:jupyterhub and the lab on its spawn page (onSpawnPage: true)",
            "gpulab:jupyterhub.namespace: must be a namespace of its own, not 'kube-system', which every cluster has",
            "gpulab:jupyterhub.loadBalancer.subnetIds: must be public subnets with scheme internet-facing, but "
            "subnet-0a1b2c3d4e5f60001 is in gpulab:cluster.privateSubnetIds; use the VPC's public subnets, or scheme "
            "internal",
            "gpulab:labs.other.notebookImage: required for a lab on the JupyterHub spawn page, unless "
            "gpulab:jupyterhub.notebookImage gives every lab one (or onSpawnPage: false)",
        ],
    ),
    "a wrong hub beside a lab's gpuIdleTimeout, which needs it": (
        HEAD + labs("gpuIdleTimeout: 30m\n") + hub(host="Lab.example.edu") + "  gpulab:metrics: {}\n",
        [
            "gpulab:jupyterhub.host: must be a lowercase DNS name of labels of at most 63 characters, such as "
            "hub.example.edu, got 'Lab.example.edu'",
        ],
    ),
    "a gpuIdleTimeout without a hub beside the meter's namespace taken": (
        HEAD + labs("gpuIdleTimeout: 30m\n") + "  gpulab:metrics: {namespace: kube-system}\n",
        [
            "gpulab:labs.intro.gpuIdleTimeout: needs gpulab:jupyterhub: the idle-GPU culler is a service of the hub, "
            "which stops learners' servers",
            "gpulab:metrics.namespace: must be a namespace of its own, not 'kube-system', which every cluster has",
        ],
    ),
    "a wrong lab beside another's budget without alerts": (
        HEAD + labs("maxGpus: 0\n").replace("      maxGpus: 4\n", "") + f"    other:\n{LAB}      budget: 100\n",
        [
            "gpulab:labs.intro.maxGpus: must be at least 1, got 0",
            "gpulab:budgetAlerts: required when a lab has a budget (other): the addresses its alerts go to, "
            "{emails: [...], snsTopicArn: ...}",
        ],
    ),
    "a wrong lab beside a GitHub hub without its client secret": (
        HEAD + labs().replace("g4dn.xlarge", "g4dn.xlarg") + hub(GITHUB + "allowedUsers: [alice]\n"),
        [
            "gpulab:labs.intro.instanceTypes[0]: 'g4dn.xlarg' is not an NVIDIA GPU instance type that gpulab knows "
            "(the list is in domain/capacity/instance_types.py); did you mean g4dn.xlarge?",
            "gpulab:jupyterhubClientSecret: required with gpulab:jupyterhub.auth.type github: the OAuth app's client "
            "secret; set it with `pulumi config set --secret gpulab:jupyterhubClientSecret <secret>`",
        ],
    ),
    "a wrong hub host beside its certificate in another region": (
        HEAD + labs() + hub(host="Lab.example.edu", certificateArn=CERTIFICATE.replace("eu-west-1", "us-east-1")),
        [
            "gpulab:jupyterhub.host: must be a lowercase DNS name of labels of at most 63 characters, such as "
            "hub.example.edu, got 'Lab.example.edu'",
            "gpulab:jupyterhub.loadBalancer.certificateArn: must be an ACM certificate in the stack's region "
            "eu-west-1, where the load balancer is, got one in us-east-1: request or import the certificate in "
            "eu-west-1",
        ],
    ),
    "two classes of different terms that overlap on their common day": (
        HEAD
        + labs(
            "classes:\n"
            "- {schedule: '0 9 * * mon', duration: 2h, timeZone: Europe/Berlin, "
            "term: {start: '2027-01-11', end: '2027-04-19'}}\n"
            "- {schedule: '30 10 * * mon', duration: 1h, warmSeats: 4, timeZone: Europe/Berlin, "
            "term: {start: '2027-04-19', end: '2027-07-12'}}\n"
        ),
        [
            "gpulab:labs.intro.classes[1].warmSeats: its warm-up or class overlaps those of classes[0] on Mon "
            "2027-04-19 from 08:10 UTC: together they ask for 12 + 4 warm seats, more than the lab's 12 learner seats "
            "(Karpenter warms seats only within them); warm fewer seats, or move a class",
        ],
    ),
    "three classes, of a term and of none, two zones, that overlap": (
        HEAD
        + labs(
            "classes:\n- {schedule: '0 9 * * mon', duration: 1h, warmSeats: 5}\n"
            "- {schedule: '0 8 * * mon', duration: 3h, warmSeats: 5}\n"
            "- {schedule: '30 9 * * mon', duration: 1h, warmSeats: 5, timeZone: Europe/Lisbon, "
            "term: {start: '2027-03-01', end: '2027-03-31'}}\n"
        ),
        [
            "gpulab:labs.intro.classes[2].warmSeats: its warm-up or class overlaps those of classes[0] and classes[1] "
            "on Mon 2027-03-01 from 09:10 UTC: together they ask for 5 + 5 + 5 warm seats, more than the lab's 12 "
            "learner seats (Karpenter warms seats only within them); warm fewer seats, or move a class",
        ],
    ),
}


@pytest.mark.parametrize(("text", "expected"), SEVERAL.values(), ids=SEVERAL.keys())
def test_one_run_names_every_problem_of_a_stack_causes_first(tmp_path, capsys, text, expected):
    status, lines, written = render_text(tmp_path, text, capsys)
    assert (status, written, len(lines)) == (2, [], len(expected)), lines
    assert all(line.startswith(start) for line, start in zip(lines, expected, strict=True)), lines


def test_user_data_over_16_kb_is_refused_and_under_it_renders(tmp_path, capsys):
    images = ", ".join(f"registry.example.com/course/image-{i}:v1.2.3" for i in range(300))
    status, lines, written = render_text(tmp_path, HEAD + labs(f"prepullImages: [{images}]\n"), capsys)
    assert (status, written) == (2, []), lines
    (line,) = lines
    assert line.startswith("gpulab:labs.intro.prepullImages: the lab's user data would be ")
    assert "passes EC2's 16,384 (16 KB before base64)" in line
    images = ", ".join(f"registry.example.com/course/image-{i}:v1.2.3" for i in range(100))
    status, lines, _ = render_text(tmp_path, HEAD + labs(f"prepullImages: [{images}]\n"), capsys)
    assert status == 0, lines


def test_an_overflowing_hub_secret_names_labs_writes_nothing(tmp_path, capsys, monkeypatch):
    # A hub's Secret holds some kilobytes of values; a limit below them stands in for the 1,500 labs that overflow the
    # real 1 MiB (tests/test_object_size.py), which would take minutes to render. The stack is this file's, with a hub,
    # whatever the repository's stack files hold.
    from render import object_size

    monkeypatch.setattr(object_size, "MAX_DATA_BYTES", 2048)
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(HEAD + labs() + hub())
    out = tmp_path / "out"
    status = render.run.main([str(stack), "--out", str(out)])
    error = capsys.readouterr().err
    if status == 0 and "not rendered" in error:
        pytest.skip(error.splitlines()[0])
    assert (status, sorted(out.rglob("*")) if out.exists() else []) == (2, []), error
    assert error.startswith("gpulab:labs: Secret hub of the jupyterhub release (charts/jupyterhub.yaml)"), error


@pytest.mark.parametrize(
    ("ami", "kubernetes", "warning"),
    [
        (
            "al2023@v20990101",
            "1.36",
            "gpulab:labs.intro.ami: warning: release v20990101 is not one gpulab knows "
            "(domain/upstream/ami_releases.py lists amazon-eks-ami's releases to v2",
        ),
        (
            "al2023@v20260505",
            "1.36",
            "gpulab:labs.intro.ami: warning: release v20260505 has no NVIDIA AMI for amd64 nodes of Kubernetes 1.36 "
            "in amazon-eks-ami's release notes, and `pulumi preview` will fail looking it up; choose another release, "
            "such as v20260714",
        ),
        (
            "al2023@v20261023",
            "1.36",
            "gpulab:labs.intro.ami: warning: release v20261023 is newer than the amazon-eks-ami notes gpulab has read: "
            "only its release page's source-AMI table says it built NVIDIA AMIs for Kubernetes 1.36, and `pulumi "
            "preview` checks that they exist; v20260714 is the newest whose notes list them",
        ),
    ],
)
def test_an_unknown_ami_release_is_warned_of_left_to_preview(tmp_path, capsys, ami, kubernetes, warning):
    text = HEAD.replace('"1.36"', f'"{kubernetes}"') + labs().replace("al2023@v20260714", ami)
    status, lines, _ = render_text(tmp_path, text, capsys)
    assert status == 0, lines
    assert [line for line in lines if line.startswith("gpulab:")] == [lines[0]]
    assert lines[0].startswith(warning), lines


def test_a_release_gpulab_knows_renders_without_a_warning(tmp_path, capsys):
    status, lines, _ = render_text(tmp_path, HEAD + labs(), capsys)
    assert (status, [line for line in lines if line.startswith("gpulab:")]) == (0, [])
