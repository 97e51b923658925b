"""The rehearsal's clock plays a node's boot and its learner image's pull from gpulab's timing table
(domain/capacity/boot_timings.py; rehearsal/stepper/boot.go and kubelet.go): a learner's wait ends when their notebook
runs, a class whose warm-up is shorter than the table says its warm seats need fails naming `warmup` with the figure,
one long enough passes, and a boot past Karpenter's registration timeout is a failed launch of Karpenter's own code.
Without the twin and its stepper (`make twin`) these tests skip in one line.

The stack: the hub's notebook image (10 GB on the table, as gpulab cannot know its size) on one lab of 6 seats, 2
g4dn.xlarge of one GPU shared 3 ways, FastImagePull on (the NVMe; release v20260714). On the table a node is Ready 75 s
after its launch, its slices advertised at 135 s, its learner image pre-pulled from its registration at 60 s for
10 x 24 x 0.86 = 207 s, so at 267 s: a warm seat needs Karpenter's batch (10 s) and 267 s, 277 s. Two classes on Monday
4 January 2027 of 3 warm seats: at 09:00 warmed 2m ahead, at 13:00 warmed 20m ahead.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

import rehearsal.run
from rehearsal import timings
from tests.conftest import as_cli_config, run_config, stack_values
from tests.support import twin_tests
from tests.support.synthetic import HUB, NOTEBOOK_IMAGE, lab

TODAY = datetime.date(2027, 1, 4)
LAB = "timed"


def _stack(**extra: Any) -> dict[str, Any]:
    return stack_values(
        **{
            "gpulab:labs": {
                LAB: lab(
                    ["g4dn.xlarge"],
                    3,
                    max_gpus=2,
                    ami="al2023@v20260714",
                    # The empty nodes go in one command once consolidateAfter has passed, not one each 20 s.
                    disruption={"budgets": [{"nodes": "100%"}]},
                    **extra,
                )
            },
            "gpulab:jupyterhub": {**HUB, "notebookImage": NOTEBOOK_IMAGE},
            "gpulab:jupyterhubClientSecret": {"secure": "v1:c3RhbmQtaW4="},
        }
    )


TWO_CLASSES = _stack(
    classes=[
        {"schedule": "0 9 * * mon", "duration": "1h", "warmSeats": 3, "warmup": "2m"},
        {"schedule": "0 13 * * mon", "duration": "1h", "warmSeats": 3, "warmup": "20m"},
    ]
)


def _rehearsed(name: str, values: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    twin_tests.require_twin()
    twin_tests.require_stepper()
    run = run_config(name, as_cli_config(values))
    out = tmp_path / "render"
    twin_tests.render_with_charts(run, out)
    return rehearsal.run.rehearse(out, run.stack.settings, TODAY, run.stack.region)


@pytest.fixture(scope="module")
def two_classes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _rehearsed("timings", TWO_CLASSES, tmp_path_factory.mktemp("timings"))


def test_a_warmup_too_short_for_the_image_fails_with_the_figure(two_classes) -> None:
    """Warmed at 08:58: the node's slices at 09:00:15, its image at 09:02:27; the 3 warm learners bound at 09:00:15
    and running at 09:02:27 (147 s). The late ones arrive at 09:01, 09:02 and 09:03 for a node launched at 09:01,
    whose image is there at 09:05:27: 267, 207 and 147 s."""
    assert rehearsal.run.problems(two_classes) == [
        f"rehearsal: gpulab:labs.{LAB}.classes[0].warmup: lab {LAB}'s class classes[0] starting 2027-01-04T09:00:00Z "
        "warms up 120 s ahead, less than the 277 s its warm seats need on its lab's timings (Karpenter's batch, a "
        "node's boot to its GPU slices and its learner image's pre-pull; docs/rehearsal.md, What the clock models): "
        "0 of its 3 warm seats ready at its start (notebooks running) (wait to ready p95 267 s, max 267 s)"
    ]
    first = two_classes["labs"][LAB]["classes"][0]
    assert (first["readyAtStart"], first["warmupSeconds"], first["leastWarmupSeconds"]) == (0, 120, 277)


def test_a_warmup_long_enough_has_every_warm_seat_ready(two_classes) -> None:
    second = two_classes["labs"][LAB]["classes"][1]
    assert (second["day"], second["readyAtStart"], second["warmSeats"]) == ("2027-01-04", 3, 3)
    assert second["coldWaitToReadySeconds"] == {"p50": 207.0, "p95": 267.0, "max": 267.0}


def test_waits_end_when_the_notebook_runs_not_at_binding(two_classes) -> None:
    """The late learners of the second class wait for a node and its image: bound at its slices (09:03:15 for the
    first, who arrived at 09:01), running at 09:05:27."""
    second = two_classes["labs"][LAB]["classes"][1]
    assert second["waitSeconds"]["max"] == 135.0
    assert second["waitToReadySeconds"] == {"p50": 0.0, "p95": 267.0, "max": 267.0}
    (image,) = two_classes["timings"]["images"]
    pull = two_classes["timings"]["images"][NOTEBOOK_IMAGE]
    assert image == NOTEBOOK_IMAGE and (pull["pullSeconds"], pull["mode"], pull["labs"]) == (207, "soci", [LAB])
    assert two_classes["timings"]["g4dn.xlarge"]["launchToReadySeconds"] == 75


def test_a_boot_past_registration_timeout_is_a_failed_launch(tmp_path: Path) -> None:
    """Registered 16 minutes after launch: Karpenter's liveness check deletes each NodeClaim 15 minutes after its
    launch (registration_timeout) and launches again; no learner is ever seated."""
    values = _stack(
        timings={"nodeRegistered": "16m"},
        classes=[{"schedule": "0 9 * * mon", "duration": "30m", "warmSeats": 3}],
    )
    done = _rehearsed("registration-timeout", values, tmp_path)
    events = done["labs"][LAB]["events"]
    deleted = [(e["at"][11:19], e["reason"]) for e in events if e["what"] == "nodeDeleted"]
    assert deleted[0] == ("08:55:00", "registration_timeout"), deleted
    assert not [e for e in events if e["what"] in ("bound", "ready")]
    assert any(
        line.startswith(f"rehearsal: gpulab:labs.{LAB}.classes[0].warmSeats: ") for line in rehearsal.run.problems(done)
    )


def test_the_command_lines_timing_wins_over_lab_and_table() -> None:
    """--timing sets a figure for every lab, over its `timings` (here learnerImageGb 4) and the table: 2 GB at 24 s/GB
    x 0.86 is 42 s of pull from the registration at 60 s; the lab's 4 GB would be 83 s."""
    run = run_config("timings-given", as_cli_config(_stack(timings={"learnerImageGb": 4})))
    lab_timing = timings.for_stepper(run.stack.settings, None)["labs"][LAB]["g4dn.xlarge"]
    assert lab_timing["imageSeconds"] == 60 + 83
    given = timings.command_line(["learnerImageGb=2", "devicePlugin=90s"])
    stepper = timings.for_stepper(run.stack.settings, given)
    assert stepper["labs"][LAB]["g4dn.xlarge"] == {
        "readySeconds": 75,
        "slicesSeconds": 165,
        "learnerImage": NOTEBOOK_IMAGE,
        "imageSeconds": 60 + 42,
    }
    report = timings.for_report(run.stack.settings, given)["timings"]
    assert "slices +90 s (--timing.devicePlugin)" in report["g4dn.xlarge"]["source"]
    assert report["images"][NOTEBOOK_IMAGE]["source"].startswith("2 GB (--timing.learnerImageGb) at 24 s/GB")


