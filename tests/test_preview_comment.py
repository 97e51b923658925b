"""The pull-request comment of a stack's preview: cost table first, preview output after, one comment per stack."""

import copy
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import domain.stack
import render.run
from domain.cost.lab_cost import usd
from domain.cost.price_book import LIST
from domain.upstream.versions import KUBE_PROXY_ADDON_VERSIONS
from rehearsal import class_day, report, term, twins
from reports import class_table, cost_diff, cost_report, preview_comment, version_change
from tests.conftest import BASE, ROOT, as_cli_config, run_values, stack_values
from tests.support import tables
from tests.support.synthetic import TIME_ZONE_STACK, lab

PREVIEW = "Previewing update (staging):\n\x1b[32m+ \x1b[0mkubernetes:karpenter.sh/v1:NodePool nodepool-intro create\n"


@pytest.fixture(scope="module")
def staging_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The render of the synthetic BASE stack (one lab, intro), standing in for the staging stack's."""
    out = tmp_path_factory.mktemp("render")
    stack_file = out / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump({"config": BASE}))
    assert render.run.main([str(stack_file), "--out", str(out)]) == 0
    return out


def staging_labs(staging_render: Path) -> dict:
    return json.loads((staging_render / "outputs.json").read_text())["labs"]


def test_the_comment_is_marker_then_cost_table_then_preview(staging_render):
    body = preview_comment.comment("staging", staging_labs(staging_render), PREVIEW)
    lines = body.splitlines()
    assert lines[:2] == ["<!-- gpulab-preview:staging -->", "#### `pulumi preview` of staging"]
    table = next(
        i for i, line in enumerate(lines) if tables.cells(line)[:3] == ["lab", "learner seats", "at most per hour"]
    )
    assert table < lines.index("<pre>")
    assert [row["lab"] for row in tables.table(lines)] == ["intro", "all labs"]


def test_the_preview_is_shown_uncoloured_and_html_escaped(staging_render):
    body = preview_comment.comment("staging", staging_labs(staging_render), PREVIEW + "<b>not bold</b>\n")
    assert "\x1b" not in body
    assert "+ kubernetes:karpenter.sh/v1:NodePool nodepool-intro create" in body
    assert "&lt;b&gt;not bold&lt;/b&gt;" in body


def test_a_long_preview_keeps_its_end_within_githubs_limit(staging_render):
    long = "x" * 100 + "\n" + "y" * 70_000 + "\nResources: 3 to create"
    body = preview_comment.comment("staging", staging_labs(staging_render), long)
    assert len(body) < 65_536
    assert body.count("Resources: 3 to create") == 1 and "the start is cut" in body


def test_escaping_and_a_big_cost_table_still_fit_githubs_limit(staging_render):
    (lab,) = staging_labs(staging_render).values()
    labs = {f"lab-{i}": lab for i in range(150)}
    preview = '<"&>\n' * 40_000 + "Resources: 3 to create"  # each line escapes to 19 characters
    body = preview_comment.comment("staging", labs, preview)
    assert len(body) <= preview_comment.MAX_COMMENT_CHARS
    assert [row["lab"] for row in tables.table(body.splitlines())][-2:] == ["lab-149", "all labs"]
    assert "&lt;&quot;&amp;&gt;\nResources: 3 to create" in body


def test_a_line_escaping_makes_4_times_longer_is_cut_escaped(staging_render):
    labs = staging_labs(staging_render)
    # Fits the room as written (under 64 KiB), not once each < becomes &lt;: 80,000 characters.
    line = "<" * 20_000
    body = preview_comment.comment("staging", labs, f"{line}\nResources: 3 to create")
    assert len(body) <= preview_comment.MAX_COMMENT_CHARS
    preview_lines = body.splitlines()[body.splitlines().index("<pre>") + 1 : body.splitlines().index("</pre>")]
    assert preview_lines == [preview_comment.CUT_NOTE, "Resources: 3 to create"]


def test_many_labs_show_first_rows_total_of_all_previews_end(staging_render):
    (lab,) = staging_labs(staging_render).values()
    labs = {f"lab-{i:04d}": lab for i in range(1000)}
    full = {"name": "full", "learners": 12, "bufferSeats": 0, "nodeClaims": [], "unschedulable": 0, "undecided": 0}
    full |= {"stopped": None, "reason": None}
    scenarios = [{**full, "name": name, "costPerHour": 2.104} for name in ("one", "full", "full-trickle")]
    planned = {
        "karpenter": "v1.14.1",
        "region": "eu-west-1",
        "pricesRegion": "us-east-1",
        "labs": {name: {"scenarios": scenarios} for name in labs},
    }
    preview = "~ kubernetes:core/v1:ConfigMap update\n" * 8_000 + "Resources: 1 to update"
    body = preview_comment.comment("staging", labs, preview, "https://github.com/o/r/actions/runs/7", planned)
    assert len(body) <= preview_comment.MAX_COMMENT_CHARS
    lines = body.splitlines()
    cost_rows = [row["lab"] for row in tables.table(lines)]
    shown = cost_rows[:-1]
    assert 0 < len(shown) < 1000 and shown == sorted(labs)[: len(shown)]
    # The total still adds up every lab, those left out too: their seats and their ceilings.
    total = tables.table(lines)[-1]
    assert cost_rows[-1] == "all labs" and total["learner seats"] == str(1000 * lab["learnerSeats"])
    assert total["at most per hour"] == usd(1000 * lab["cost"]["atMostPerHour"]["usd"])
    assert list(dict.fromkeys(row["lab"] for row in tables.table(lines, tables.PLAN_TABLE))) == shown
    assert (
        f"The tables leave out the last {1000 - len(shown)} of the 1000 labs to fit GitHub's limit on a comment; the "
        "render step of the workflow run lists them all: https://github.com/o/r/actions/runs/7"
    ) in lines
    # The preview keeps its room, and its end.
    preview_lines = lines[lines.index("<pre>") + 1 : lines.index("</pre>")]
    assert len("\n".join(preview_lines)) >= preview_comment.PREVIEW_MIN_CHARS - len(preview_comment.CUT_NOTE) - 1
    assert preview_lines[-1] == "Resources: 1 to update"


def test_a_failed_preview_still_gets_the_cost_table_and_a_link(staging_render):
    body = preview_comment.comment("staging", staging_labs(staging_render), "", "https://github.com/o/r/actions/runs/7")
    assert "The preview did not finish; its log is in the workflow run: https://github.com/o/r/actions/runs/7" in body
    assert "<pre>" not in body and [row["lab"] for row in tables.table(body.splitlines())] == ["intro", "all labs"]


