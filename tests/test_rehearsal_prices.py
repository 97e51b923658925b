"""The prices the rehearsal bills spot nodes at (`rehearse --prices`, rehearsal/spot.py prices): the cost file a
`pulumi preview` writes where GPULAB_PREVIEW_COST says (domain/cost/preview_cost.py), made here by the program under
the eu-west-1 Price List and spot mocks of tests/test_live_prices.py, gives each spot type's price and its source as
the stepper's -spot-prices reads them (rehearsal/stepper/spot.go readSpotPrices: usdPerHour, pricedAs, source), the
same as the preview's stack outputs do; the driver hands them to the stepper; and the pull-request workflow's
rehearsal takes the file its preview wrote. A full rehearsal at a preview's spot price: tests/test_rehearsal_spot.py.
"""

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from domain.cost import preview_cost
from rehearsal import karpenter, spot
from render import harness
from tests.conftest import BASE, ROOT, stack_values
from tests.test_live_prices import (  # noqa: F401 (market: a fixture)
    EU_WEST_1,
    GET_SPOT_PRICE,
    SPOT,
    SPOT_LAB,
    SPOT_PUBLISHED,
    live,
    market,
)

# BASE with the spot lab of tests/test_live_prices.py (g5.xlarge, which EC2 has spot prices for in the mocked zones,
# and g4dn.xlarge, which it has none for), on two subnets the mock places in two zones whose spot prices differ.
VALUES = stack_values(
    **{
        "gpulab:cluster": {
            **BASE["gpulab:cluster"],
            "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60003"],
        },
        "gpulab:labs": SPOT_LAB,
    }
)
STEPPER_KEYS = {"usdPerHour", "pricedAs", "source"}


@pytest.fixture
def previewed(market, monkeypatch, tmp_path: Path) -> tuple[Path, harness.Run]:  # noqa: F811 (the imported fixture)
    """The cost file a eu-west-1 preview of VALUES writes, and the preview's run."""
    path = tmp_path / "render" / "preview-cost.json"
    monkeypatch.setenv(preview_cost.ENV, str(path))
    return path, live(VALUES)


def test_a_previews_cost_file_gives_each_spot_types_price_and_source_as_the_stepper_reads_them(previewed, tmp_path):
    path, run = previewed
    assert preview_cost.is_written(json.loads(path.read_text()))
    found = spot.prices(path, run.stack.settings, run.stack.region)
    zones = {i.args["availabilityZone"] for i in run.invokes if i.token == GET_SPOT_PRICE}
    dearest = max(zones, key=lambda z: float(SPOT["g5.xlarge"][z]))
    assert found["g5.xlarge"] == {
        "usdPerHour": float(SPOT["g5.xlarge"][dearest]),
        "pricedAs": "spot",
        "source": f"EC2 DescribeSpotPriceHistory, {dearest}, {SPOT_PUBLISHED[dearest]} (the highest of its zones)",
    }
    # EC2 had no spot price for g4dn.xlarge: eu-west-1's on-demand price, said so.
    assert set(found["g4dn.xlarge"]) == STEPPER_KEYS
    assert (found["g4dn.xlarge"]["usdPerHour"], found["g4dn.xlarge"]["pricedAs"]) == (
        float(EU_WEST_1["g4dn.xlarge"]),
        "on-demand",
    )
    assert found["g4dn.xlarge"]["source"].startswith("no spot price from EC2 in eu-west-1's zones")
    # The same preview's stack outputs (`pulumi stack output --json`) give the same prices.
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(run.outputs))
    assert not preview_cost.is_written(run.outputs)
    assert spot.prices(outputs, run.stack.settings, run.stack.region) == found


def test_a_cost_file_priced_in_another_region_is_refused_naming_the_flag(previewed):
    path, run = previewed
    written = json.loads(path.read_text())
    path.write_text(json.dumps({**written, "region": "us-west-2"}))
    with pytest.raises(spot.BadPrices, match=rf"^--prices {path}: prices of 'us-west-2', not of this stack's region"):
        spot.prices(path, run.stack.settings, run.stack.region)


