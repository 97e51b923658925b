"""Kubernetes quantities, read as k8s.io/apimachinery resource.ParseQuantity reads them, and learnerPod's use."""

from fractions import Fraction

import pytest

from domain.capacity.quantity import quantity
from tests.conftest import BASE, stack_values
from tests.test_config import parsed, problems


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4e9", Fraction(4_000_000_000)),
        ("0.5", Fraction(1, 2)),
        ("1.5Gi", Fraction(1_610_612_736)),
        ("500m", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("+1", Fraction(1)),
        ("0", Fraction(0)),
        ("1e-3", Fraction(1, 1000)),
        ("2E3", Fraction(2000)),
        ("1E", Fraction(10**18)),  # E alone is the exa suffix, not an exponent
        ("1k", Fraction(1000)),
        ("100Mi", Fraction(104_857_600)),
        ("250u", Fraction(1, 4000)),
        # ParseQuantity rounds up to whole nanos, and caps binary quantities at 2^63 - 1.
        ("0.1n", Fraction(1, 10**9)),
        ("1.0000000001", Fraction(1_000_000_001, 10**9)),
        ("16Ei", Fraction(2**63 - 1)),
    ],
)
def test_every_quantity_form_has_the_value_kubernetes_gives_it(text, value):
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["", "1K", "1e", "1e1.5", "1Mi1", "1 Gi", "1Gib", "1.5.5", "0x10", "--1"])
def test_what_kubernetes_refuses_to_read_is_refused(text):
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        quantity(text)


def with_learner_pod(**learner_pod: str) -> dict:
    # One g4dn.xlarge GPU in three slices: each learner may have at most 1236m and 4774Mi (5005901824 bytes).
    intro = {**BASE["gpulab:labs"]["intro"], "learnerPod": learner_pod}
    return stack_values(**{"gpulab:labs": {"intro": intro}})


@pytest.mark.parametrize(
    "learner_pod",
    [
        {"cpu": "0.5", "memory": "4e9"},
        {"cpu": "1236m", "memory": "4774Mi"},  # exactly a seat's share
        {"cpu": "1.236", "memory": "5005901824"},
        {"cpu": ".25", "memory": "4.5Gi"},
        {"cpu": "1236000000n", "memory": "5005901.824k"},
    ],
)
def test_learner_pod_accepts_every_form_up_to_a_seats_share(learner_pod):
    lab = parsed(with_learner_pod(**learner_pod)).settings.labs["intro"]
    assert lab.learner_requests == {"cpu": "1236m", "memory": "4774Mi"} | learner_pod


@pytest.mark.parametrize(
    ("learner_pod", "expected"),
    [
        ({"cpu": "1.237"}, "gpulab:labs.intro.learnerPod.cpu: must be at most 1236m so that every slice"),
        ({"cpu": "1236000001n"}, "gpulab:labs.intro.learnerPod.cpu: must be at most 1236m so that every slice"),
        ({"memory": "5.1e9"}, "gpulab:labs.intro.learnerPod.memory: must be at most 4774Mi so that every slice"),
        ({"memory": "4.67Gi"}, "gpulab:labs.intro.learnerPod.memory: must be at most 4774Mi so that every slice"),
        ({"cpu": "-1"}, "gpulab:labs.intro.learnerPod.cpu: must not be negative, got '-1': Kubernetes refuses"),
        ({"cpu": "1K"}, "gpulab:labs.intro.learnerPod.cpu: must be a Kubernetes quantity such as 1, 0.5, 500m"),
        ({"memory": "4 Gi"}, "gpulab:labs.intro.learnerPod.memory: must be a Kubernetes quantity such as 1, 0.5"),
    ],
)
def test_learner_pod_refuses_over_a_seat_and_what_k8s_refuses(learner_pod, expected):
    lines = problems(with_learner_pod(**learner_pod))
    assert len(lines) == 1 and lines[0].startswith(expected), lines