def test_timings_are_keyed_by_instance_type_and_image_each_lab_apart_where_it_differs() -> None:
    """rehearsal.json's timings as issue #48 keys them: one entry per instance type and per image for the labs that
    time it alike; a lab with its own `timings` on the same type gets its figures under `byLab`."""
    same = _stack()["gpulab:labs"][LAB]
    values = _stack()
    values["gpulab:labs"] = {"alike": same, LAB: same}
    report = timings.for_report(run_config("timings-alike", as_cli_config(values)).stack.settings, None)["timings"]
    assert sorted(report) == ["g4dn.xlarge", "images"]
    assert report["g4dn.xlarge"]["labs"] == ["alike", LAB] and report["g4dn.xlarge"]["launchToReadySeconds"] == 75
    assert report["images"][NOTEBOOK_IMAGE]["labs"] == ["alike", LAB]
    values["gpulab:labs"] = {"alike": same, LAB: {**same, "timings": {"nodeReady": "45s"}}}
    report = timings.for_report(run_config("timings-differ", as_cli_config(values)).stack.settings, None)["timings"]
    by_lab = report["g4dn.xlarge"]["byLab"]
    assert (by_lab["alike"]["launchToReadySeconds"], by_lab[LAB]["launchToReadySeconds"]) == (75, 105)
    assert report["images"][NOTEBOOK_IMAGE]["labs"] == ["alike", LAB]  # the pull starts at the registration alike


@pytest.mark.parametrize(
    ("given", "line"),
    [
        (["bootSeconds=60"], "gpulab: --timing bootSeconds=60: want KEY=VALUE with KEY one of devicePlugin, "),
        (["learnerImageGb=ten"], "gpulab: --timing learnerImageGb: must be a number, got 'ten'"),
        (["learnerImageGb=-1"], "gpulab: --timing learnerImageGb: must be a positive number, got -1"),
        (["nodeReady=15"], "gpulab: --timing nodeReady: "),
    ],
    ids=["unknown-key", "not-a-number", "negative", "no-unit"],
)
def test_a_bad_timing_on_the_command_line_is_one_line(tmp_path, capsys, given: list[str], line: str) -> None:
    status = rehearsal.run.main(["staging", "--out", str(tmp_path), *(f"--timing={g}" for g in given)])
    assert status == 2
    (printed,) = capsys.readouterr().err.splitlines()
    assert printed.startswith(line), printed
