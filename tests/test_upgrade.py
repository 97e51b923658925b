"""A Kubernetes version change is an update in place of the running cluster, and the labs' nodes then drift under their
budgets rather than all going at once (docs/upgrading.md).

Pulumi mocks run the program; they compute no diff, so these tests hold what the program sends at two consecutive
minor versions, and upstream facts make that an update:
- pulumi-aws 7.51.1, aws.eks.Cluster's `version` (pulumi_aws/eks/cluster.py in the installed SDK): "The value must be
  configured and increased to upgrade the version when desired. Downgrades are not supported by EKS."
- the Terraform schema pulumi-aws bridges: hashicorp/terraform-provider-aws internal/service/eks/cluster.go (commit
  00555dc5b38f92abbfa230badea0ed0754cea81e): `version` is Optional and Computed, not ForceNew (`name` and `role_arn`
  are), and resourceClusterUpdate calls UpdateClusterVersion ("Do any version update first"); node_group.go (commit
  012e0a32f0686212f447447fd3d81c3d0ce256ad): the node group's `version` the same, updated by UpdateNodegroupVersion.
- pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts (main 7bf0c1b): `version: args.version` into aws.eks.Cluster, whose
  options set only ignoreChanges; nothing under nodejs/eks sets replaceOnChanges or deleteBeforeReplace.
So Pulumi replaces none of them as long as their names (ForceNew) stay and no option of the program's asks for a
replacement: what the tests below hold, with the node role, the interruption queue and the Karpenter objects unchanged,
so that Karpenter replaces the labs' nodes by AMI drift under the NodePools' budgets.
"""

import json

import pytest
from pulumi.runtime.proto import resource_pb2

from domain.upstream.versions import ADDON_VERSIONS, KUBE_PROXY_ADDON_VERSIONS
from render import harness
from render.run import read_stack_file
from reports.version_change import minor
from tests.conftest import ROOT, STACK_FILES, run_config
from tests.support.chart_values import leaves

CLUSTER = "eks:index:Cluster"
# What stays as it is: the nodes' role, the interruption queue, and each lab's Karpenter objects.
KEPT = (
    "aws:iam/role:Role",
    "aws:sqs/queue:Queue",
    "kubernetes:karpenter.sh/v1:NodePool",
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
)
# The leaves a minor version may change: the version itself, and what gpulab pins per minor version (the kube-proxy
# add-on, the user-scheduler's kube-scheduler image, any add-on pinned per version).
VERSION_KEYS = {"version", "addonVersion", "tag"}
# And the rules of the user-scheduler's ClusterRole, which are its kube-scheduler version's
# (components/jupyterhub/user_scheduler.py extra_permissions): an update of the role, its name kept.
FOLLOWS_VERSION = {("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole::jupyterhub-user-scheduler", ("rules",))}


# The two newest minor versions gpulab pins, which are one apart.
OLDER, NEWER = sorted(KUBE_PROXY_ADDON_VERSIONS, key=minor)[-2:]


# The example stacks, whatever their names: each stack file beside Pulumi.yaml.
STACKS = [path.name.split(".")[1] for path in STACK_FILES]


def at_version(stack: str, version: str) -> harness.Run:
    config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    cluster = json.loads(config["gpulab:cluster"])
    config["gpulab:cluster"] = json.dumps({**cluster, "kubernetesVersion": version})
    return run_config(stack, config)


def changed(before: harness.Registration, after: harness.Registration) -> set[tuple]:
    """The input paths whose value differs (a list is one value)."""
    old, new = dict(leaves(before.inputs)), dict(leaves(after.inputs))
    return {path for path in old.keys() | new.keys() if old.get(path) != new.get(path)}


@pytest.fixture(scope="module", params=STACKS)
def runs(request) -> tuple[harness.Run, harness.Run]:
    """Each example stack at the older and at the newer version."""
    return at_version(request.param, OLDER), at_version(request.param, NEWER)


def by_token(run: harness.Run) -> dict[str, harness.Registration]:
    return {r.token: r for r in run.resources}


def test_the_two_versions_are_one_minor_apart():
    assert minor(NEWER) == minor(OLDER) + 1


