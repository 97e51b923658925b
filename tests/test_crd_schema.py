"""The CRD validator itself: it must accept valid Karpenter objects and reject each kind of invalid one.

The manifests are hand-written here on purpose, so that these tests prove the validator, not the project's renderers.
"""

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.crd_schema import crd_problems, declared_rules, requires_upstream, schema_problems, validator_gaps

Manifest = dict[str, Any]
KeyPath = tuple[str | int, ...]


def nodepool() -> Manifest:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "gpu-g5"},
        "spec": {
            "template": {
                "metadata": {"labels": {"gpulab.io/pool": "gpu-g5"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]},
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1},
                    ],
                    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                    "expireAfter": "720h",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "5m",
                "budgets": [
                    {"nodes": "10%"},
                    {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Underutilized"]},
                ],
            },
            "limits": {"cpu": "256", "memory": "1024Gi", "nvidia.com/gpu": 8},
            "weight": 10,
        },
    }


def ec2nodeclass() -> Manifest:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "gpu"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@v20260714"}],
            "role": "KarpenterNodeRole-gpulab",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "gpulab"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "gpulab"}}],
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {"volumeSize": "200Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True},
                },
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}},
            ],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "kubelet": {"maxPods": 110},
            "userData": "#!/bin/bash\necho gpulab\n",
            "tags": {"gpulab.io/stack": "dev", "Name": "gpulab-gpu"},
        },
    }


def nodeoverlay() -> Manifest:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "g4dn-12xlarge-gpus"},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g4dn.12xlarge"]}
            ],
            "capacity": {"nvidia.com/gpu": "3"},
            "weight": 10,
        },
    }


_DELETE = object()


def edited(build: Callable[[], Manifest], *edits: tuple[KeyPath, Any]) -> Manifest:
    """A fresh manifest with each (path, value) applied; _DELETE removes the key, index == len appends."""
    manifest = build()
    for path, value in edits:
        parent: Any = manifest
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if value is _DELETE:
            del parent[last]
        elif isinstance(parent, list) and last == len(parent):
            parent.append(value)
        else:
            parent[last] = value
    return manifest


