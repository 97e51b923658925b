"""The metric names gpulab's rules read (components/metrics/read_series.py), which the scraper's keep-lists and the
meter's series count come from: PromQL's label matchers, ranges, grouping labels, functions and keywords are no
metric's name, and every rule's and panel's names are those Prometheus's own parser finds (promtool); every rendered
keep-list is the names the rule file reads."""

import re

import pytest

from components.metrics.dashboard import PANELS, SAMPLE_LAB
from components.metrics.read_series import names_in, read_by_job
from components.metrics.recording_rules import rule_groups
from components.metrics.scrape import scrape_configuration
from domain.cost.price_book import LIST
from tests.conftest import run_values
from tests.support.promtool import promtool
from tests.support.synthetic import SYNTHETIC
from tests.test_budget_rules import rule_file as budget_rule_file


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ('kube_pod_status_phase{phase="Running"} == 1', {"kube_pod_status_phase"}),
        ("count by (lab, instance_type) (a) * on (instance_type) group_left () b", {"a", "b"}),
        ("max_over_time(gpulab:x:percent{lab='intro'}[5m] offset 1m) < 5", {"gpulab:x:percent"}),
        ('label_replace(k, "lab", "$1", "nodepool", "(.+)") or vector(1) unless c[5m:1m]', {"k", "c"}),
        ("time() - kube_pod_start_time > 1e3 and bool up", {"kube_pod_start_time", "up"}),
    ],
)
def test_only_the_selected_metrics_are_names(expression, names):
    assert names_in(expression) == names


def test_each_keep_list_is_what_the_stacks_rules_read():
    for values in SYNTHETIC.values():
        settings = run_values(values).stack.settings
        if not settings.metrics:
            continue
        rules = rule_groups(settings.labs, settings.metrics, LIST, settings.budgets)
        read = read_by_job(rules)
        jobs = {
            j["job_name"]: j
            for j in scrape_configuration(settings.metrics, settings.karpenter, rules)["scrape_configs"]
        }
        for job in ("kube-state-metrics", "karpenter"):
            (keep,) = jobs[job]["metric_relabel_configs"]
            assert (keep["source_labels"], keep["action"]) == (["__name__"], "keep")
            assert sorted(keep["regex"].split("|")) == sorted(read[job]) != []
        assert "metric_relabel_configs" not in jobs["dcgm-exporter"]


def names_by_prometheus(expression: str) -> set[str]:
    """The metric names of `expression`'s selectors, as Prometheus's own parser finds them: promtool sets a matcher on
    every vector selector, and the formatted query shows each one's name beside it."""
    done = promtool("--experimental", "promql", "label-matchers", "set", expression, "gpulab_probe", "x")
    assert done.returncode == 0, done.stderr
    return set(re.findall(r'([A-Za-z_:][\w:]*)\{[^{}]*gpulab_probe="x"', done.stdout))


def test_the_names_are_those_prometheuss_parser_finds_in_every_rule_and_panel():
    expressions = [rule["expr"] for rule in budget_rule_file()["groups"][0]["rules"]]
    expressions += [panel.query.replace("$lab", SAMPLE_LAB) for panel in PANELS]
    for expression in expressions:
        assert names_in(expression) == names_by_prometheus(expression), expression