def test_cluster_keeps_its_name_only_version_inputs_change(runs):
    before, after = map(by_token, runs)
    (token,) = [t for t in after if t.startswith(f"{CLUSTER}::")]
    assert token in before and after[token].inputs["name"] == before[token].inputs["name"]
    paths = changed(before[token], after[token])
    # The version and the add-ons pulumi-eks installs at a version pinned per minor version, nothing else.
    assert {("version",), ("kubeProxyAddonOptions", "version")} <= paths
    assert {p for p in paths if p[-1] not in VERSION_KEYS} == set()
    assert after[token].inputs["version"] == NEWER
    assert after[token].inputs["kubeProxyAddonOptions"]["version"] == KUBE_PROXY_ADDON_VERSIONS[NEWER]
    assert after[token].replacement_options == ()


def test_no_resource_comes_or_goes_and_changes_are_versions(runs):
    before, after = map(by_token, runs)
    assert set(before) == set(after)
    updated = {token: paths for token in after if (paths := changed(before[token], after[token]))}
    # The cluster and the system node group at least; nothing whose change is not a version.
    assert {t.split("::")[0] for t in updated} >= {CLUSTER, "aws:eks/nodeGroup:NodeGroup"}
    assert {(t, p) for t, paths in updated.items() for p in paths if p[-1] not in VERSION_KEYS} <= FOLLOWS_VERSION
    assert {t: after[t].replacement_options for t in updated if after[t].replacement_options} == {}


def test_every_addon_moves_to_the_build_pinned_for_the_new_version(runs):
    # What the preview's `~ update` lines show of the add-ons: each at its build for the version, kept in place.
    for run, version in zip(runs, (OLDER, NEWER), strict=True):
        eks = next(r for r in run.resources if r.token.startswith(f"{CLUSTER}::")).inputs
        found = {a.inputs["addonName"]: a.inputs["addonVersion"] for a in run.of_type("aws:eks/addon:Addon")}
        found |= {"kube-proxy": eks["kubeProxyAddonOptions"]["version"]}
        found |= {"vpc-cni": eks["vpcCniOptions"]["addonVersion"]}
        assert found == {name: ADDON_VERSIONS[name][version] for name in found}
    after = by_token(runs[1])
    addons = [t for t in after if t.startswith("aws:eks/addon:Addon::")]
    assert addons and {t: after[t].replacement_options for t in addons if after[t].replacement_options} == {}


def test_node_role_queue_and_karpenter_objects_stay_the_same(runs):
    before, after = map(by_token, runs)
    kept = [t for t in after if t.split("::")[0] in KEPT]
    assert {t.split("::")[0] for t in kept} == set(KEPT)
    assert {t: paths for t in kept if (paths := changed(before[t], after[t]))} == {}
    assert {t: after[t].replacement_options for t in kept if after[t].replacement_options} == {}


def test_outputs_naming_role_queue_and_cluster_stay(runs):
    older, newer = runs
    for key in ("clusterName", "nodeRoleName", "nodeRoleArn", "interruptionQueueName"):
        assert newer.outputs[key] == older.outputs[key], key


@pytest.mark.parametrize("stack", STACKS)
def test_labs_ami_is_looked_up_for_the_new_version(stack):
    def amis(version: str) -> set[str]:
        run = at_version(stack, version)
        return {i.args["name"] for i in run.invokes if i.token == "aws:ssm/getParameter:getParameter"}

    before, after = amis(OLDER), amis(NEWER)
    assert before and after == {name.replace(OLDER, NEWER) for name in before}
    assert all(f"/optimized-ami/{NEWER}/" in name for name in after)


def test_the_harness_records_options_that_force_replacement():
    monitor = harness._Monitor(harness._Mocks("eu-west-1"))
    request = resource_pb2.RegisterResourceRequest(
        type="aws:eks/cluster:Cluster", name="c", replaceOnChanges=["version"], deleteBeforeReplace=True
    )
    monitor._record(request, {})
    (recorded,) = monitor.registrations
    assert recorded.replacement_options == ("replaceOnChanges: version", "deleteBeforeReplace")
