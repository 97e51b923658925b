"""The policy pack's JupyterHub rule: a production hub has a real sign-in; a test stack may say it has none."""

import copy

import pytest

from components.jupyterhub.hub import RELEASE
from render import charts
from render.harness import Run, run
from tests.conftest import as_cli_config, stack_values
from tests.support.synthetic import HUB, lab
from tests.test_policy import only, rules, violations

POLICY = "jupyterhub-sign-in-in-production"


@pytest.fixture(scope="module")
def dummy_run() -> Run:
    image = "quay.io/jupyter/pytorch-notebook:cuda12-a4c8c5467c74"
    values = stack_values(
        **{
            "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, notebookImage=image)},
            "gpulab:jupyterhub": {**HUB, "auth": {"type": "dummy"}},
        }
    )
    return run("test", as_cli_config(values))


def _release(result: Run) -> dict:
    (release,) = [r for r in result.of_type(charts.HELM_RELEASE) if r.inputs["name"] == RELEASE]
    return copy.deepcopy(release.inputs)


def test_a_hub_without_real_sign_in_fires_in_production_only(dummy_run: Run) -> None:
    props = _release(dummy_run)
    assert only(violations((rules.HELM_RELEASE, props), stack="prod"), POLICY).startswith(
        "values.hub.config.JupyterHub.authenticator_class is 'dummy' in production stack 'prod'"
    )
    assert violations((rules.HELM_RELEASE, props), stack="staging") == {}


def test_a_hub_naming_no_authenticator_gets_dummy_and_fires(dummy_run: Run) -> None:
    props = _release(dummy_run)
    del props["values"]["hub"]["config"]["JupyterHub"]["authenticator_class"]
    assert "is 'dummy'" in only(violations((rules.HELM_RELEASE, props), stack="prod"), POLICY)


def test_a_hub_with_a_real_authenticator_passes_in_production(dummy_run: Run) -> None:
    props = _release(dummy_run)
    props["values"]["hub"]["config"]["JupyterHub"]["authenticator_class"] = "github"
    assert violations((rules.HELM_RELEASE, props), stack="prod") == {}


def test_other_charts_are_not_judged(dummy_run: Run) -> None:
    props = _release(dummy_run) | {"chart": "nvidia-device-plugin"}
    assert violations((rules.HELM_RELEASE, props), stack="prod") == {}


def test_the_packs_release_type_and_chart_are_the_programs(dummy_run: Run) -> None:
    assert rules.HELM_RELEASE == charts.HELM_RELEASE
    assert _release(dummy_run)["chart"] == rules.JUPYTERHUB_CHART