# --- .ci/preview-comment posts one comment per stack, and updates it on the next push -------------------------------

# Stands in for gh: answers `api --paginate <comments> --jq <filter>` by running jq on the canned comments, and logs
# every other call with the body it would send.
FAKE_GH = """import json, os, subprocess, sys
args = sys.argv[1:]
if "--jq" in args:
    query = args[args.index("--jq") + 1]
    subprocess.run(["jq", "-r", query], input=os.environ["FAKE_COMMENTS"], text=True, check=True)
else:
    field = args[args.index("-F") + 1]
    body = open(field.removeprefix("body=@")).read()
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps({"method": args[args.index("--method") + 1], "path": args[3], "body": body}) + "\\n")
"""


def post(
    tmp_path: Path,
    staging_render: Path,
    comments: list[dict],
    preview: str | None = PREVIEW,
    base: Path | None = None,
    status: int = 0,
    stack_file: Path | None = None,
) -> list[dict]:
    """Runs .ci/preview-comment for staging on pull request 42 against a fake gh; the calls it made. The stack is the
    file the render read (`stack_file`, by default the one beside the render, as the fixture writes it), not the
    repository's Pulumi.staging.yaml, whatever that holds. A preview of None leaves no preview file, as a job that
    failed before the preview step does; `base` is the base's render; `status` the script's exit status expected."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f"#!{sys.executable}\n{FAKE_GH}")
    (bin_dir / "gh").chmod(0o755)
    if preview is not None:
        (tmp_path / "preview.txt").write_text(preview)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        GITHUB_REPOSITORY="acme/gpulab",
        FAKE_COMMENTS=json.dumps(comments),
        FAKE_LOG=str(tmp_path / "calls.jsonl"),
    )
    stack = str(stack_file or staging_render / "Pulumi.staging.yaml")
    command = [str(ROOT / ".ci/preview-comment"), stack, "42", str(staging_render), str(tmp_path / "preview.txt")]
    command += [str(base)] if base else []
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == status, done.stderr
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def bot(comment_id: int, body: str, login: str = "github-actions[bot]") -> dict:
    return {"id": comment_id, "user": {"login": login}, "body": body}


needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (it evaluates gh's --jq here)")


@needs_jq
def test_first_preview_of_a_stack_posts_a_new_comment(tmp_path, staging_render):
    calls = post(tmp_path, staging_render, [bot(1, "<!-- gpulab-preview:prod -->\nprod's comment")])
    assert [(c["method"], c["path"]) for c in calls] == [("POST", "repos/acme/gpulab/issues/42/comments")]
    assert calls[0]["body"].startswith("<!-- gpulab-preview:staging -->\n")


@needs_jq
def test_the_next_preview_updates_its_comment_not_a_look_alike(tmp_path, staging_render):
    marker = "<!-- gpulab-preview:staging -->"
    comments = [bot(5, f"{marker}\nold"), bot(6, f"{marker}\nnot ours", login="mallory"), bot(7, "other")]
    calls = post(tmp_path, staging_render, comments)
    assert [(c["method"], c["path"]) for c in calls] == [("PATCH", "repos/acme/gpulab/issues/comments/5")]
    assert [row["lab"] for row in tables.table(calls[0]["body"].splitlines())] == ["intro", "all labs"]


@needs_jq
def test_a_preview_too_big_for_an_env_var_still_gets_comment(tmp_path, staging_render):
    # 300 KiB: passed through an environment variable, it would exceed Linux's 128 KiB for one (MAX_ARG_STRLEN).
    large = "~ kubernetes:core/v1:ConfigMap update\n" * 8_000 + "Resources: 1 to update"
    assert len(large.encode()) > 128 * 1024
    (call,) = post(tmp_path, staging_render, [], preview=large)
    assert call["body"].rstrip().endswith("Resources: 1 to update\n</pre>\n</details>")
    assert len(call["body"]) <= preview_comment.MAX_COMMENT_CHARS


@needs_jq
def test_an_unrun_preview_gets_the_cost_table_and_a_link(tmp_path, staging_render):
    (call,) = post(tmp_path, staging_render, [], preview=None)
    assert "The preview did not finish; its log is in the workflow run" in call["body"]
    assert [row["lab"] for row in tables.table(call["body"].splitlines())] == ["intro", "all labs"]


def test_the_workflow_hands_the_preview_over_by_file_not_env():
    workflow = yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())
    steps = workflow["jobs"]["preview"]["steps"]
    for step in steps:
        assert not any("steps." in str(value) for value in step.get("env", {}).values()), step.get("name")
    (preview,) = [s for s in steps if "pulumi preview" in s.get("run", "")]
    (comment,) = [s for s in steps if ".ci/preview-comment" in s.get("run", "")]
    # The preview's output goes into the file the comment step reads; bash's pipefail keeps a failed preview failed.
    assert preview["shell"] == "bash"
    assert 'tee "$RUNNER_TEMP/preview.txt"' in preview["run"]
    assert comment["run"].split()[4] == '"$RUNNER_TEMP/preview.txt"'


@pytest.fixture(scope="module")
def zones_render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The render of tests/support/synthetic.py TIME_ZONE_STACK (classes in five zones), without charts."""
    out = tmp_path_factory.mktemp("zones")
    stack_file = out / "Pulumi.zones.yaml"
    stack_file.write_text(yaml.safe_dump({"config": TIME_ZONE_STACK}))
    assert render.run.main([str(stack_file), "--out", str(out), "--no-charts", "--today", "2027-03-25"]) == 0
    return out


