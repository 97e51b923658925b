"""gpulab:metrics: the keys and their one-line messages, what a stack with the meter installs (the workspace, its
scraper and rules, dcgm-exporter and kube-state-metrics, the hub's culler and its role), and that a stack without it
installs none of it."""

import json

import pytest
import yaml

import render.run
from components.jupyterhub import culling, gpu_culler, notices
from components.jupyterhub.hub import HUB_SERVICE_ACCOUNT
from components.metrics import dcgm_exporter, kube_state_metrics
from components.metrics.recording_rules import rule_groups
from components.metrics.scrape import scrape_configuration
from domain.capacity.daemonsets import DCGM_SERVER
from domain.cost.price_book import LIST
from domain.upstream.versions import DCGM_EXPORTER_IMAGE, KUBE_STATE_METRICS_IMAGE
from render import charts, harness
from tests.conftest import BASE, as_cli_config, run_values, stack_values
from tests.support.rendered import load_objects, rendered
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, SYNTHETIC, lab
from tests.test_jupyterhub_config import problems

METERED = "synthetic-metrics"
WORKSPACE = "aws:amp/workspace:Workspace::metrics-workspace"
AMP = ("aws:amp/workspace:Workspace", "aws:amp/scraper:Scraper", "aws:amp/ruleGroupNamespace:RuleGroupNamespace")


def _one(run: harness.Run, token: str) -> harness.Registration:
    (found,) = [r for r in run.resources if r.token == token]
    return found


def metered(**labs) -> dict:
    return stack_values(
        **{
            "gpulab:labs": labs or {"intro": lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE)},
            "gpulab:jupyterhub": HUB,
            "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
            "gpulab:metrics": {},
        }
    )