def ec2nodeclass_full() -> Manifest:
    """Reaches the EC2NodeClass rules the minimal one leaves alone (kubelet maps, interfaces, placement, ...)."""
    return edited(
        ec2nodeclass,
        (
            ("spec", "kubelet"),
            {
                "maxPods": 110,
                "evictionHard": {"memory.available": "5%"},
                "evictionSoft": {"memory.available": "10%"},
                "evictionSoftGracePeriod": {"memory.available": "1m"},
                "kubeReserved": {"cpu": "100m", "memory": "1Gi"},
                "systemReserved": {"cpu": "100m", "ephemeral-storage": "1Gi"},
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
            },
        ),
        (
            ("spec", "networkInterfaces"),
            [
                {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
            ],
        ),
        (("spec", "placementGroupSelector"), {"name": "gpulab"}),
        (("spec", "connectionTracking"), {"tcpEstablishedTimeout": 3600}),
        (("spec", "capacityReservationSelectorTerms"), [{"id": "cr-0123456789abcdef0"}]),
    )


REQUIREMENTS: KeyPath = ("spec", "template", "spec", "requirements")


@requires_upstream
@pytest.mark.parametrize("build", [nodepool, ec2nodeclass, ec2nodeclass_full, nodeoverlay])
def test_valid_karpenter_object_has_no_problems(build: Callable[[], Manifest]) -> None:
    assert crd_problems(build()) == []


INVALID = [
    pytest.param(
        edited(nodepool, (("spec", "template", "spec", "nodeClassRef", "apiVersion"), "karpenter.k8s.aws/v1beta1")),
        r"spec\.template\.spec\.nodeClassRef\.apiVersion: unknown field",
        id="nodepool-v1beta1-nodeClassRef.apiVersion-is-an-unknown-field",
    ),
    pytest.param(
        edited(nodepool, (("spec", "disruption", "consolidationPolicy"), "WhenUnderutilized")),
        r"spec\.disruption\.consolidationPolicy: 'WhenUnderutilized' is not one of .*'WhenEmptyOrUnderutilized'.*",
        id="nodepool-v1beta1-consolidationPolicy-WhenUnderutilized-is-not-in-the-v1-enum",
    ),
    pytest.param(
        edited(nodepool, (("spec", "disruption", "consolidateAfter"), _DELETE)),
        r"spec\.disruption\.consolidateAfter: required field is missing",
        id="nodepool-disruption-requires-consolidateAfter",
    ),
    pytest.param(
        edited(nodepool, (("spec", "disruption", "consolidateAfter"), "5m\n")),
        r"spec\.disruption\.consolidateAfter: '5m\\n' does not match .*",
        id="nodepool-patterns-match-like-go-re2-so-a-trailing-newline-fails",
    ),
    pytest.param(
        edited(nodepool, (("spec", "template", "spec", "expireAfter"), "30d")),
        r"spec\.template\.spec\.expireAfter: '30d' does not match .*",
        id="nodepool-expireAfter-has-no-days-unit",
    ),
    pytest.param(
        edited(nodepool, ((*REQUIREMENTS, 1, "values"), [])),
        r"spec\.template\.spec\.requirements: requirements with operator 'In' must have a value defined",
        id="nodepool-In-requirement-with-no-values-fails-cel",
    ),
    pytest.param(
        edited(nodepool, ((*REQUIREMENTS, 4), {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]})),
        r'spec\.template\.spec\.requirements\[4\]\.key: label "karpenter\.sh/nodepool" is restricted',
        id="nodepool-requirement-on-karpenter.sh/nodepool-fails-cel",
    ),
    pytest.param(
        edited(nodepool, ((*REQUIREMENTS, 4), {"key": "karpenter.k8s.aws/foo", "operator": "Exists"})),
        r'spec\.template\.spec\.requirements\[4\]\.key: label domain "karpenter\.k8s\.aws" is restricted',
        id="nodepool-requirement-on-unknown-karpenter.k8s.aws-key-fails-cel-find-endsWith",
    ),
    pytest.param(
        edited(nodepool, (("spec", "template", "metadata", "labels", "karpenter.k8s.aws/foo"), "bar")),
        r'spec\.template\.metadata\.labels: label domain "karpenter\.k8s\.aws" is restricted',
        id="nodepool-template-label-in-karpenter.k8s.aws-domain-fails-cel",
    ),
    pytest.param(
        edited(nodepool, ((*REQUIREMENTS, 0, "values"), ["many"])),
        r"spec\.template\.spec\.requirements: CEL rule \".*int\(x\.values\[0\]\).*\" failed to evaluate: "
        r"return error for overflow: invalid literal for int\(\) .*'many'.*",
        id="nodepool-Gt-requirement-with-non-integer-value-errors-in-cel-and-is-reported",
    ),
    pytest.param(
        edited(nodepool, ((*REQUIREMENTS, 3, "minValues"), 2)),
        r"spec\.template\.spec\.requirements: requirements with 'minValues' must have at least that many values .*",
        id="nodepool-minValues-above-value-count-fails-cel",
    ),
    pytest.param(
        edited(nodepool, (("spec", "disruption", "budgets", 1, "duration"), _DELETE)),
        r"spec\.disruption\.budgets: 'schedule' must be set with 'duration'",
        id="nodepool-budget-schedule-without-duration-fails-cel",
    ),
    pytest.param(
        edited(nodepool, (("spec", "disruption", "budgets", 1, "reasons"), ["Empty", "Empty"])),
        r"spec\.disruption\.budgets\[1\]\.reasons\[1\]: duplicate of .*reasons\[0\] \(x-kubernetes-list-type: set\)",
        id="nodepool-list-type-set-rejects-duplicates",
    ),
    pytest.param(
        edited(nodepool, (("spec", "weight"), 101)),
        r"spec\.weight: 101 is greater than the maximum of 100",
        id="nodepool-weight-above-100",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "amiSelectorTerms", 0, "alias"), "al2023")),
        r"spec\.amiSelectorTerms\[0\]\.alias: 'alias' is improperly formatted, must match the format 'family@version'",
        id="ec2nodeclass-alias-without-version-fails-cel-matches",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "amiSelectorTerms", 0, "alias"), "windows2022@v1")),
        r"spec\.amiSelectorTerms\[0\]\.alias: windows families may only specify version 'latest'",
        id="ec2nodeclass-windows-alias-with-pinned-version-fails-cel-split",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "amiSelectorTerms", 1), {"tags": {"gpulab.io/ami": "gpu"}})),
        r"spec\.amiSelectorTerms: 'alias' is mutually exclusive, cannot be set with a combination of other "
        r"amiSelectorTerms",
        id="ec2nodeclass-alias-with-a-second-term-fails-cel",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "amiFamily"), "Bottlerocket")),
        r"spec: if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        id="ec2nodeclass-amiFamily-contradicting-the-alias-fails-cel-find",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "blockDeviceMappings", 1, "rootVolume"), True)),
        r"spec\.blockDeviceMappings: must have only one blockDeviceMappings with rootVolume",
        id="ec2nodeclass-two-root-volumes-fail-cel-filter",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "instanceProfile"), "gpulab-node")),
        r"spec: must specify exactly one of \['role', 'instanceProfile'\]",
        id="ec2nodeclass-role-and-instanceProfile-are-exclusive",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "tags", "kubernetes.io/cluster/gpulab"), "owned")),
        r"spec\.tags: tag contains a restricted tag matching kubernetes\.io/cluster/",
        id="ec2nodeclass-cluster-ownership-tag-is-restricted",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "kubelet", "maxPods"), "110")),
        r"spec\.kubelet\.maxPods: '110' is not of type 'integer'",
        id="ec2nodeclass-maxPods-must-be-an-integer",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "metadataOptions", "httpPutResponseHopLimit"), 2**31)),
        r"spec\.metadataOptions\.httpPutResponseHopLimit: 2147483648 is greater than the maximum of 64",
        id="ec2nodeclass-hop-limit-above-64",
    ),
    pytest.param(
        edited(ec2nodeclass, (("spec", "subnetSelectorTerms"), _DELETE)),
        r"spec\.subnetSelectorTerms: required field is missing",
        id="ec2nodeclass-requires-subnetSelectorTerms",
    ),
    pytest.param(
        edited(ec2nodeclass_full, (("spec", "kubelet", "imageGCLowThresholdPercent"), 90)),
        r"spec\.kubelet: imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        id="ec2nodeclass-image-gc-thresholds-must-be-ordered",
    ),
    pytest.param(
        edited(ec2nodeclass_full, (("spec", "kubelet", "kubeReserved", "cpu"), "-1")),
        r"spec\.kubelet\.kubeReserved: kubeReserved value cannot be a negative resource quantity",
        id="ec2nodeclass-kubeReserved-cannot-be-negative",
    ),
    pytest.param(
        edited(ec2nodeclass_full, (("spec", "networkInterfaces", 0, "interfaceType"), "efa-only")),
        r"spec\.networkInterfaces: networkInterfaces must include a primary interface with interfaceType='interface'",
        id="ec2nodeclass-network-interfaces-need-a-primary-interface",
    ),
    pytest.param(
        edited(nodeoverlay, (("spec", "capacity", "cpu"), "4")),
        r"spec\.capacity: invalid resource restricted",
        id="nodeoverlay-cannot-override-cpu-capacity",
    ),
    pytest.param(
        edited(nodeoverlay, (("spec", "price"), "1.5"), (("spec", "priceAdjustment"), "-10%")),
        r"spec: cannot set both 'price' and 'priceAdjustment'",
        id="nodeoverlay-price-and-priceAdjustment-are-exclusive",
    ),
    pytest.param(
        edited(nodeoverlay, (("spec", "capacity", "nvidia.com/gpu"), "three")),
        r"spec\.capacity\[nvidia\.com/gpu\]: 'three' does not match .*",
        id="nodeoverlay-capacity-must-be-a-quantity",
    ),
    pytest.param(
        edited(nodeoverlay, (("spec", "capacity", "nvidia.com/gpu"), 3.5)),
        r"spec\.capacity\[nvidia\.com/gpu\]: 3\.5 is not of type 'integer', 'string'",
        id="nodeoverlay-int-or-string-capacity-rejects-a-float",
    ),
    pytest.param(
        edited(
            nodeoverlay, (("spec", "requirements", 0, "operator"), "NotIn"), (("spec", "requirements", 0, "values"), [])
        ),
        r"spec\.requirements: requirements with operator 'NotIn' must have a value defined",
        id="nodeoverlay-NotIn-requirement-with-no-values-fails-cel",
    ),
    pytest.param(
        edited(nodepool, (("metadata", "name"), _DELETE)),
        r"metadata\.name: required field is missing",
        id="metadata-name-is-required",
    ),
    pytest.param(
        edited(nodepool, (("metadata", "name"), "GPU_pool")),
        r"metadata\.name: 'GPU_pool' is not a lowercase RFC 1123 subdomain",
        id="metadata-name-must-be-a-dns-subdomain",
    ),
    pytest.param(
        edited(nodepool, (("specification",), {})),
        r"specification: unknown field",
        id="unknown-top-level-field",
    ),
    pytest.param(
        edited(nodepool, (("apiVersion",), "karpenter.sh/v1beta1")),
        r"apiVersion/kind: no CRD in .* defines karpenter\.sh/v1beta1 NodePool .*",
        id="removed-api-version-has-no-crd",
    ),
]