def comment_of(tmp_path: Path, zones_render: Path, values: dict, capsys: pytest.CaptureFixture[str]) -> tuple:
    """(status, stdout, stderr) of the comment for a stack file of `values` beside the zones' render, on 25 March
    2027."""
    capsys.readouterr()
    stack_file = tmp_path / "Pulumi.zones.yaml"
    stack_file.write_text(yaml.safe_dump({"config": values}))
    (tmp_path / "preview.txt").write_text(PREVIEW)
    files = ["--outputs", str(zones_render / "outputs.json"), "--preview", str(tmp_path / "preview.txt")]
    status = preview_comment.main(["--stack", str(stack_file), *files, "--today", "2027-03-25"])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_comment_shows_each_class_clock_utc_term_and_next(tmp_path, zones_render, capsys):
    status, out, _ = comment_of(tmp_path, zones_render, TIME_ZONE_STACK, capsys)
    lines = out.splitlines()
    assert status == 0
    classes = tables.table(lines, "classes:")
    terms = tables.table(lines, class_table.TERMS_LEAD_IN)
    assert len(classes) == 10 and terms[0]["term"] == "2027-03-01 to 2027-11-15, not 2027-03-30, 2027-11-02"
    assert [r["at"] for r in tables.table(lines, "the classes in UTC") if r["lab"] == "lord-howe"] == [
        "UTC+11:00",
        "UTC+10:30",
        "UTC+11:00",
        "UTC+10:30",
    ]
    (first, *_) = tables.table(lines, "the next 3 classes of each from 2027-03-25")
    assert (first["starts"], first["in UTC"]) == ("Thu 2027-03-25 09:00 CET", "Thu 2027-03-25 08:00")
    # Between the cost table and the preview.
    assert lines.index("<details><summary>Pulumi preview</summary>") > lines.index(f"{class_table.LEAD_IN}:")


def test_an_unreadable_stack_file_is_one_line_naming_its_key(tmp_path, zones_render, capsys):
    status, out, err = comment_of(
        tmp_path, zones_render, {**TIME_ZONE_STACK, "gpulab:timeZone": "Europe/Berln"}, capsys
    )
    assert (status, out) == (2, "")
    assert err.startswith("gpulab:timeZone: 'Europe/Berln' is not a time zone of the IANA tz database")


# --- the cost diff against the base branch's render, as Infracost's diff -------------------------------------------


def labs_of(labs: dict) -> dict:
    """The `labs` output of a synthetic stack of these labs."""
    return run_values(stack_values(**{"gpulab:labs": labs})).outputs["labs"]


# The base: intro of 4 GPUs and a lab the change removes; the head: intro of 8 GPUs and a lab it adds.
BASE_LABS = {"intro": lab(["g4dn.xlarge"], 3, 4), "retired": lab(["g4dn.xlarge"], 2, 2)}
HEAD_LABS = {"intro": lab(["g4dn.xlarge"], 3, 8), "vision": lab(["g5.xlarge"], 2, 2)}


def diff_rows(body: str) -> dict[str, dict[str, str]]:
    return {row["lab"]: row for row in tables.table(body.splitlines(), cost_diff.LEAD_IN)}


def test_the_comment_diffs_added_removed_labs_and_max_gpus():
    base, head = labs_of(BASE_LABS), labs_of(HEAD_LABS)
    body = preview_comment.comment("staging", head, PREVIEW, base=base)
    rows = diff_rows(body)
    assert list(rows) == ["intro", "retired", "vision", "all labs"]
    intro = rows["intro"]
    assert (
        intro[""] == "~"
        and intro["learner seats"] == f"{base['intro']['learnerSeats']} → {head['intro']['learnerSeats']}"
    )
    at_most = [usd(labs["intro"]["cost"]["atMostPerHour"]["usd"]) for labs in (base, head)]
    assert intro["at most per hour"] == " → ".join(at_most)
    assert (
        rows["retired"][""] == "-"
        and rows["retired"]["at most change"] == f"-{usd(base['retired']['cost']['atMostPerHour']['usd'])}"
    )
    assert rows["vision"][""] == "+" and rows["vision"]["at most per hour"] == usd(
        head["vision"]["cost"]["atMostPerHour"]["usd"]
    )
    assert rows["vision"]["at most change"] == f"+{usd(head['vision']['cost']['atMostPerHour']['usd'])}"
    before = sum(lab["cost"]["atMostPerHour"]["usd"] for lab in base.values())
    after = sum(lab["cost"]["atMostPerHour"]["usd"] for lab in head.values())
    assert rows["all labs"]["at most per hour"] == f"{usd(before)} → {usd(after)}"
    assert rows["all labs"]["at most change"].startswith(f"+{usd(after - before)} (+")
    # Each lab's term cost beside its ceiling: without classes, a 730-hour month at the ceiling.
    term = {name: lab["cost"]["term"]["usd"] for name, lab in (base | head).items()}
    assert intro["term cost"] == f"{usd(base['intro']['cost']['term']['usd'])} → {usd(term['intro'])}"
    assert intro["term change"] == f"+{usd(term['intro'] - base['intro']['cost']['term']['usd'])}"
    assert rows["retired"]["term cost"] == usd(term["retired"]) and rows["retired"]["term change"] == (
        f"-{usd(term['retired'])}"
    )
    assert rows["vision"]["term cost"] == usd(term["vision"]) and rows["vision"]["term change"] == (
        f"+{usd(term['vision'])}"
    )
    terms = [sum(lab["cost"]["term"]["usd"] for lab in labs.values()) for labs in (base, head)]
    assert rows["all labs"]["term cost"] == f"{usd(terms[0])} → {usd(terms[1])}"
    assert "term cost: a 730-hour month at the labs' at most per hour (no class has a term)" in body.splitlines()
    # Above the cost table, whose rows are the head's labs.
    lines = body.splitlines()
    assert lines.index(next(line for line in lines if line.startswith(cost_diff.LEAD_IN))) < lines.index("<pre>")
    assert [row["lab"] for row in tables.table(lines, "cost of the labs")] == ["intro", "vision", "all labs"]


TERM = {"start": "2027-01-11", "end": "2027-01-24"}  # two Mondays, 14 days


def a_class(duration: str) -> dict:
    return {"schedule": "0 9 * * mon", "duration": duration, "term": TERM}


def test_a_changed_class_changes_term_cost_not_the_ceiling():
    base = labs_of({"intro": lab(["g4dn.xlarge"], 3, 4, classes=[a_class("1h")])})
    head = labs_of({"intro": lab(["g4dn.xlarge"], 3, 4, classes=[a_class("2h")])})
    body = preview_comment.comment("staging", head, PREVIEW, base=base)
    rows = diff_rows(body)
    # Two classes, each its 20m warm-up, its duration and consolidateAfter (10m) at the "at most" of
    # 4 x (0.526 + 0.0021918) = 2.1128: 2 x 1h30m = 3 hours cost 6.3384, 2 x 2h30m = 5 hours 10.564.
    assert rows["intro"][""] == "~" and rows["intro"]["at most per hour"] == "2.1128"
    assert rows["intro"]["term cost"] == "6.3384 → 10.5640" and rows["intro"]["term change"] == "+4.2256"
    assert rows["all labs"]["term cost"] == "6.3384 → 10.5640"
    assert rows["all labs"]["term change"] == "+4.2256 (+66.7%)"
    assert rows["all labs"]["at most change"] == "+0.0000 (+0.0%)"
    assert tables.lead_ins(body.splitlines(), ("term cost:",)) == [
        "term cost: the term, 2027-01-11 to 2027-01-24: each warm-up and class and consolidateAfter after it at the "
        "lab's at most per hour, a lab without classes at it all term"
    ]


