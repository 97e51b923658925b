"""Every Helm value the program sets is read by its chart: Helm would silently ignore a key the templates never use."""

import functools

import pytest

from components.karpenter.controller import RELEASE as KARPENTER
from components.nvidia.device_plugin import RELEASE as DEVICE_PLUGIN
from render import charts
from tests.support.chart_values import changed, leaves, unread, with_leaf
from tests.support.rendered import BASE_STACK, STACKS, rendered

# The suite's slowest part, on its own: `make test-charts` (pytest -m charts).
pytestmark = pytest.mark.charts


@pytest.mark.parametrize("stack", STACKS)
def test_the_charts_read_every_value_the_program_sets(stack):
    r = rendered(stack)
    r.require_charts()
    for release in charts.releases(r.run):
        template_each = functools.partial(r.template_each, release.name)
        assert unread(release.values, template_each) == [], release.name


def test_a_misspelled_feature_gate_is_reported_as_unread():
    r = rendered(BASE_STACK)
    values = r.release(KARPENTER).values
    planted = with_leaf(values, ("settings", "featureGates", "nodeOverlays"), True)
    assert unread(planted, functools.partial(r.template_each, KARPENTER)) == ["settings.featureGates.nodeOverlays"]


def test_a_misplaced_key_is_reported_even_beside_read_keys():
    r = rendered(BASE_STACK)
    values = r.release(DEVICE_PLUGIN).values
    # The device plugin's tolerations live at the top level, not under the (unused) daemonset key.
    planted = {**values, "daemonset": {"tolerations": [{"operator": "Exists"}]}}
    assert unread(planted, functools.partial(r.template_each, DEVICE_PLUGIN)) == ["daemonset.tolerations"]


def test_each_leaf_scalar_list_or_empty_map_gets_its_own_value():
    values = {"a": {"b": True, "c": [1], "d": {}}, "e": "x", "f": None, "g": 2}
    assert [path for path, _ in leaves(values)] == [("a", "b"), ("a", "c"), ("a", "d"), ("e",), ("f",), ("g",)]
    for _, value in leaves(values):
        assert changed(value) != value
    assert with_leaf(values, ("a", "b"), False) == {**values, "a": {**values["a"], "b": False}}
    assert values["a"]["b"] is True