@requires_upstream
@pytest.mark.parametrize(("manifest", "expected"), INVALID)
def test_each_invalid_edit_yields_exactly_its_own_problem(manifest: Manifest, expected: str) -> None:
    problems = crd_problems(manifest)
    assert len(problems) == 1, problems
    assert re.fullmatch(expected, problems[0]), problems[0]


@requires_upstream
def test_every_cel_rule_in_the_upstream_crds_compiles() -> None:
    assert validator_gaps() == []


@requires_upstream
def test_rules_are_collected_from_all_five_crd_files() -> None:
    sources = {source for source, _, _ in declared_rules()}
    assert sources == {
        "autoscaling.x-k8s.io_capacitybuffers.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.sh_nodeoverlays.yaml",
        "karpenter.sh_nodepools.yaml",
    }


@requires_upstream
def test_validating_a_manifest_does_not_modify_it() -> None:
    manifest = nodepool()
    crd_problems(manifest)
    assert manifest == nodepool()


# The rest needs no upstream data: it checks the validator on ad-hoc schemas.
# The Kubernetes CEL extensions implemented for cel-python, checked against cel-go's documented results.
def _string_rule(rule: str) -> dict[str, Any]:
    return {"type": "string", "x-kubernetes-validations": [{"rule": rule, "message": "rule is false"}]}