def test_another_stacks_cost_file_of_the_same_region_is_refused_naming_its_cluster(previewed):
    path, run = previewed
    written = json.loads(path.read_text())
    # The file names the cluster of the stack whose preview wrote it, as its outputs do.
    assert written["clusterName"] == run.stack.settings.cluster.name == run.outputs["clusterName"]
    path.write_text(json.dumps({**written, "clusterName": "another-lab"}))
    with pytest.raises(
        spot.BadPrices,
        match=rf"^--prices {path}: the figures of cluster 'another-lab', not this stack's \('lab-test'\)$",
    ):
        spot.prices(path, run.stack.settings, run.stack.region)


def test_the_driver_gives_the_stepper_the_prices_as_its_spot_prices_flag(tmp_path):
    """rehearsal/karpenter.py running, with a stand-in for the stepper that records what it was given."""
    prices = {"g5.xlarge": {"usdPerHour": 0.47, "pricedAs": "spot", "source": "EC2 DescribeSpotPriceHistory, ..."}}
    record = tmp_path / "given.json"
    stepper = tmp_path / "stepper"
    stepper.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "args = sys.argv[1:]\n"
        "given = json.load(open(args[args.index('-spot-prices') + 1])) if '-spot-prices' in args else None\n"
        f"json.dump(given, open({str(record)!r}, 'w'))\n"
        "print(json.dumps({'shortenedTimers': {}, 'karpenter': 'v1.14.1', 'spot': {}}), flush=True)\n"
        "sys.stdin.read()\n"
    )
    stepper.chmod(0o755)
    plane = SimpleNamespace(folder=tmp_path, admin=SimpleNamespace(kubeconfig=dict))
    render_dir = tmp_path / "render"
    render_dir.mkdir()
    start = datetime.datetime(2027, 1, 4, tzinfo=datetime.UTC)
    with karpenter.running(plane, render_dir, "eu-west-1", start, stepper, spot_prices=prices):  # type: ignore[arg-type]
        pass
    assert json.loads(record.read_text()) == prices
    with karpenter.running(plane, render_dir, "eu-west-1", start, stepper):  # type: ignore[arg-type]
        pass
    assert json.loads(record.read_text()) is None  # without prices, no flag: spot at on-demand


def test_the_pull_request_rehearsal_takes_the_cost_file_its_preview_wrote():
    steps = yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())["jobs"]["preview"]["steps"]
    (preview,) = [s for s in steps if "pulumi preview" in s.get("run", "")]
    (rehearse,) = [s for s in steps if s.get("run", "").startswith(".ci/rehearse ")]
    assert steps.index(preview) < steps.index(rehearse)
    written = preview["env"][preview_cost.ENV].replace("${{ runner.temp }}", "$RUNNER_TEMP")
    render_dir = rehearse["run"].split()[-1].strip('"')
    assert written == f"{render_dir}/preview-cost.json"


def test_ci_rehearse_passes_the_cost_file_beside_the_render(tmp_path):
    """.ci/rehearse gives the rehearsal <render dir>/preview-cost.json when it is there: one the rehearsal refuses (of
    another region) stops it, naming the file, before the twin is built."""
    stack_file = tmp_path / "Pulumi.test.yaml"
    stack_file.write_text(yaml.safe_dump({"config": BASE}))
    render_dir = tmp_path / "render"
    render_dir.mkdir()
    cost_file = render_dir / "preview-cost.json"
    cost_file.write_text(json.dumps({"region": "us-west-2", "book": {}, "cost": {}, "labs": {}}))
    done = subprocess.run(
        [str(ROOT / ".ci/rehearse"), str(stack_file), str(tmp_path / "rehearsal"), str(render_dir)],
        env=dict(os.environ, GITHUB_STEP_SUMMARY=""),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"gpulab: --prices {cost_file}: prices of 'us-west-2', not of this stack's region ('eu-west-1')" in (
        done.stderr.splitlines()
    )
