"""Which scraped series gpulab reads: the metric names that the workspace's rules and the dashboard's panels select,
less the recorded ones, by the scrape job that exports each. The scraper keeps only these of kube-state-metrics and
Karpenter (components/metrics/scrape.py) and the meter's bill counts only these (components/metrics/series.py): one
list, read off the rendered expressions. The idle-GPU culler and the hub's spend gate query recorded series only
(components/jupyterhub/gpu_culler.py, spend_gate.py).
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any

from components.karpenter import controller as karpenter
from components.metrics import dashboard, dcgm_exporter, kube_state_metrics

# Each job's metric names begin with its exporter's namespace: kube-state-metrics v2.20.0 names every family kube_*
# (internal/store), Karpenter v1.14.1 karpenter_* (pkg/metrics/constants.go Namespace), dcgm-exporter its fields'
# DCGM_FI_* names (its counters file, components/metrics/dcgm_exporter.py).
JOB_PREFIXES = {kube_state_metrics.NAME: "kube_", karpenter.RELEASE: "karpenter_", dcgm_exporter.NAME: "DCGM_"}
# What a scrape writes of every target itself, whatever the target exports, and which metric_relabel_configs do not
# touch (Prometheus documentation, "Jobs and instances", automatically generated series: REPORTED; that the managed
# collector writes them too: ASSUMPTION).
SCRAPE_SERIES = (
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
)

# PromQL's lexer (prometheus v3.16.0 promql/parser/lex.go): quoted strings, label matchers in braces, ranges and
# subqueries in brackets, and the label lists after a grouping keyword hold no metric name.
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# An identifier not inside a number or a duration (5m, 1e3), and whether a parenthesis follows it (a function or an
# aggregation, not a selector).
_WORDS = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"inf", "nan", "atan2", "start", "end"}
)


def names_in(expression: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    text = _STRINGS.sub('""', expression)
    for pattern in (_BRACES, _BRACKETS, _LABEL_LISTS):
        while pattern.search(text):
            text = pattern.sub(" ", text)
    return {
        word.group(1) for word in _WORDS.finditer(text) if not word.group(2) and word.group(1).lower() not in _KEYWORDS
    }


def _expressions(rules: Mapping[str, Any]) -> Iterable[str]:
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]
    for panel in dashboard.PANELS:
        yield panel.query


def read_by_job(rules: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The scraped metric names the rule file `rules` (components/metrics/recording_rules.py rule_groups) and the
    dashboard read, by the job that exports them (components/metrics/scrape.py); every job listed, sorted. The
    scrape's own series (SCRAPE_SERIES) are every job's."""
    # A name with a colon is a recording rule's, never an exporter's (Prometheus documentation, "Data model": "The
    # colons are reserved for user defined recording rules", REPORTED); gpulab's are gpulab:* (recording_rules.py),
    # some of which a stack without labs reads but does not record.
    read = {n for e in _expressions(rules) for n in names_in(e) if ":" not in n} - set(SCRAPE_SERIES)
    by_job: dict[str, list[str]] = {job: [] for job in JOB_PREFIXES}
    for name in sorted(read):
        jobs = [job for job, prefix in JOB_PREFIXES.items() if name.startswith(prefix)]
        if not jobs:
            raise ValueError(f"the meter's rules read {name}, which no scrape job exports ({', '.join(JOB_PREFIXES)})")
        by_job[jobs[0]].append(name)
    return {job: tuple(names) for job, names in by_job.items()}