def test_a_base_without_term_cost_is_diffed_saying_so():
    base, head = labs_of(BASE_LABS), labs_of(HEAD_LABS)
    old = {name: {**lab, "cost": {k: v for k, v in lab["cost"].items() if k != "term"}} for name, lab in base.items()}
    body = preview_comment.comment("staging", head, PREVIEW, base=old)
    rows = diff_rows(body)
    assert rows["intro"]["term cost"] == f"n/a → {usd(head['intro']['cost']['term']['usd'])}"
    assert rows["intro"]["term change"] == "n/a" and rows["retired"]["term cost"] == "n/a"
    assert rows["vision"]["term change"] == f"+{usd(head['vision']['cost']['term']['usd'])}"
    assert rows["all labs"]["term cost"].startswith("n/a → ") and rows["all labs"]["term change"] == "n/a"
    assert cost_diff.NOT_RENDERED_NOTE in body.splitlines()
    # A lab that only lacks the term in the base is no change.
    assert list(diff_rows(preview_comment.comment("staging", base, PREVIEW, base=old))) == ["all labs"]


def test_a_lab_the_change_leaves_alone_has_no_row_in_the_diff():
    base = labs_of(BASE_LABS)
    body = preview_comment.comment("staging", base, PREVIEW, base=base)
    assert list(diff_rows(body)) == ["all labs"]
    assert "0 added, 0 removed, 0 changed, 2 unchanged" in body


@pytest.mark.parametrize(
    ("threshold", "flagged"),
    [(None, False), (1, True), (1000, False), ("10%", True), ("1000%", False)],
)
def test_a_ceiling_rise_over_the_threshold_is_flagged_on_top(threshold, flagged):
    base, head = labs_of(BASE_LABS), labs_of(HEAD_LABS)
    body = preview_comment.comment("staging", head, PREVIEW, base=base, threshold=threshold)
    lines = body.splitlines()
    assert (lines[3] == "> [!WARNING]") is flagged
    if flagged:
        assert "more than gpulab:costAlertThreshold" in lines[4] and lines[4].startswith(
            "> This change raises the labs' at most by +"
        )
    # A fall is never flagged.
    assert "[!WARNING]" not in preview_comment.comment("staging", base, PREVIEW, base=head, threshold=threshold)


def test_a_percentage_threshold_is_of_the_bases_ceiling():
    # 9 -> 10 GPUs: the ceiling rises by 11.1% of the base's, by 10% of the head's; "10%" flags it (more than 10%).
    base, head = (labs_of({"intro": lab(["g4dn.xlarge"], 3, gpus)}) for gpus in (9, 10))
    body = preview_comment.comment("staging", head, PREVIEW, base=base, threshold="10%")
    assert body.splitlines()[3:5] == [
        "> [!WARNING]",
        "> This change raises the labs' at most by +0.5282 USD per hour (4.7538 → 5.2820, +11.1%), more than "
        "gpulab:costAlertThreshold (10%).",
    ]


def test_a_cut_comment_diffs_every_labs_ceiling_in_its_total(staging_render):
    (one,) = staging_labs(staging_render).values()
    at_most = one["cost"]["atMostPerHour"]
    dearer = {**one, "cost": {**one["cost"], "atMostPerHour": {**at_most, "usd": at_most["usd"] * 2}}}
    base = {f"lab-{i:04d}": one for i in range(1000)}
    head = {f"lab-{i:04d}": dearer for i in range(1000)}
    body = preview_comment.comment("staging", head, "Resources: 1 to update", base=base)
    assert len(body) <= preview_comment.MAX_COMMENT_CHARS
    rows = diff_rows(body)
    assert 0 < len(rows) - 1 < 1000
    assert rows["all labs"]["at most per hour"] == (
        f"{usd(1000 * one['cost']['atMostPerHour']['usd'])} → {usd(1000 * dearer['cost']['atMostPerHour']['usd'])}"
    )