BAD = {
    "a timeout without the meter": (
        stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, gpuIdleTimeout="30m")}}),
        "gpulab:labs.intro.gpuIdleTimeout: needs gpulab:metrics, which measures each seat's GPU use",
    ),
    "a timeout without a hub": (
        stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, gpuIdleTimeout="30m")}, "gpulab:metrics": {}}),
        "gpulab:labs.intro.gpuIdleTimeout: needs gpulab:jupyterhub: the idle-GPU culler is a service of the hub",
    ),
    "a timeout on an MPS lab": (
        metered(intro=lab(["g4dn.xlarge"], 3, sharing="mps", notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="30m")),
        "gpulab:labs.intro.gpuIdleTimeout: not with sharing: mps: dcgm-exporter 4.5.3-4.8.2 attributes GPU use",
    ),
    "a timeout where no host engine runs": (
        metered(intro=lab(["g4dn.xlarge", "g5g.xlarge"], 2, notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="30m")),
        "gpulab:labs.intro.gpuIdleTimeout: g5g.xlarge nodes run no DCGM host engine",
    ),
    "a timeout of a few samples": (
        metered(intro=lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="2m")),
        "gpulab:labs.intro.gpuIdleTimeout: must be at least 5m: the scraper samples each seat every 30 s",
    ),
    "no private endpoint for the scraper": (
        stack_values(
            **{
                "gpulab:cluster": {**BASE["gpulab:cluster"], "privateEndpoint": False},
                "gpulab:metrics": {},
            }
        ),
        "gpulab:cluster.privateEndpoint: must be true with gpulab:metrics: the AWS managed scraper reaches",
    ),
    "the device plugin's namespace": (
        stack_values(**{"gpulab:metrics": {"namespace": "nvidia-device-plugin"}}),
        "gpulab:metrics.namespace: must be a namespace of its own, not 'nvidia-device-plugin'",
    ),
    "a threshold above 100%": (
        stack_values(**{"gpulab:metrics": {"idleUtilisationPercent": 101}}),
        "gpulab:metrics.idleUtilisationPercent: must be between 1 and 100, got 101",
    ),
    "an unknown key": (
        stack_values(**{"gpulab:metrics": {"idleTimeout": "30m"}}),
        "gpulab:metrics.idleTimeout:",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_metrics_setting_is_one_line_naming_its_key(case):
    values, line = BAD[case]
    found = problems(values)
    assert len(found) == 1 and found[0].startswith(line), found


def test_a_stack_without_the_meter_installs_none_of_it():
    run = run_values(BASE)
    assert not [r.token for r in run.resources if r.type in AMP or "metrics" in r.name or "gpu-culler" in r.name]
    assert "metrics" not in run.outputs
    for share in run.stack.settings.labs["intro"].node_shares:
        assert dcgm_exporter.NAME not in [d.name for d in share.daemonsets]


def test_the_render_writes_a_dashboard_only_with_the_meter(tmp_path):
    render.run.write(run_values(BASE), tmp_path / "without")
    assert not (tmp_path / "without" / render.run.DASHBOARD).exists()
    r = rendered(METERED)
    dashboard = json.loads((r.out / render.run.DASHBOARD).read_text())
    assert dashboard["uid"] == f"gpulab-{r.run.stack.settings.cluster.name}"


def test_workspace_scraper_and_rules_are_built_for_the_cluster():
    r = rendered(METERED)
    settings = r.run.stack.settings
    scraper = _one(r.run, "aws:amp/scraper:Scraper::metrics-scraper").inputs
    eks = scraper["source"]["eks"]
    assert eks["clusterArn"].endswith(f":cluster/{settings.cluster.name}")
    assert eks["subnetIds"] == settings.cluster.private_subnet_ids
    # The cluster's security group, which the discovery tag marks for Karpenter's nodes too.
    groups = {
        t.inputs["resourceId"] for t in r.run.of_type("aws:ec2/tag:Tag") if t.inputs["resourceId"].startswith("sg-")
    }
    assert [*groups] == eks["securityGroupIds"]
    workspace = _one(r.run, WORKSPACE)
    assert scraper["destination"]["amp"]["workspaceArn"].endswith(f":workspace/{workspace.name}-id")
    rules = _one(r.run, "aws:amp/ruleGroupNamespace:RuleGroupNamespace::metrics-rules").inputs
    assert yaml.safe_load(rules["data"]) == rule_groups(settings.labs, settings.metrics, LIST)
    assert yaml.safe_load(scraper["scrapeConfiguration"]) == scrape_configuration(
        settings.metrics, settings.karpenter, yaml.safe_load(rules["data"])
    )
    assert rules["workspaceId"] == f"{workspace.name}-id"
    # AWS's own key: one of the account's would need the scraper to carry IAM roles of its own.
    assert "kmsKeyArn" not in workspace.inputs


# The metered stack, and one with the meter and Karpenter each in a namespace of their own (not kube-system).
MOVED = stack_values(
    **{
        "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3)},
        "gpulab:metrics": {"namespace": "gpu-meter"},
        "gpulab:karpenter": {"namespace": "autoscaler"},
    }
)


def _pods_rendered(stack: str, tmp_path) -> tuple[harness.Run, list[dict]]:
    """The stack's run and every pod template it installs (manifests and charts), with its namespace."""
    if stack == METERED:
        r = rendered(METERED)
        run, files = r.run, r.files()
    else:
        run = run_values(MOVED, "moved-meter")
        render.run.write(run, tmp_path)
        if not_rendered := charts.write(run, tmp_path):
            pytest.skip("; ".join(not_rendered))
        files = {
            str(p): load_objects(p.read_text())
            for folder in ("manifests", "charts")
            for p in (tmp_path / folder).glob("*.yaml")
        }
    workloads = [
        o for objects in files.values() for o in objects if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet")
    ]
    return run, [{"namespace": o["metadata"].get("namespace"), **o["spec"]["template"]} for o in workloads]


@pytest.mark.charts
@pytest.mark.parametrize("stack", [METERED, "moved"])
def test_each_scrape_job_finds_its_pods_where_they_are_deployed(stack, tmp_path):
    """Each job of the scraper the stack renders names a namespace, a pod label and a port name; exactly one workload
    the stack installs (its own manifests or a chart's render) has them all. Moving the meter or Karpenter moves the
    job with it."""
    run, pods = _pods_rendered(stack, tmp_path)
    (scraper,) = [r for r in run.resources if r.token == "aws:amp/scraper:Scraper::metrics-scraper"]
    jobs = yaml.safe_load(scraper.inputs["scrapeConfiguration"])["scrape_configs"]
    settings = run.stack.settings
    where = {job["job_name"]: job["kubernetes_sd_configs"][0]["namespaces"]["names"] for job in jobs}
    assert where == {
        dcgm_exporter.NAME: [settings.metrics.namespace],
        kube_state_metrics.NAME: [settings.metrics.namespace],
        "karpenter": [settings.karpenter.namespace],
    }
    if stack != METERED:
        assert (settings.metrics.namespace, settings.karpenter.namespace) == ("gpu-meter", "autoscaler")
    for job in jobs:
        (keep,) = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
        app, port = keep["regex"].split(";")
        found = [
            pod
            for pod in pods
            if pod["namespace"] in where[job["job_name"]]
            and pod["metadata"].get("labels", {}).get("app.kubernetes.io/name") == app
            and any(p.get("name") == port for c in pod["spec"]["containers"] for p in c.get("ports", []))
        ]
        assert len(found) == 1, (job["job_name"], where[job["job_name"]], app, port)


def test_dcgm_exporter_reads_the_host_engine_gpu_use_per_pod():
    (daemonset,) = [o for o in rendered(METERED).manifests() if o["kind"] == "DaemonSet"]
    spec = daemonset["spec"]["template"]["spec"]
    (exporter,) = spec["containers"]
    env = {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in exporter["env"]}
    assert exporter["image"] == DCGM_EXPORTER_IMAGE
    assert exporter["args"][exporter["args"].index("-r") + 1] == "$(NODE_IP):5555"
    assert (env["NODE_IP"], env["KUBERNETES_VIRTUAL_GPUS"], env["DCGM_EXPORTER_KUBERNETES"]) == (
        "status.hostIP",
        "true",
        "true",
    )
    assert spec["hostPID"] is True
    # From the node's own network, which the lab nodes' host firewall leaves open (host_firewall.py).
    assert (spec["hostNetwork"], spec["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    # Only where the dcgm-server runs: its own node affinity, on the lab nodes (the GPU taint tolerated).
    assert spec["affinity"]["nodeAffinity"] == DCGM_SERVER.pod_spec["affinity"]["nodeAffinity"]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    counters = [line.split(",")[0] for line in dcgm_exporter.COUNTERS.splitlines()]
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"} <= set(counters)


def _grants_to(objects: list[dict], namespace: str, account: str) -> list[dict]:
    """Every rule of every Role and ClusterRole bound to the service account `account` of `namespace`."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    found = []
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        if subject in binding["subjects"]:
            ref = binding["roleRef"]
            scope = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
            found.extend(roles[(ref["kind"], scope, ref["name"])]["rules"])
    return found


def test_dcgm_exporter_may_list_and_watch_pods_and_nothing_else():
    # Its pod informer (NVIDIA/dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go:109-140) needs
    # the account's token and list and watch on pods at cluster scope: without them every pod's UID is "", and every
    # seat reads 0 (kubernetes.go:920-946, pidmapper.go:83-88, kubernetes.go:271-279; docs/metrics.md).
    r = rendered(METERED)
    objects = r.manifests()
    namespace = r.run.stack.settings.metrics.namespace
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    account = by_kind[("ServiceAccount", dcgm_exporter.NAME)]
    assert (account["metadata"]["namespace"], account["automountServiceAccountToken"]) == (namespace, True)
    pod = by_kind[("DaemonSet", dcgm_exporter.NAME)]["spec"]["template"]["spec"]
    assert (pod["serviceAccountName"], pod["automountServiceAccountToken"]) == (dcgm_exporter.NAME, True)
    assert _grants_to(objects, namespace, dcgm_exporter.NAME) == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
    ]
    assert by_kind[("ClusterRoleBinding", dcgm_exporter.READ_PODS)] == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": dcgm_exporter.READ_PODS, "labels": {"app.kubernetes.io/name": dcgm_exporter.NAME}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": dcgm_exporter.READ_PODS},
        "subjects": [{"kind": "ServiceAccount", "name": dcgm_exporter.NAME, "namespace": namespace}],
    }
    # What gpulab kept of its pod-resources, host-PID and node settings, which the per-pod path needs too.
    (exporter,) = pod["containers"]
    env = {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in exporter["env"]}
    assert (env["NODE_NAME"], env["KUBERNETES_VIRTUAL_GPUS"], pod["hostPID"]) == ("spec.nodeName", "true", True)
    assert {"name": "pod-gpu-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}} in pod["volumes"]


def test_kube_state_metrics_labels_lab_learner_reads_pods_only():
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendered(METERED).manifests()}
    deployment = objects[("Deployment", kube_state_metrics.NAME)]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == KUBE_STATE_METRICS_IMAGE
    assert "--metric-opt-in-list=kube_pod_nodeselectors" in container["args"]
    assert objects[("ClusterRole", kube_state_metrics.NAME)]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
    ]


def test_culler_runs_for_timed_labs_with_a_query_only_role():
    r = rendered(METERED)
    values = r.release("jupyterhub").values["hub"]
    command = values["services"][culling.SERVICE]["command"]
    assert command[:2] == ["python3", f"{culling.FILES}/gpu_culler.py"]
    # The command is one the culler's own parser takes, for the one lab with a timeout.
    labs = [gpu_culler.lab_setting(a.removeprefix("--lab=")) for a in command[2:] if a.startswith("--lab=")]
    assert labs == [gpu_culler.Lab("culled", 10, "20m")]
    assert values["loadRoles"][culling.SERVICE] == {"scopes": culling.SCOPES, "services": [culling.SERVICE]}
    assert values["extraFiles"]["gpu-culler"]["stringData"] == culling.CULLER_SOURCE.read_text()
    association = _one(r.run, "aws:eks/podIdentityAssociation:PodIdentityAssociation::jupyterhub-gpu-culler").inputs
    assert (association["namespace"], association["serviceAccount"]) == ("jupyterhub", HUB_SERVICE_ACCOUNT)
    policy = json.loads(_one(r.run, "aws:iam/rolePolicy:RolePolicy::jupyterhub-gpu-culler").inputs["policy"])
    (statement,) = policy["Statement"]
    workspace = _one(r.run, WORKSPACE)
    assert (statement["Action"], statement["Resource"]) == (
        "aps:QueryMetrics",
        f"arn:aws:aps:{r.run.stack.region}:{harness.ACCOUNT_ID}:workspace/{workspace.name}-id",
    )


def test_culler_and_proxy_run_in_hub_pod_as_identity_account():
    r = rendered(METERED)
    objects = {(o["kind"], o["metadata"]["name"]): o for o in r.chart("jupyterhub")}
    assert ("ServiceAccount", HUB_SERVICE_ACCOUNT) in objects
    pod = objects[("Deployment", "hub")]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == HUB_SERVICE_ACCOUNT
    assert [c["name"] for c in pod["containers"]] == ["hub", "sigv4-proxy"]
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    pages = (f"{notices.TEMPLATES}/{page}" for page in ("home.html", "not_running.html"))
    assert {f"{culling.FILES}/gpu_culler.py", *pages} <= mounts


def test_culler_role_trusts_its_associations_account():
    # In a namespace of the hub's own: a trust that named another namespace than the association's (the default
    # jupyterhub, say) would leave the culler without credentials, and only this stack would show it.
    values = metered(intro=lab(["g4dn.xlarge"], 3, notebookImage=NOTEBOOK_IMAGE, gpuIdleTimeout="30m"))
    values["gpulab:jupyterhub"] = {**HUB, "namespace": "learners"}
    run = run_values(values)
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "jupyterhub-gpu-culler").inputs
    role = run.one("aws:iam/role:Role", "jupyterhub-gpu-culler")
    release = run.one("kubernetes:helm.sh/v3:Release", "jupyterhub").inputs
    assert association["namespace"] == release["namespace"] == "learners"
    assert association["serviceAccount"] == HUB_SERVICE_ACCOUNT
    assert association["roleArn"].startswith("arn:aws:iam::123456789012:role/jupyterhub-gpu-culler-")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {
        "aws:RequestTag/eks-cluster-arn": "arn:aws:eks:eu-west-1:123456789012:cluster/lab-test",
        "aws:RequestTag/kubernetes-namespace": association["namespace"],
        "aws:RequestTag/kubernetes-service-account": association["serviceAccount"],
    }
    # The conditions read the session tags, which an association can turn off.
    assert association["disableSessionTags"] is False


def test_a_hub_without_a_culled_lab_gets_no_culler():
    run = run_values(metered())
    values = run.one("kubernetes:helm.sh/v3:Release", "jupyterhub").inputs["values"]
    assert "services" not in values["hub"]
    assert not [r for r in run.resources if "gpu-culler" in r.name]


def test_the_synthetic_stack_has_what_these_tests_need():
    labs = SYNTHETIC["metrics"]["gpulab:labs"]
    assert [name for name, lab_values in labs.items() if "gpuIdleTimeout" in lab_values] == ["culled"]
    assert as_cli_config(SYNTHETIC["metrics"])["gpulab:metrics"]
