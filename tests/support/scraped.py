"""Input series as the managed scraper would send them: a rule test's series of a keep-listed job whose name its
metric_relabel_configs drop are left out, so that a rule reading a metric the scraper drops fails its promtool test
(components/metrics/scrape.py, read_series.py)."""

import copy
import re
from typing import Any

from components.metrics.read_series import JOB_PREFIXES


def kept_by(scrape: dict[str, Any], name: str) -> bool:
    """Whether the scraper configuration `scrape` keeps a series named `name`: recorded series (with a colon) and
    names no job exports are the workspace's own, always kept."""
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    for job, prefix in JOB_PREFIXES.items():
        if ":" not in name and name.startswith(prefix):
            rules = jobs[job].get("metric_relabel_configs", [])
            return all(re.fullmatch(rule["regex"], name) for rule in rules if rule["action"] == "keep")
    return True


def as_scraped(tests: dict[str, Any], scrape: dict[str, Any]) -> dict[str, Any]:
    """promtool's unit tests `tests` with every input series `scrape` drops left out."""
    kept = copy.deepcopy(tests)
    for test in kept["tests"]:
        test["input_series"] = [
            s for s in test["input_series"] if kept_by(scrape, re.match(r"[\w:]+", s["series"]).group(0))
        ]
    return kept
