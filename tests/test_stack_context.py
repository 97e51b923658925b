"""domain/stack/context.py: the stack-wide settings a lab's checks read are passed as pydantic's validation context."""

import pytest

from domain.stack.model import Lab, Settings, stack_context
from tests.conftest import BASE

CLASS = {"schedule": "0 9 * * mon", "duration": "2h"}


def _values(**top: object) -> dict:
    labs = {"intro": {**BASE["gpulab:labs"]["intro"], "classes": [CLASS]}}
    return {"cluster": BASE["gpulab:cluster"], "labs": labs, **top}


def test_a_stacks_labs_keep_the_context_they_were_checked_in() -> None:
    values = _values(timeZone="Europe/Berlin", metrics={})
    lab = Settings.model_validate(values, context=stack_context(values)).labs["intro"]
    assert lab.classes[0].zone == "Europe/Berlin"
    assert (lab._metrics, lab._ebs_csi) == (True, False)


def test_a_lab_validated_alone_counts_the_defaults() -> None:
    lab = Lab.model_validate({**BASE["gpulab:labs"]["intro"], "classes": [CLASS]})
    assert lab.classes[0].zone == "Etc/UTC"
    assert (lab._metrics, lab._ebs_csi) == (False, False)


def test_settings_without_their_context_are_refused() -> None:
    with pytest.raises(TypeError, match="stack context"):
        Settings.model_validate(_values())