def test_comment_reads_threshold_from_stack_base_from_render(tmp_path, capsys):
    base_values = stack_values(**{"gpulab:labs": BASE_LABS})
    head_values = stack_values(**{"gpulab:labs": HEAD_LABS, "gpulab:costAlertThreshold": "10%"})
    for name, values in (("base", base_values), ("head", head_values)):
        (tmp_path / name).mkdir()
        stack_file = tmp_path / name / "Pulumi.staging.yaml"
        stack_file.write_text(yaml.safe_dump({"config": values}))
        assert render.run.main([str(stack_file), "--out", str(tmp_path / name), "--no-charts"]) == 0
    (tmp_path / "preview.txt").write_text(PREVIEW)
    capsys.readouterr()
    status = preview_comment.main(
        [
            *("--stack", str(tmp_path / "head" / "Pulumi.staging.yaml")),
            *("--outputs", str(tmp_path / "head" / "outputs.json")),
            *("--base-outputs", str(tmp_path / "base" / "outputs.json")),
            *("--preview", str(tmp_path / "preview.txt")),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0 and out.splitlines()[3] == "> [!WARNING]"
    assert list(diff_rows(out)) == ["intro", "retired", "vision", "all labs"]
    # The whole stack's total, from both renders' `cost` output.
    totals = [
        json.loads((tmp_path / n / "outputs.json").read_text())["cost"]["perHour"]["total"] for n in ("base", "head")
    ]
    whole = next(line for line in out.splitlines() if line.startswith("the whole stack (the `cost` output"))
    assert f"USD per hour: {usd(totals[0])} → {usd(totals[1])} (+{usd(totals[1] - totals[0])})" in whole


def test_the_workflow_renders_the_base_and_hands_its_outputs_on():
    workflow = yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())
    steps = workflow["jobs"]["preview"]["steps"]
    (base,) = [s for s in steps if s.get("with", {}).get("ref") == "${{ github.event.pull_request.base.sha }}"]
    (base_render,) = [s for s in steps if s.get("working-directory") == base["with"]["path"]]
    assert "-m tools.render" in base_render["run"] and '--out "$RUNNER_TEMP/base-render"' in base_render["run"]
    (comment,) = [s for s in steps if ".ci/preview-comment" in s.get("run", "")]
    assert comment["run"].split()[-1] == '"$RUNNER_TEMP/base-render"'
    assert steps.index(base_render) < steps.index(comment)


@needs_jq
def test_the_posted_comment_diffs_when_the_base_has_outputs(tmp_path, staging_render):
    base = tmp_path / "base-render"
    base.mkdir()
    outputs = json.loads((staging_render / "outputs.json").read_text())
    (base / "outputs.json").write_text(json.dumps({**outputs, "labs": {}}))
    (call,) = post(tmp_path, staging_render, [], base=base)
    assert [row["lab"] for row in tables.table(call["body"].splitlines(), cost_diff.LEAD_IN)] == ["intro", "all labs"]


@pytest.mark.parametrize("threshold", ["ten%", "0%", "-5%", 0, -1.5, True, [1]])
def test_a_threshold_not_usd_or_percent_is_a_line_naming_it(threshold):
    values = stack_values(**{"gpulab:costAlertThreshold": threshold})
    with pytest.raises(domain.stack.ConfigError, match=r"^gpulab:costAlertThreshold: must be ") as caught:
        domain.stack.from_cli(as_cli_config(values))
    assert len(caught.value.lines) == 1


# --- the class day the rehearsal played, beside the render (rehearsal/report.py) --------------------------------

CLASS_DAY = "the class day on the twin"


def rehearsed(lab_name: str = "intro") -> dict:
    """A rehearsal.json of one class of `lab_name`, short of one warm seat, with one learner moved."""
    moments = [("2027-01-04T09:00:00Z", "classStart"), ("2027-01-04T10:00:00Z", "classEnd")]
    events = [{"at": at, "what": what, "lab": lab_name, "class": 0, "learner": None} for at, what in moments]
    one = {"index": 0, "warmSeats": 12, "warmAtStart": 11, "learnersArrived": 12, "boundWithoutNewNode": 11}
    one |= {"waitSeconds": {"p50": 1.0, "p95": 42.5, "max": 50.0}, "disruptedDuringClass": 1, "nodesAfterEnd": 0}
    one |= {"disruptedBySpot": 0}
    one |= {"readyAtStart": 10, "waitToReadySeconds": {"p50": 1.0, "p95": 242.5, "max": 250.0}}
    day = {"events": events, "classes": [one], "nodeHours": 5.25, "lowerBoundNodeHours": 4.0, "cost": 2.7615}
    day |= {"lowerBoundCost": 2.104}
    return {"kubernetes": "v1.34.12", "karpenter": "v1.14.1", "labs": {lab_name: day}}


def test_the_comment_shows_rehearsed_classes_and_cost_vs_bound(staging_render):
    body = preview_comment.comment("staging", staging_labs(staging_render), PREVIEW, rehearsed=rehearsed())
    lines = body.splitlines()
    assert tables.table(lines, CLASS_DAY)[0] == {
        "lab": "intro",
        "class": "classes[0]",
        "start (UTC)": "2027-01-04T09:00:00Z",
        "ready at start": "10 of 12",
        "learners": "12",
        "disrupted": "1",
        "moved by spot": "0",
        "p95 wait to ready s": "242.5",
        "nodes after": "0",
    }
    (day,) = [tables.cells(line) for line in lines if tables.cells(line)[:2] == ["intro", "5.25"]]
    assert day == ["intro", "5.25", "4", "2.7615", "2.1040"]  # node-hours and USD, each against its lower bound
    assert report.NOT_RUN not in lines
    assert lines.index(report.table(rehearsed())[0]) < lines.index("<pre>")


def test_without_a_rehearsal_the_comment_says_so_in_a_line(staging_render):
    lines = preview_comment.comment("staging", staging_labs(staging_render), PREVIEW).splitlines()
    assert lines.count(report.NOT_RUN) == 1
    assert not any(line.startswith(CLASS_DAY) for line in lines)


@needs_jq
def test_the_comment_reads_the_rehearsal_json_beside_the_render(tmp_path, staging_render):
    render_dir = tmp_path / "render"
    shutil.copytree(staging_render, render_dir)
    (render_dir / report.REHEARSAL).write_text(json.dumps(rehearsed()))
    (call,) = post(tmp_path, render_dir, [])
    assert tables.table(call["body"].splitlines(), CLASS_DAY)[0]["ready at start"] == "10 of 12"


# --- the preview job rehearses the stack it previews (.ci/rehearse) ---------------------------------------------------


def preview_steps() -> list[dict]:
    return yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())["jobs"]["preview"]["steps"]


def test_the_preview_job_rehearses_on_the_twin_for_the_comment():
    steps = preview_steps()
    (render_step,) = [s for s in steps if s.get("id") == "render"]
    (build,) = [s for s in steps if s.get("run", "").startswith("make ")]
    (rehearse,) = [s for s in steps if s.get("run", "").startswith(".ci/rehearse ")]
    (preview,) = [s for s in steps if "pulumi preview" in s.get("run", "")]
    (comment,) = [s for s in steps if ".ci/preview-comment" in s.get("run", "")]
    # Each make target the build names is one of the Makefile's, with a rule.
    makefile = (ROOT / "Makefile").read_text().splitlines()
    targets = build["run"].split()[1:]
    assert {"twin", "planner"} <= set(targets)
    assert all(any(line.startswith(f"{t}:") for line in makefile) for t in targets), targets
    script = ROOT / ".ci/rehearse"
    assert script.is_file() and os.access(script, os.X_OK)
    # The rehearsal.json goes into the render the comment reads (its third argument) and the render step wrote.
    render_dir = comment["run"].split()[3]
    assert rehearse["run"].split()[-1] == render_dir == render_step["run"].split()[-1]
    assert rehearse["env"]["STACK"] == comment["env"]["STACK"] == "${{ matrix.stack }}"
    # Built and rehearsed after the render, whatever the preview did, before the comment (which runs after a failure).
    order = [steps.index(s) for s in (render_step, preview, build, rehearse, comment)]
    assert order == sorted(order)
    for step in (build, rehearse, comment):
        assert "!cancelled()" in step["if"] and "steps.render.outcome == 'success'" in step["if"]
    assert "continue-on-error" not in rehearse  # a failed rehearsal fails the job, as in CI


