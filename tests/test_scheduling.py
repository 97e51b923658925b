"""The scheduling predicate the chart wiring tests rely on, checked on hand-written pods and nodes."""

import pytest

from tests.support.scheduling import Node, tolerates, unschedulable_because

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
NODE = Node("gpu", {"kubernetes.io/os": "linux", "pool": "intro", "gpus": "4"}, [GPU_TAINT])
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def affinity(*terms):
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]
            }
        }
    }


def expression(key, operator, *values):
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def test_a_pod_without_rules_lands_only_on_an_untainted_node():
    assert unschedulable_because({}, NODE) == "untolerated taint nvidia.com/gpu=true:NoSchedule"
    assert unschedulable_because({}, Node("plain", {})) is None


def test_node_selector_needs_every_label_with_its_value():
    pod = {"nodeSelector": {"pool": "intro", "kubernetes.io/os": "linux"}, "tolerations": TOLERATE_GPU}
    assert unschedulable_because(pod, NODE) is None
    assert "nodeSelector pool=vision" in unschedulable_because({**pod, "nodeSelector": {"pool": "vision"}}, NODE)
    assert "nodeSelector zone=a" in unschedulable_because({**pod, "nodeSelector": {"zone": "a"}}, NODE)


@pytest.mark.parametrize(
    ("rule", "fits"),
    [
        (expression("pool", "In", "intro", "vision"), True),
        (expression("pool", "In", "vision"), False),
        (expression("missing", "In", "x"), False),
        (expression("pool", "NotIn", "vision"), True),
        (expression("pool", "NotIn", "intro"), False),
        (expression("missing", "NotIn", "x"), True),
        (expression("pool", "Exists"), True),
        (expression("missing", "Exists"), False),
        (expression("pool", "DoesNotExist"), False),
        (expression("missing", "DoesNotExist"), True),
        (expression("gpus", "Gt", "3"), True),
        (expression("gpus", "Gt", "4"), False),
        (expression("gpus", "Lt", "5"), True),
        (expression("pool", "Gt", "1"), False),
    ],
)
def test_each_node_affinity_operator_follows_kubernetes(rule, fits):
    pod = {"affinity": affinity([rule]), "tolerations": TOLERATE_GPU}
    assert (unschedulable_because(pod, NODE) is None) == fits


def test_terms_are_ored_and_expressions_within_a_term_anded():
    matching, failing = expression("pool", "In", "intro"), expression("pool", "In", "vision")
    assert (
        unschedulable_because({"affinity": affinity([failing], [matching]), "tolerations": TOLERATE_GPU}, NODE) is None
    )
    assert unschedulable_because({"affinity": affinity([matching, failing]), "tolerations": TOLERATE_GPU}, NODE)


def test_an_empty_term_list_or_an_empty_term_matches_no_node():
    empty_list = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    assert unschedulable_because({"affinity": empty_list}, Node("plain", {}))
    assert unschedulable_because({"affinity": affinity([])}, Node("plain", {}))


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "value": "true"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),
    ],
)
def test_a_toleration_matches_by_key_operator_value_and_effect(toleration, tolerated):
    assert tolerates(toleration, GPU_TAINT) == tolerated


def test_noexecute_taints_repel_prefernoschedule_only_steers():
    assert unschedulable_because({}, Node("evicting", {}, [{"key": "k", "value": "v", "effect": "NoExecute"}]))
    assert (
        unschedulable_because({}, Node("preferring", {}, [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]))
        is None
    )


def test_every_taint_must_be_tolerated_not_just_one():
    node = Node("two", {}, [GPU_TAINT, {"key": "dedicated", "value": "lab", "effect": "NoSchedule"}])
    assert "dedicated=lab" in unschedulable_because({"tolerations": TOLERATE_GPU}, node)


def test_unknown_operators_are_refused_rather_than_guessed():
    with pytest.raises(ValueError, match="unknown node selector operator 'Like'"):
        unschedulable_because({"affinity": affinity([expression("pool", "Like", "i")])}, NODE)
    with pytest.raises(ValueError, match="unknown toleration operator 'Gt'"):
        tolerates({"key": "nvidia.com/gpu", "operator": "Gt", "value": "1"}, GPU_TAINT)
