"""The render warns, before any rehearsal, of a class whose warm-up is shorter than its warm seats need on gpulab's
timing table (domain/capacity/boot_timings.py, which the rehearsal's clock plays), with the figure it needs; and of a
lab whose nodes would register after Karpenter's registration timeout. A lab's `timings` override the table."""

from pathlib import Path
from typing import Any

import pytest
import yaml

import render.run
from tests.conftest import stack_values
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

CLASS = {"schedule": "0 9 * * mon", "duration": "1h"}


def _stack(warmups: list[str], **extra: Any) -> dict[str, Any]:
    classes = [CLASS | {"warmup": w, "schedule": f"0 {9 + 2 * i} * * mon"} for i, w in enumerate(warmups)]
    return stack_values(
        **{
            "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, ami="al2023@v20260714", classes=classes, **extra)},
            "gpulab:jupyterhub": HUB | {"notebookImage": NOTEBOOK_IMAGE},
            "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        }
    )


def _render(tmp_path: Path, values: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    stack = tmp_path / "Pulumi.case.yaml"
    stack.write_text(yaml.safe_dump({"config": values}))
    status = render.run.main([str(stack), "--out", str(tmp_path / "out"), "--no-charts"])
    return status, [line for line in capsys.readouterr().err.splitlines() if line.startswith("gpulab:")]


def test_a_warmup_too_short_for_the_image_is_warned_with_figure(tmp_path, capsys) -> None:
    """g4dn.xlarge (FastImagePull on: NVMe, 4 vCPUs, release v20260714): Karpenter's batch 10 s, then the learner
    image of 10 GB pre-pulled from the registration at 60 s, 10 x 24 x 0.86 = 207 s: 277 s; the slices at 135 s."""
    status, lines = _render(tmp_path, _stack(["2m", "20m"]), capsys)
    assert status == 0
    assert lines == [
        "gpulab:labs.intro.classes[0].warmup: warning: 2m is shorter than the 277 s its warm seats need to be ready "
        "at its start (Karpenter's batch 10 s, then a node's launch to its GPU slices 135 s, the learner image "
        "pre-pulled 207 s after the registration; domain/capacity/boot_timings.py, gpulab:labs.intro.timings); set "
        "warmup to at least 5m"
    ]


def test_a_lab_that_says_its_image_is_small_needs_less_warmup(tmp_path, capsys) -> None:
    """2 GB: 42 s of pull, done at 102 s, before the slices at 135 s: 145 s, which 3m covers."""
    status, lines = _render(tmp_path, _stack(["3m"], timings={"learnerImageGb": 2}), capsys)
    assert (status, lines) == (0, [])


def test_a_boot_past_karpenters_registration_timeout_is_warned(tmp_path, capsys) -> None:
    status, lines = _render(tmp_path, _stack(["6h"], timings={"nodeRegistered": "15m"}), capsys)
    assert status == 0
    assert lines == [
        "gpulab:labs.intro.timings.nodeRegistered: warning: 900 s is not under Karpenter's registration timeout of "
        "900 s (CONFIRMED sigs.k8s.io/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness.go:52 "
        "registrationTimeout): it deletes every NodeClaim of the lab before its node registers"
    ]


@pytest.mark.parametrize(
    ("timings", "line"),
    [
        ({"learnerImageGb": 0}, "gpulab:labs.intro.timings.learnerImageGb: must be a positive number, got 0"),
        ({"devicePlugin": 60}, "gpulab:labs.intro.timings.devicePlugin: "),
        ({"bootSeconds": 60}, "gpulab:labs.intro.timings.bootSeconds: "),
    ],
    ids=["zero-size", "bare-number", "unknown-key"],
)
def test_a_bad_timing_is_refused_by_its_key(tmp_path, capsys, timings: dict[str, Any], line: str) -> None:
    status, lines = _render(tmp_path, _stack(["20m"], timings=timings), capsys)
    assert status == 2
    assert any(printed.startswith(line) for printed in lines), lines