def test_both_jobs_key_the_go_cache_on_every_go_sum_read():
    workflow = yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())
    keys = [
        step["with"]["cache-dependency-path"].split()
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if step.get("uses", "").startswith("actions/setup-go@")
    ]
    assert len(keys) == 2 and keys[0] == keys[1]
    sums = {p.relative_to(ROOT) for p in ROOT.glob("**/go.sum") if ".venv" not in p.parts}
    matched = {p.relative_to(ROOT) for pattern in keys[0] for p in ROOT.glob(pattern)}
    assert {Path(f"rehearsal/controlplane/{minor}/go.sum") for minor in twins.minors()} <= sums == matched


def test_a_failed_or_unrun_rehearsal_fails_the_step_saying_why(tmp_path):
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(yaml.safe_dump({"config": stack_values(**{"gpulab:labs": {"intro": {"maxGpus": 4}}})}))
    render_dir = tmp_path / "render"
    render_dir.mkdir()
    summary = tmp_path / "summary.md"
    done = subprocess.run(
        [str(ROOT / ".ci/rehearse"), str(stack_file), str(tmp_path / "rehearsal"), str(render_dir)],
        env=dict(os.environ, GITHUB_STEP_SUMMARY=str(summary)),
        capture_output=True,
        text=True,
        check=False,
    )
    # Without the twin built the rehearsal does not run (status 1); with it, the stack file's problems stop it (2).
    assert done.returncode in (1, 2), done.stderr
    why = [line for line in done.stderr.splitlines() if line.startswith(("rehearsal not run:", "gpulab:"))]
    assert why, done.stderr
    text = summary.read_text()
    assert text.startswith(f"### The rehearsal of {stack_file} (exit status {done.returncode})")
    assert all(line in text.splitlines() for line in why)
    assert report.NOT_RUN in text.splitlines()  # no rehearsal.json: the tables' one line says so
    assert not (render_dir / report.REHEARSAL).exists()


def trickled_rehearsal() -> dict:
    """rehearsal.json of the BASE stack's intro (no classes; 12 seats of g4dn.xlarge, 3 a node) made by
    rehearsal/class_day.py from a synthetic log of its day: a node launched for every third learner as they arrive, each
    bound, their notebook running, as they arrive, the 13th as the first leaves."""
    settings = domain.stack.from_cli(as_cli_config(BASE)).settings
    intro = settings.labs["intro"]
    steps = class_day.timeline(settings, term.days(settings, datetime.date(2027, 1, 4))[0])["intro"]
    arrivals = [s for s in steps if s["what"] == "arrive"]
    first_leave = next(s for s in steps if s["what"] == "leave")
    observed = []
    for k, step in enumerate(arrivals[: intro.learner_seats]):
        node = f"n{k // 3}"
        if k % 3 == 0:
            observed.append(
                {"at": step["at"], "what": "nodeLaunched", "lab": "intro", "node": node, "instanceType": "g4dn.xlarge"}
                | {"capacityType": "on-demand", "pricePerHour": LIST.on_demand["g4dn.xlarge"]}
            )
        for what in ("bound", "ready"):
            observed.append({"at": step["at"], "what": what, "lab": "intro", "learner": step["learner"], "node": node})
    for what in ("bound", "ready"):
        observed.append({"at": first_leave["at"], "what": what, "lab": "intro", "learner": "intro-13", "node": "n0"})
    section = class_day.lab_section("intro", intro, steps, observed, intro.least_warmup_seconds("intro"))
    return {"kubernetes": "v1.34.12", "karpenter": "v1.14.1", "labs": {"intro": section}}


@needs_jq
def test_comment_shows_classless_seating_and_usd_cost_vs_bound(tmp_path, staging_render):
    rehearsal = trickled_rehearsal()
    render_dir = tmp_path / "render"
    shutil.copytree(staging_render, render_dir)
    (render_dir / report.REHEARSAL).write_text(json.dumps(rehearsal))
    (call,) = post(tmp_path, render_dir, [])
    lines = call["body"].splitlines()
    assert report.NOT_RUN not in lines
    (trickle,) = tables.table(lines, CLASS_DAY)
    assert trickle == {
        "lab (no classes)": "intro",
        "seated at once": "12 of 12",
        "extra learner": "intro-13",
        "extra bound (UTC)": "2027-01-04T00:13:00Z",
        "extra wait s": "60",
        "others seated then": "11",
        "p95 wait to ready s": "60",
        "most GPUs": "4 of 4",
    }
    day = rehearsal["labs"]["intro"]
    (row,) = [tables.cells(line) for line in lines if tables.cells(line)[:2] == ["intro", f"{day['nodeHours']:g}"]]
    assert row[3:] == [usd(day["cost"]), usd(day["lowerBoundCost"])]
    assert day["lowerBoundCost"] < day["cost"]  # four nodes up until the day's end, against the learners there


# --- a Kubernetes version change EKS would refuse, against the base's render (reports/version_change.py) -----------


def with_version(render_dir: Path, out: Path, version: str | None) -> Path:
    """The render's outputs.json and resources.json in `out`, its cluster asking for `version` (None: for none)."""
    out.mkdir()
    shutil.copy(render_dir / "outputs.json", out)
    resources = json.loads((render_dir / "resources.json").read_text())
    (cluster,) = [r for r in resources if r["type"] == version_change.CLUSTER_TYPE]
    cluster["inputs"].pop("version")
    if version is not None:
        cluster["inputs"]["version"] = version
    (out / "resources.json").write_text(json.dumps(resources))
    return out


def gate(tmp_path: Path, staging_render: Path, base: Path | None, capsys) -> tuple[int, list[str], str]:
    """preview_comment.main for the staging render against `base`: its status, comment lines and stderr."""
    (tmp_path / "preview.txt").write_text(PREVIEW)
    stack_file = tmp_path / "Pulumi.staging.yaml"
    stack_file.write_text(yaml.safe_dump({"config": BASE}))
    capsys.readouterr()
    files = ["--outputs", str(staging_render / "outputs.json"), "--preview", str(tmp_path / "preview.txt")]
    files += ["--base-outputs", str(base / "outputs.json")] if base else []
    status = preview_comment.main(["--stack", str(stack_file), *files])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


