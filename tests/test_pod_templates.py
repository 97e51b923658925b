"""Every pod template a stack writes requests what it limits: stored templates are never defaulted from their limits."""

import pytest

from tests.support.pod_specs import limits_without_requests, pod_specs
from tests.support.rendered import STACKS, rendered


@pytest.mark.parametrize("stack", STACKS)
def test_the_stacks_pod_templates_request_what_they_limit(stack):
    r = rendered(stack)
    specs = dict(pod_specs(r.manifests()))
    assert {where: limits_without_requests(spec) for where, spec in specs.items()} == {key: [] for key in specs}


@pytest.mark.parametrize("stack", STACKS)
def test_the_charts_pod_templates_request_what_they_limit(stack):
    r = rendered(stack)
    for file, objects in r.files().items():
        if not file.startswith("charts/"):
            continue
        specs = {f"{file}: {where}": spec for where, spec in pod_specs(objects)}
        assert {where: limits_without_requests(spec) for where, spec in specs.items()} == {key: [] for key in specs}


def test_a_template_that_only_limits_its_slice_is_caught():
    template = {
        "kind": "Deployment",
        "metadata": {"name": "smoke", "namespace": "gpu"},
        "spec": {
            "template": {"spec": {"containers": [{"name": "smi", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        },
    }
    assert dict(pod_specs([template])) == {"Deployment/gpu/smoke": template["spec"]["template"]["spec"]}
    assert limits_without_requests(template["spec"]["template"]["spec"]) == ["smi: nvidia.com/gpu"]