@pytest.mark.parametrize(
    "rule",
    [
        "self.find('[0-9]+') == '123'",
        "self.find('^([^/]+)') == 'abc 123'",
        "self.find('x+') == ''",
        "self.findAll('[0-9]') == ['1', '2', '3']",
        "self.findAll('[0-9]', 2) == ['1', '2']",
        "self.findAll('[0-9]', 0) == []",
        "self.split(' ') == ['abc', '123']",
        "self.split('@') == ['abc 123']",
        "self.split('') == ['a', 'b', 'c', ' ', '1', '2', '3']",
        "self.split(' ', 0) == []",
        "self.split('', 2) == ['a', 'bc 123']",
        "'a,b,c'.split(',', 2) == ['a', 'b,c']",
        "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
        "'ABC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC'",
        "' x '.trim() == 'x'",
        "'aaa'.replace('a', 'b') == 'bbb' && 'aaa'.replace('a', 'b', 1) == 'baa'",
        "self.matches('^abc') && self.startsWith('abc') && self.endsWith('123') && self.contains('c 1')",
        "int(self.split(' ')[1]) == 123 && size(self) == 7 && self.size() == 7",
        "dyn(self) == self",
    ],
)
def test_kubernetes_cel_string_extensions_match_cel_go(rule: str) -> None:
    assert schema_problems(_string_rule(rule), "abc 123") == []


def test_a_rule_with_an_unsupported_function_is_a_validator_gap() -> None:
    assert schema_problems(_string_rule("self.isQuantity()"), "1Gi") == [
        "spec: CEL rule 'self.isQuantity()' cannot be checked (validator gap: unsupported function(s) isQuantity)"
    ]


def test_a_rule_that_does_not_parse_is_a_validator_gap() -> None:
    (problem,) = schema_problems(_string_rule("self ==="), "x")
    assert re.fullmatch(
        r"spec: CEL rule 'self ===' cannot be checked \(validator gap: parse error: .*\)", problem, re.S
    )


def test_transition_rules_are_skipped_on_create() -> None:
    assert schema_problems(_string_rule("self == oldSelf"), "x") == []


def test_rules_run_only_where_their_node_is_present() -> None:
    schema = {"type": "object", "properties": {"a": _string_rule("false")}}
    assert schema_problems(schema, {}) == []
    assert schema_problems(schema, {"a": "x"}) == ["spec.a: rule is false"]


def test_objects_with_properties_are_closed_unless_preserved() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert schema_problems(closed, {"b": "x"}) == ["spec.b: unknown field"]
    assert schema_problems({**closed, "x-kubernetes-preserve-unknown-fields": True}, {"b": "x"}) == []


def test_nullable_accepts_null() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "nullable": True}}}
    assert schema_problems(schema, {"a": None}) == []
    assert schema_problems({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": None}) == [
        "spec.a: None is not of type 'string'"
    ]


def test_rule_that_errors_at_runtime_is_reported_not_ignored() -> None:
    untyped = {"x-kubernetes-validations": [{"rule": "self.find('x') == ''", "message": "rule is false"}]}
    (problem,) = schema_problems(untyped, 5)
    assert re.fullmatch(r"spec: CEL rule \"self\.find\('x'\) == ''\" failed to evaluate: no such overload.*", problem)
