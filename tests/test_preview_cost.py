"""The cost figures a `pulumi preview` priced in the stack's region, in the pull-request comment: the program writes
them to the file GPULAB_PREVIEW_COST names (domain/cost/preview_cost.py), under the Price List mocks of a eu-west-1
stack, and the comment's cost tables show them instead of the offline render's us-east-1 list, the cost diff still
the renders' (like with like); without the file the comment is the render's, as before."""

import json
from pathlib import Path

import pytest
import yaml

import render.run
from domain.cost import preview_cost
from domain.cost.lab_cost import usd
from domain.cost.price_book import LIST
from reports import preview_comment
from tests.conftest import BASE, ROOT
from tests.support import tables
from tests.test_live_prices import EU_WEST_1, live, market  # noqa: F401 (market: a fixture)

PREVIEW = "Previewing update (staging):\nResources: 3 to create\n"
# BASE's intro lab at the mocked eu-west-1 prices (tests/test_live_prices.py EU_WEST_1): 4 g4dn.xlarge nodes at 0.587
# plus each one's 20 GiB gp3 root volume at eu-west-1's 0.097 a GB-month: 2.3587 USD per hour.
EU_WEST_1_AT_MOST = "2.3587"


@pytest.fixture
def written(market, monkeypatch, tmp_path: Path) -> tuple[Path, dict]:  # noqa: F811 (the imported fixture)
    """The file a eu-west-1 preview of BASE writes (in a directory the render has not made), and the run's outputs."""
    path = tmp_path / "render" / "preview-cost.json"
    monkeypatch.setenv(preview_cost.ENV, str(path))
    return path, live(BASE).outputs


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BASE rendered offline, as the workflow's render step does."""
    out = tmp_path_factory.mktemp("render")
    (out / "Pulumi.staging.yaml").write_text(yaml.safe_dump({"config": BASE}))
    assert render.run.main([str(out / "Pulumi.staging.yaml"), "--out", str(out), "--no-charts"]) == 0
    return out


def comment(rendered: Path, capsys, *extra: str) -> str:
    (rendered / "preview.txt").write_text(PREVIEW)
    capsys.readouterr()
    args = ["--stack", str(rendered / "Pulumi.staging.yaml"), "--outputs", str(rendered / "outputs.json")]
    status = preview_comment.main([*args, "--preview", str(rendered / "preview.txt"), *extra])
    assert status == 0
    return capsys.readouterr().out


def flat(body: str) -> str:
    """The comment's text with its lines joined (lead-ins wrap at 120 characters)."""
    return " ".join(body.split())


def at_most(body: str) -> str:
    """The intro row's "at most per hour" cell of the lab cost table."""
    rows = tables.table(body.splitlines(), after="cost of the labs' GPU nodes in USD")
    (row,) = [row for row in rows if row["lab"] == "intro"]
    return row["at most per hour"]


def test_a_preview_writes_the_regions_cost_figures_and_nothing_else(written):
    path, outputs = written
    found = json.loads(path.read_text())
    assert found["region"] == "eu-west-1"
    book = preview_cost.book_from(found.pop("book"))
    assert (book.region, book.live, book.on_demand["g4dn.xlarge"]) == (
        "eu-west-1",
        True,
        float(EU_WEST_1["g4dn.xlarge"]),
    )
    assert found["cost"] == outputs["cost"]
    assert found["labs"] == {"intro": {"cost": outputs["labs"]["intro"]["cost"]}}
    assert usd(found["labs"]["intro"]["cost"]["atMostPerHour"]["usd"]) == EU_WEST_1_AT_MOST


def test_the_list_comes_back_as_it_was_written():
    assert preview_cost.book_from(json.loads(json.dumps(preview_cost.book_output(LIST)))) == LIST


def test_the_render_writes_no_preview_file(monkeypatch, tmp_path):
    path = tmp_path / "preview-cost.json"
    monkeypatch.setenv(preview_cost.ENV, str(path))
    assert render.run.main([str(ROOT / "Pulumi.staging.yaml"), "--out", str(tmp_path / "out"), "--no-charts"]) == 0
    assert not path.exists()


def test_the_comments_cost_tables_show_the_previews_regional_figures(written, rendered, capsys):
    path, outputs = written
    listed = json.loads((rendered / "outputs.json").read_text())["labs"]["intro"]["cost"]["atMostPerHour"]["usd"]
    assert usd(listed) != EU_WEST_1_AT_MOST  # the render's figure is the us-east-1 list's
    body = comment(rendered, capsys, "--preview-cost", str(path))
    assert at_most(body) == EU_WEST_1_AT_MOST
    assert "priced by `pulumi preview` from eu-west-1's prices" in flat(body)
    # The whole stack's table at the preview's prices: its total is the preview's `cost` output's.
    whole = tables.table(body.splitlines(), after="the whole stack in eu-west-1")
    assert whole[-1]["USD per hour"] == usd(outputs["cost"]["perHour"]["total"])
    assert whole[-1]["USD per hour"] != usd(
        json.loads((rendered / "outputs.json").read_text())["cost"]["perHour"]["total"]
    )
    # The diff stays the offline renders': like with like, said so.
    diffed = comment(rendered, capsys, "--preview-cost", str(path), "--base-outputs", str(rendered / "outputs.json"))
    assert "both at the us-east-1 list: like with like" in flat(diffed)
    assert at_most(diffed) == EU_WEST_1_AT_MOST


def test_without_the_file_the_comment_is_the_renders(rendered, capsys, tmp_path):
    listed = json.loads((rendered / "outputs.json").read_text())["labs"]["intro"]["cost"]["atMostPerHour"]["usd"]
    unchanged = comment(rendered, capsys)
    assert comment(rendered, capsys, "--preview-cost", str(tmp_path / "absent.json")) == unchanged
    assert at_most(unchanged) == usd(listed)
    assert "priced by `pulumi preview`" not in flat(unchanged)


def test_a_plan_priced_in_another_region_is_not_mixed_into_the_previews_figures(written, rendered):
    path, _ = written
    labs = json.loads((rendered / "outputs.json").read_text())["labs"]
    planned = {"karpenter": "v1.14.1", "region": "eu-west-1", "pricesRegion": "us-east-1", "labs": {}}
    priced = preview_comment.priced_at_preview(json.loads(path.read_text()), labs, planned, {"intro": 12}, False)
    assert usd(priced["labs"]["intro"]["cost"]["atMostPerHour"]["usd"]) == EU_WEST_1_AT_MOST
    assert "planner priced Karpenter's full lab (the plan below) at the us-east-1 list" in flat(
        "\n".join(priced["notes"])
    )


def test_the_workflow_has_the_preview_write_the_file_the_comment_reads():
    workflow = yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())
    steps = workflow["jobs"]["preview"]["steps"]
    (preview,) = [s for s in steps if "pulumi preview" in s.get("run", "")]
    assert preview["env"][preview_cost.ENV] == "${{ runner.temp }}/render/preview-cost.json"
    script = (ROOT / ".ci/preview-comment").read_text()
    assert '--preview-cost "$render/preview-cost.json"' in script
