"""Where the device plugin chart's MPS control daemon may run, read from the chart's own template (no helm needed).

Three parts of templates/daemonset-mps-control-daemon.yml decide it: a nodeSelector with literal entries
(`nvidia.com/mps.capable: "true"`) to which the template appends `.Values.nodeSelector`, and the pod's affinity and
tolerations, which are `.Values.affinity` and `.Values.tolerations`. The values are the chart's values.yaml with the
release's values coalesced over them the way Helm does it (maps merge key by key, anything else replaces).
"""

import re

import pytest
import yaml

from tests.upstream import NVIDIA_DEVICE_PLUGIN_CHART

TEMPLATE = NVIDIA_DEVICE_PLUGIN_CHART / "templates" / "daemonset-mps-control-daemon.yml"

requires_chart = pytest.mark.skipif(
    not TEMPLATE.is_file(), reason=f"device plugin chart not found at {NVIDIA_DEVICE_PLUGIN_CHART} (../shared/upstream)"
)


def coalesce(defaults: object, values: object) -> object:
    if isinstance(defaults, dict) and isinstance(values, dict):
        return {
            key: coalesce(defaults.get(key), values[key]) if key in values else defaults[key]
            for key in defaults.keys() | values.keys()
        }
    return values


def scheduling(release_values: dict) -> dict:
    """The daemon pod's nodeSelector, affinity and tolerations as the chart renders them with these values."""
    values = coalesce(yaml.safe_load((NVIDIA_DEVICE_PLUGIN_CHART / "values.yaml").read_text()), release_values)
    assert isinstance(values, dict)
    text = TEMPLATE.read_text()
    # The literal selector: the plain `key: "value"` lines between `nodeSelector:` and the next template action.
    literal = re.search(r"\n      nodeSelector:\n((?:\s*#.*\n|\s+[\w./-]+: \"[^\"]*\"\n)+)\s*\{\{", text)
    assert literal, "the MPS daemon's template no longer starts its nodeSelector with literal entries"
    for key in ("nodeSelector", "affinity", "tolerations"):
        assert f"{{{{- with .Values.{key} }}}}" in text[literal.start() :], f"the template no longer renders {key}"
    fixed = dict(re.findall(r"([\w./-]+): \"([^\"]*)\"", literal.group(1)))
    return {
        "nodeSelector": fixed | (values.get("nodeSelector") or {}),
        "affinity": values.get("affinity") or {},
        "tolerations": values.get("tolerations") or [],
    }