REFUSED = {
    ("1.34", "1.36"): [
        "gpulab:cluster.kubernetesVersion: this change moves the cluster from Kubernetes 1.34 to 1.36 at once",
        '"Upgrades of more than one Kubernetes version are not supported"',
        "Move it to 1.35 in this change, and on to 1.36 one minor version per change once each is applied",
    ],
    ("1.35", "1.34"): [
        "gpulab:cluster.kubernetesVersion: this change moves the cluster back from Kubernetes 1.35 to 1.34",
        "EKS does not downgrade a cluster",
        "an EKS version rollback to the previous minor version within 7 days of the upgrade, an EKS operation made "
        "outside Pulumi (https://docs.aws.amazon.com/eks/latest/userguide/rollback-cluster.html)",
    ],
}


@pytest.mark.parametrize(("base", "head"), [*REFUSED, ("1.35", "1.36"), ("1.35", "1.35"), (None, "1.36")])
def test_a_version_eks_refuses_fails_the_preview_saying_why(tmp_path, staging_render, capsys, base, head):
    head_render = with_version(staging_render, tmp_path / "head", head)
    base_render = with_version(staging_render, tmp_path / "base", base)
    status, lines, err = gate(tmp_path, head_render, base_render, capsys)
    if (base, head) not in REFUSED:
        assert status == 0 and err == "" and "> [!CAUTION]" not in lines
        return
    assert status == preview_comment.REFUSED == 3
    assert lines[3] == "> [!CAUTION]" and lines[4].startswith("> ") and lines[5] == ""
    assert err.strip() == lines[4].removeprefix("> ")
    for words in REFUSED[(base, head)]:
        assert words in lines[4]
    # The rest of the comment is there as ever: the cost diff, then the preview.
    assert tables.table(lines, cost_diff.LEAD_IN) and "<pre>" in lines


def test_without_a_base_render_any_version_passes(tmp_path, staging_render, capsys):
    status, lines, err = gate(tmp_path, with_version(staging_render, tmp_path / "head", "1.36"), None, capsys)
    assert status == 0 and err == "" and "> [!CAUTION]" not in lines


def test_renders_at_two_versions_pass_up_and_fail_down(tmp_path, capsys):
    older, newer = sorted(KUBE_PROXY_ADDON_VERSIONS, key=version_change.minor)[-2:]
    renders = {}
    for version in (older, newer):
        out = tmp_path / version
        out.mkdir()
        stack_file = out / "Pulumi.staging.yaml"
        stack_file.write_text(yaml.safe_dump({"config": stack_values(**{"gpulab:cluster": cluster(version)})}))
        assert render.run.main([str(stack_file), "--out", str(out), "--no-charts"]) == 0
        renders[version] = out
    assert gate(tmp_path, renders[newer], renders[older], capsys)[0] == 0
    status, lines, _ = gate(tmp_path, renders[older], renders[newer], capsys)
    assert status == 3 and f"moves the cluster back from Kubernetes {newer} to {older}" in lines[4]


def cluster(version: str) -> dict:
    return {**BASE["gpulab:cluster"], "kubernetesVersion": version}


@needs_jq
def test_a_refused_version_is_posted_then_fails_the_step(tmp_path, staging_render):
    base = with_version(staging_render, tmp_path / "base", "1.33")
    head = with_version(staging_render, tmp_path / "head", "1.35")
    stack_file = staging_render / "Pulumi.staging.yaml"
    (call,) = post(tmp_path, head, [], base=base, status=preview_comment.REFUSED, stack_file=stack_file)
    assert call["method"] == "POST" and call["body"].splitlines()[3:5] == [
        "> [!CAUTION]",
        "> gpulab:cluster.kubernetesVersion: this change moves the cluster from Kubernetes 1.33 to 1.35 at once, and "
        'EKS upgrades a control plane one minor version at a time ("Upgrades of more than one Kubernetes version are '
        'not supported", https://docs.aws.amazon.com/eks/latest/eksctl/cluster-upgrade.html). Move it to 1.34 in this '
        "change, and on to 1.35 one minor version per change once each is applied (docs/upgrading.md).",
    ]


# --- like with like: an hour with an hour, a term with the same term, Karpenter's figure with Karpenter's -----------

TERM_LABS = {"intro": lab(["g4dn.xlarge"], 3, 4, classes=[a_class("1h")]), "open": lab(["g5.xlarge"], 2, 2)}


def test_an_unchanged_stack_diffs_zero_percent_in_hour_and_term():
    labs = labs_of(TERM_LABS)
    rows = diff_rows(preview_comment.comment("staging", labs, PREVIEW, base=labs))
    assert list(rows) == ["all labs"]
    assert (rows["all labs"]["at most change"], rows["all labs"]["term change"]) == (
        "+0.0000 (+0.0%)",
        "+0.0000 (+0.0%)",
    )


def test_a_doubled_lab_doubles_its_hour_and_its_term():
    base = labs_of({"intro": lab(["g4dn.xlarge"], 3, 4, classes=[a_class("1h")])})
    head = labs_of({"intro": lab(["g4dn.xlarge"], 3, 8, classes=[a_class("1h")])})
    rows = diff_rows(preview_comment.comment("staging", head, PREVIEW, base=base))
    # 4 -> 8 GPUs: 2.1128 -> 4.2256 per hour; 3 hours of the term (2 x (20m + 1h + 10m)) 6.3384 -> 12.6768.
    assert rows["intro"]["at most per hour"] == "2.1128 → 4.2256" and rows["intro"]["at most change"] == "+2.1128"
    assert rows["intro"]["term cost"] == "6.3384 → 12.6768" and rows["intro"]["term change"] == "+6.3384"
    assert rows["all labs"]["at most change"] == "+2.1128 (+100.0%)"
    assert rows["all labs"]["term change"] == "+6.3384 (+100.0%)"


def test_a_term_beside_a_month_is_not_compared():
    base = labs_of({"intro": lab(["g4dn.xlarge"], 3, 4)})  # no term: a 730-hour month
    head = labs_of({"intro": lab(["g4dn.xlarge"], 3, 4, classes=[a_class("1h")])})
    body = preview_comment.comment("staging", head, PREVIEW, base=base)
    rows = diff_rows(body)
    assert rows["intro"]["term cost"] == "1542.3440 → 6.3384" and rows["intro"]["term change"] == "not compared"
    assert rows["all labs"]["term change"] == "not compared"
    assert rows["all labs"]["at most change"] == "+0.0000 (+0.0%)"
    (note,) = tables.lead_ins(body.splitlines(), ("term cost:",))
    assert note.endswith(
        "; in the base, a 730-hour month at the labs' at most per hour (no class has a term): not compared, a term "
        "beside another period"
    )


