"""Every object name and label a stack renders is one Kubernetes accepts, for the longest names gpulab accepts.

Lab names are DNS-1123 labels of at most 63 characters because a lab's name is a label value: the nodes of its NodePool
carry it (gpulab.dev/lab, nvidia.com/device-plugin.config, and Karpenter's own karpenter.sh/nodepool and
karpenter.k8s.aws/ec2nodeclass). Names built from it (`<lab>-smoke`, `<lab>-<n>gpu`) are object names, which may be
DNS-1123 subdomains of 253; a label never carries them. The checks below walk everything a run renders, so that an
object or a label added later is checked too.

Limits: k8s.io/apimachinery pkg/util/validation/validation.go (DNS-1123 label 63, subdomain 253, label value and
qualified name 63, ConfigMap key 253); Namespace and Service names are DNS labels (kubernetes
pkg/apis/core/validation/validation.go); Helm release names at most 53 (helm pkg/chartutil/validate_name.go);
CronJob names at most 52, so that the names of its Jobs fit (components/karpenter/class_seats_manifests.py).
"""

import re
from collections.abc import Iterator
from typing import Any

import pytest

from components.karpenter.class_seats_manifests import CRONJOB_NAME_LIMIT
from tests.conftest import BASE, STACK_FILES, run_stack_file, run_values, stack_values
from tests.support.synthetic import SYNTHETIC, lab

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")

# The longest lab name and cluster name gpulab accepts, on a lab that renders every object a lab can have.
LONGEST_LAB = "l" + "o" * 61 + "g"
LONGEST = stack_values(
    **{
        "gpulab:cluster": {**BASE["gpulab:cluster"], "name": "c" + "l" * 78 + "r"},
        "gpulab:labs": {
            LONGEST_LAB: lab(
                ["g5.xlarge", "g5.12xlarge", "g5.48xlarge"],
                # Two-digit replicas, and as many learners as a g5.48xlarge's 345 pods hold beside its DaemonSets.
                42,
                max_gpus=8,
                smokeTest=True,
                classes=[{"schedule": "0 9 * * mon-fri", "duration": "2h"}],
            ),
            "a": lab(["g4dn.xlarge"], 1, smokeTest=True),
        },
    }
)


def label_value_problem(value: Any) -> str | None:
    if not isinstance(value, str) or (value and (len(value) > 63 or not LABEL_NAME.fullmatch(value))):
        return f"{value!r} is not a label value (at most 63 of [-A-Za-z0-9_.], alphanumeric at both ends)"
    return None


def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"{key!r}: the prefix is not a DNS subdomain"
    if len(name) > 63 or not LABEL_NAME.fullmatch(name):
        return f"{key!r} is not a label key"
    return None


def name_problem(kind: str, name: str) -> str | None:
    if kind in ("Namespace", "Service"):
        pattern = DNS_1035_LABEL if kind == "Service" else DNS_LABEL
        return None if len(name) <= 63 and pattern.fullmatch(name) else f"{kind} {name!r} is not a DNS label"
    # Karpenter labels each node with the names of its NodePool and EC2NodeClass.
    if kind in ("NodePool", "EC2NodeClass"):
        return label_value_problem(name)
    if kind == "CronJob" and len(name) > CRONJOB_NAME_LIMIT:
        return f"CronJob {name!r} is longer than {CRONJOB_NAME_LIMIT}: its Jobs' names would not fit"
    return None if len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) else f"{kind} {name!r} is not a DNS subdomain"


def labels_within(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (label key, label value) pair a manifest or Helm values hold: label maps, selectors, requirements."""
    if isinstance(node, dict):
        for key, value in node.items():
            # labels, matchLabels, and Helm values' podLabels and the like; nodeSelector matches label to label.
            if (key.lower().endswith("labels") or key == "nodeSelector") and isinstance(value, dict):
                yield from value.items()
            else:
                yield from labels_within(value)
        if {"key", "operator"} <= node.keys():  # a node selector requirement or a NodeOverlay/NodePool requirement
            yield from ((node["key"], value) for value in node.get("values", []))
    elif isinstance(node, list):
        for item in node:
            yield from labels_within(item)


def problems(run) -> list[str]:
    found = []
    for r in run.resources:
        if r.type == "kubernetes:helm.sh/v3:Release":
            name = r.inputs["name"]
            if len(name) > 53 or not DNS_SUBDOMAIN.fullmatch(name):
                found.append(f"Helm release {name!r} is not a release name (at most 53)")
            content = r.inputs.get("values", {})
            # The device plugin's chart turns config.map into a ConfigMap's data keys.
            config_map = content.get("config", {}).get("map", {}) if r.inputs["chart"] == "nvidia-device-plugin" else {}
            found += [f"config.map key {k!r}" for k in config_map if len(k) > 253 or not CONFIG_MAP_KEY.fullmatch(k)]
        elif r.type.startswith("kubernetes:"):
            content = r.inputs
            # Without a name, Pulumi names the object after the resource with a '-' and an 8-character suffix.
            name = content.get("metadata", {}).get("name") or f"{r.name}-abcdefgh"
            found += [f"{r.name}: {p}" for p in [name_problem(content["kind"], name)] if p]
        else:
            continue
        for key, value in labels_within(content):
            found += [f"{r.name}: {p}" for p in (label_key_problem(key), label_value_problem(value)) if p]
    return found


CASES = {"longest-names": lambda: run_values(LONGEST)} | {
    path.name: (lambda path=path: run_stack_file(path)) for path in STACK_FILES
}
CASES |= {f"synthetic-{name}": (lambda values=values: run_values(values)) for name, values in SYNTHETIC.items()}


@pytest.mark.parametrize("make_run", CASES.values(), ids=CASES.keys())
def test_every_object_name_and_label_fits_kubernetes_limits(make_run):
    assert problems(make_run()) == []


def test_the_longest_lab_name_reaches_the_checked_names():
    run = run_values(LONGEST)
    names = [r.inputs.get("metadata", {}).get("name", "") for r in run.resources if r.type.startswith("kubernetes:")]
    assert f"{LONGEST_LAB}-smoke" in names
    assert f"{LONGEST_LAB}-8gpu" in names
    assert (("gpulab.dev/lab", LONGEST_LAB)) in [pair for r in run.resources for pair in labels_within(r.inputs)]


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        (("app.kubernetes.io/name", "x" * 64), "is not a label value"),
        (("app.kubernetes.io/name", "-x"), "is not a label value"),
        (("gpulab.dev/" + "k" * 64, "x"), "is not a label key"),
    ],
)
def test_the_label_check_refuses_what_the_api_server_refuses(pair, expected):
    found = [p for p in (label_key_problem(pair[0]), label_value_problem(pair[1])) if p]
    assert any(expected in p for p in found), found


def test_the_check_holds_dns_labels_and_karpenter_names_to_63():
    assert name_problem("Namespace", "n" * 64)
    assert name_problem("NodePool", "n" * 64)
    assert name_problem("Deployment", "n" * 64) is None
    assert name_problem("Deployment", "n" * 254)
