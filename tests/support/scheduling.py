"""Can a pod be placed on a node, by the node-level rules of the Kubernetes scheduler.

Covers what decides it from the node's labels and taints alone: `nodeSelector`, required node affinity (terms are
ORed, expressions within a term ANDed; In, NotIn, Exists, DoesNotExist, Gt, Lt) and taints with the NoSchedule or
NoExecute effect against the pod's tolerations (PreferNoSchedule only steers). Pod affinity, topology spread and
resources depend on other pods and are out of scope. Follows k8s.io/component-helpers scheduling/corev1 (nodeaffinity
and helpers.go TolerationsTolerateTaint) and core/v1 Toleration.ToleratesTaint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HARD_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, str]] = field(default_factory=tuple)


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        # The label and the single value are integers; a label that is not one never matches.
        if not present or not labels[key].lstrip("-").isdigit():
            return False
        label, bound = int(labels[key]), int(values[0])
        return label > bound if operator == "Gt" else label < bound
    raise ValueError(f"unknown node selector operator {operator!r}")


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if term.get("matchFields"):
        raise ValueError("matchFields (node names) are outside this predicate")
    expressions = term.get("matchExpressions") or []
    # An empty term matches no node (core/v1 NodeSelectorTerm).
    return bool(expressions) and all(_expression_matches(e, labels) for e in expressions)


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    # An empty key matches every key (the API allows it only with Exists: tolerate everything).
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    raise ValueError(f"unknown toleration operator {operator!r}")


def unschedulable_because(pod_spec: Mapping[str, Any], node: Node) -> str | None:
    """Why a pod with this spec cannot be placed on the node, or None when the node-level rules allow it."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value} (node has {node.labels.get(key)!r})"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None and not any(_term_matches(t, node.labels) for t in required.get("nodeSelectorTerms", [])):
        return f"required node affinity {required['nodeSelectorTerms']}"
    tolerations = pod_spec.get("tolerations") or []
    for taint in node.taints:
        if taint["effect"] in HARD_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return f"untolerated taint {taint['key']}={taint.get('value', '')}:{taint['effect']}"
    return None