def test_karpenters_figure_beside_the_bound_is_not_compared():
    base = labs_of({"intro": lab(["g4dn.xlarge", "g4dn.2xlarge"], 3, 8)})
    at_most = base["intro"]["cost"]["atMostPerHour"]
    # The head as a render with the planner writes it: Karpenter's full lab of 8 x g4dn.xlarge, disks in (4.2256).
    head = {
        "intro": {
            **base["intro"],
            "cost": {**base["intro"]["cost"], "atMostPerHour": {**at_most, "usd": 4.2256, "basis": "planner"}},
        }
    }
    # The stacks' `cost` outputs as each render wrote them: the labs at their own figure.
    costs = ({"perHour": {"total": 6.4426}, "perMonth": {"total": 4703.098}},)
    costs += ({"perHour": {"total": 4.6346}, "perMonth": {"total": 3383.258}},)
    body = preview_comment.comment("staging", head, PREVIEW, base=base, threshold="1%", costs=costs)
    rows = diff_rows(body)
    assert rows["intro"]["at most per hour"] == "6.0336 → 4.2256" and rows["intro"]["at most change"] == "not compared"
    assert (
        "the whole stack (the `cost` output, control plane to the labs at most), USD per hour: 6.4426 → 4.6346 (not "
        "compared); per 730-hour month: 4703.0980 → 3383.2580 (not compared)"
    ) in body.splitlines()
    assert rows["all labs"]["at most change"] == "not compared"
    assert any(
        line.startswith("not compared: at most per hour is Karpenter's full lab on one side")
        for line in body.splitlines()
    )
    assert "[!WARNING]" not in body


def test_the_comment_shows_each_labs_per_learner_figures(staging_render):
    labs = staging_labs(staging_render)
    lines = preview_comment.comment("staging", labs, PREVIEW).splitlines()
    rows = {r["lab"]: r for r in tables.table(lines, "per learner (docs/cost.md)")}
    cost = labs["intro"]["cost"]
    assert rows["intro"]["per learner-hour"] == usd(cost["perLearnerHour"]["usd"])
    assert rows["intro"]["per learner, month"] == usd(cost["perLearnerTerm"]["usd"])
    assert rows["intro"]["empty lab per hour"] == usd(cost["emptyLabPerHour"]["usd"])
    # One "at most" figure: the cost table's, and no other column of the comment called a ceiling.
    assert not [line for line in lines if "ceiling per hour" in line]


def test_a_base_without_at_most_figures_is_diffed_saying_so():
    base, head = labs_of(BASE_LABS), labs_of(HEAD_LABS)
    new = ("atMostPerHour", "perLearnerHour", "perLearnerTerm", "emptyLabPerHour", "budget")
    old = {name: {**lab, "cost": {k: v for k, v in lab["cost"].items() if k not in new}} for name, lab in base.items()}
    # The head as a render with the planner writes it; the base's `cost` counted its labs at the bound.
    planned = {**head["intro"]["cost"]["atMostPerHour"], "basis": "planner"}
    head = {**head, "intro": {**head["intro"], "cost": {**head["intro"]["cost"], "atMostPerHour": planned}}}
    costs = ({"perHour": {"total": 3.0}, "perMonth": {"total": 2190.0}},) * 2
    body = preview_comment.comment("staging", head, PREVIEW, base=old, threshold="1%", costs=costs)
    rows = diff_rows(body)
    assert rows["intro"]["at most per hour"] == f"n/a → {usd(head['intro']['cost']['atMostPerHour']['usd'])}"
    assert "USD per hour: 3.0000 → 3.0000 (not compared)" in body
    assert rows["intro"]["at most change"] == "n/a" and rows["all labs"]["at most change"] == "n/a"
    assert cost_diff.NOT_RENDERED_NOTE in body.splitlines()
    assert not [line for line in body.splitlines() if line.startswith("not compared")]
    assert "[!WARNING]" not in body


def test_the_comment_shows_the_labs_budgets_as_the_summary_does(tmp_path, zones_render, capsys):
    values = copy.deepcopy(TIME_ZONE_STACK)
    first = sorted(values["gpulab:labs"])[0]
    values["gpulab:labs"][first]["budget"] = {"amount": 300, "period": "month"}
    values["gpulab:budgetAlerts"] = {"emails": ["teacher@example.edu"]}
    status, out, _ = comment_of(tmp_path, zones_render, values, capsys)
    lines = out.splitlines()
    expected = cost_report.budgets(domain.stack.from_cli(as_cli_config(values)).settings)
    assert status == 0 and expected[0].startswith("lab budgets (USD;")
    start = lines.index(expected[0])
    assert lines[start : start + len(expected)] == expected
    assert f"{first} 300.00 a month" in " ".join(expected)
    # Without a budget, none.
    status, out, _ = comment_of(tmp_path, zones_render, TIME_ZONE_STACK, capsys)
    assert not any(line.startswith("lab budgets") for line in out.splitlines())


@pytest.mark.parametrize(("amount", "warned"), [(100, True), (2000, False)])
def test_a_budget_under_the_labs_month_at_its_ceiling_is_warned_in_the_comment(tmp_path, capsys, amount, warned):
    """The render's warning of a lab whose nodes may cost more over its budget's period than the budget
    (cost_report.budget_warnings) is under the comment's budget lines, where a reviewer reads it: BASE's intro may cost
    730 x 2.1128 = 1542.3440 USD a month, above 100 and below 2000."""
    values = stack_values(
        **{
            "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, 4, budget=amount)},
            "gpulab:budgetAlerts": {"emails": ["teacher@example.edu"]},
        }
    )
    (tmp_path / "outputs.json").write_text(json.dumps(run_values(values).outputs))
    stack_file = tmp_path / "Pulumi.budgeted.yaml"
    stack_file.write_text(yaml.safe_dump({"config": values}))
    (tmp_path / "preview.txt").write_text(PREVIEW)
    files = ["--outputs", str(tmp_path / "outputs.json"), "--preview", str(tmp_path / "preview.txt")]
    capsys.readouterr()
    assert preview_comment.main(["--stack", str(stack_file), *files]) == 0
    text = " ".join(capsys.readouterr().out.splitlines())
    warning = (
        "- warning: gpulab:labs.intro.budget: the lab's nodes may cost up to 1542.3440 USD over a 730-hour month at "
        f"its ceiling (730 hours at atMostPerHour), above its budget of {amount}.00"
    )
    assert (warning in text) is warned, text
    assert text.index("lab budgets (USD;") < (text.index(warning) if warned else len(text))
