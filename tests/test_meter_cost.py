"""The GPU meter's own cost (domain/cost/meter_cost.py, components/metrics/series.py): the series the scraper sends the
workspace with the labs full, the samples and storage they make, priced only at a price AWS gives a preview (the
Price List API, answered here by mocks), and said to be unpriced offline rather than given a rate from elsewhere."""

import datetime
import json
from decimal import Decimal

import pytest

from components.metrics import series as series_module
from components.metrics.series import dcgm_series_per_gpu, series
from domain.cost.meter_cost import meter_cost
from domain.cost.price_book import LIST, MeterPrices
from domain.cost.stack_cost import stack_cost, term_hours
from render import harness
from reports import cost_report, preview_comment
from tests import test_live_prices
from tests.conftest import as_cli_config, run_values, stack_values
from tests.support.synthetic import SYNTHETIC, lab
from tests.test_live_prices import market  # noqa: F401 (the fixture amp_market extends)

METERED = stack_values(
    **{
        "gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, max_gpus=4), "vision": lab(["g5.xlarge"], 2, max_gpus=2)},
        "gpulab:metrics": {},
    }
)


def test_an_exporter_writes_two_series_per_learner_field_and_the_gpus_own():
    # gpulab's four fields: GPU_UTIL and FB_USED per learner beside the GPU's own, FB_FREE and XID copied to each
    # learner (the GPU's own dropped), or the GPU's alone with no learner.
    assert [dcgm_series_per_gpu(pods) for pods in (0, 1, 3)] == [4, 6, 14]


def of(settings, labs=None):
    """The series of `settings`' cluster, or of `labs` alone on it."""
    return series(settings.labs if labs is None else labs, settings.metrics, settings.cluster.system_nodes.size)


def test_the_series_follow_the_labs_maxgpus_and_slices():
    settings = run_values(METERED).stack.settings
    found = of(settings)
    # intro 4 GPUs x 14 + vision 2 x 10, and 5 scrape series per exporter (one per GPU at most)
    assert found.counts["dcgm-exporter"] == 4 * 14 + 2 * 10 + 6 * 5
    bigger = run_values(
        stack_values(**{"gpulab:labs": {"intro": lab(["g4dn.xlarge"], 3, max_gpus=8)}, "gpulab:metrics": {}})
    )
    assert of(bigger.stack.settings).counts["dcgm-exporter"] == 8 * 14 + 8 * 5
    assert "assumed" in found.notes["kube-state-metrics"] and "assumed" in found.notes["karpenter"]


def test_kube_state_metrics_and_karpenter_count_only_the_metrics_the_rules_read_per_object():
    settings = run_values(METERED).stack.settings
    assert settings.cluster.system_nodes.size == 2
    found = of(settings)
    # 12 + 4 learner seats, 7 DaemonSet pods on each of the 4 + 2 GPU nodes (the device plugin, kube-proxy, aws-node,
    # the Pod Identity agent, the node monitoring agent, the DCGM server, dcgm-exporter; no EBS CSI node without the
    # hub) and 30 on the system nodes, each with info 1, phase 5, start time 1, annotations 1, node selectors 1
    # (kube-state-metrics v2.20.0 pod.go); and the job's 5 scrape series.
    assert [len(share.daemonsets) for lab in settings.labs.values() for share in lab.node_shares] == [7, 7]
    assert found.counts["kube-state-metrics"] == (12 + 4 + 6 * 7 + 30) * 9 + 5
    # The leader's: 2 system + 6 GPU nodes x 6 allocatable resources, + nvidia.com/gpu on the 6; 2 NodePools x (cost
    # + gpu and cpu limits); and 2 controllers x 5 scrape series.
    assert found.counts["karpenter"] == 8 * 6 + 6 + 2 * 3 + 2 * 5


def test_every_metric_the_rules_read_has_its_series_counted():
    # Every synthetic stack's rules read only metrics whose series the meter counts (the program fails otherwise).
    for values in SYNTHETIC.values():
        settings = run_values(values).stack.settings
        if settings.metrics:
            assert of(settings).total > 0
    planted = dict(series_module.KUBE_STATE_METRICS_SERIES_PER_POD)
    del planted["kube_pod_info"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(series_module, "KUBE_STATE_METRICS_SERIES_PER_POD", planted)
        with pytest.raises(ValueError, match="kube_pod_info of kube-state-metrics"):
            of(run_values(METERED).stack.settings)


def test_a_lab_on_nodes_without_a_host_engine_has_no_exporter_series():
    settings = run_values(SYNTHETIC["metrics"]).stack.settings
    with_it = of(settings, {"culled": settings.labs["culled"]})
    both = of(settings)
    assert both.counts["dcgm-exporter"] == with_it.counts["dcgm-exporter"]
    # its learners' pods are still kube-state-metrics'
    assert both.counts["kube-state-metrics"] > with_it.counts["kube-state-metrics"]


def test_samples_are_one_per_series_per_scrape_over_the_month_and_storage_is_150_days_of_them():
    found = meter_cost(1000, 30, MeterPrices(None, None, "why"))
    assert found.samples_per_month == 1000 * 730 * 120
    # 1000 series x 2,880 samples a day x 150 days x 2 bytes, in 2^30 bytes
    assert found.stored_gb == Decimal("0.81")
    assert found.per_month is None and found.as_output(None)["unpriced"][0] == "why"
    assert meter_cost(1000, 60, MeterPrices(None, None, "")).samples_per_month == 1000 * 730 * 60


def test_priced_samples_and_storage_round_up_and_scale_to_the_term():
    found = meter_cost(1000, 30, MeterPrices("0.00000009", "0.03"))
    # 87,600,000 x 0.00000009 = 7.884, + 0.81 GB x 0.03 = 0.0243
    assert found.per_month == 7.9083
    assert found.per_hour == 0.0109  # 7.9083 / 730 = 0.010833 up
    out = found.as_output((datetime.date(2027, 1, 4), datetime.date(2027, 1, 5)))
    assert out["term"] == {"hours": 48, "usd": 0.52}  # 7.9083 x 48 / 730 = 0.51999 up
    assert out["unpriced"] == [
        "collector hours unpriced: no Price List usage type for the managed collector found here"
    ]


PARTS = ("controlPlane", "systemNodes", "hub", "labsCeiling")
OFFLINE_EXCLUDES = (
    "excludes the GPU meter: samples and storage unpriced offline: no AWS source here; collector hours unpriced: no "
    "Price List usage type for the managed collector found here"
)


def test_offline_the_total_excludes_the_unpriced_meter_and_says_so():
    cost = run_values(METERED).outputs["cost"]
    meter = cost["meter"]
    assert meter["series"] == sum(job["series"] for job in meter["seriesByJob"].values())
    assert meter["samplesPerMonth"] == meter["series"] * 87_600
    assert (meter["perMonth"], meter["perHour"], meter["term"]["usd"]) == (None, None, None)
    assert "unpriced offline: no AWS source here" in meter["unpriced"]
    assert (cost["perHour"]["meter"], cost["perMonth"]["meter"]) == (None, None)
    assert cost["perHour"]["total"] == pytest.approx(sum(cost["perHour"][p] for p in PARTS))
    assert cost["excludes"] == OFFLINE_EXCLUDES


def test_the_summary_and_the_comment_show_the_meters_row_and_what_the_total_excludes():
    run = run_values(METERED)
    lines = cost_report.stack_table(run.stack, run.outputs["labs"], RUN)
    rows = {
        cells[0]: cells[1:]
        for line in lines
        if line.startswith("| ")
        for cells in [[c.strip() for c in line.strip("| ").split(" | ")]]
    }
    assert rows["GPU meter"] == ["no price", "no price"]
    assert rows["total"][1] == f"{run.outputs['cost']['perMonth']['total']:.4f}"
    said = " ".join(lines)
    assert f"- total: {OFFLINE_EXCLUDES}" in said
    comment = preview_comment.comment(
        "test",
        run.outputs["labs"],
        "preview",
        whole_stack=lambda figures: cost_report.stack_table(run.stack, figures, RUN),
    )
    assert OFFLINE_EXCLUDES in " ".join(comment.split())
    # Without the meter, no row and nothing excluded.
    plain = run_values(stack_values())
    assert "excludes" not in plain.outputs["cost"]
    assert not any("GPU meter" in line for line in cost_report.stack_table(plain.stack, plain.outputs["labs"], RUN))


def test_a_stack_without_the_meter_has_no_meter_cost():
    assert "meter" not in run_values(stack_values()).outputs["cost"]


def test_the_summary_says_the_meters_volumes_and_that_they_are_unpriced():
    run = run_values(METERED)
    text = " ".join(cost_report.stack_table(run.stack, run.outputs["labs"], datetime.date(2026, 12, 4)))
    meter = run.outputs["cost"]["meter"]
    assert f"{meter['series']:,} series every 30 s" in text
    assert f"{meter['samplesPerMonth']:,} samples ingested" in text
    assert "unpriced offline: no AWS source here" in text
    assert "GPU meter" not in " ".join(cost_report.stack_table(run_values(stack_values()).stack, {}, RUN))


RUN = datetime.date(2026, 12, 4)

# What the mocked Price List API holds for AmazonPrometheus in eu-west-1: tiered, as the offer files give it (a free
# tier, then the rate, then a cheaper one). Made-up amounts.
AMP = {
    "EU-AMP:MetricSampleCount": ["0.0000000000", "0.0000000950", "0.0000000400"],
    "EU-AMP:MetricStorageByteHrs": ["0.0000000000", "0.0310000000"],
}


def amp_product(usd: list[str]) -> str:
    sku, term = "AMPSKU", "JRTCKXETXF"
    return json.dumps(
        {
            "product": {"sku": sku},
            "terms": {
                "OnDemand": {
                    f"{sku}.{term}": {
                        "priceDimensions": {
                            f"{sku}.{term}.{i}": {"unit": "Metric Datapoints", "pricePerUnit": {"USD": rate}}
                            for i, rate in enumerate(usd)
                        }
                    }
                }
            },
        }
    )


@pytest.fixture
def amp_market(request, monkeypatch):
    """test_live_prices' market, with AmazonPrometheus products in eu-west-1."""
    request.getfixturevalue("market")
    others = test_live_prices.get_products

    def get_products(service, filters, left_out=frozenset()):
        wanted = {f["field"]: f["value"] for f in filters}
        if service != "AmazonPrometheus":
            return others(service, filters, left_out)
        if wanted.get("regionCode") != "eu-west-1" or wanted["usagetype"] not in AMP:
            raise test_live_prices._Refused(test_live_prices.NOT_FOUND)
        return amp_product(AMP[wanted["usagetype"]])

    monkeypatch.setattr(test_live_prices, "get_products", get_products)


def test_a_preview_prices_the_meter_at_its_regions_first_paid_tier(amp_market):
    run = harness.run("test", as_cli_config(METERED), live_prices=True)
    asked = [i.args for i in run.invokes if i.token == test_live_prices.GET_PRODUCT]
    amp = [a for a in asked if a["serviceCode"] == "AmazonPrometheus"]
    assert [{f["field"]: f["value"] for f in a["filters"]} for a in amp] == [
        {"regionCode": "eu-west-1", "usagetype": "EU-AMP:MetricSampleCount"},
        {"regionCode": "eu-west-1", "usagetype": "EU-AMP:MetricStorageByteHrs"},
    ]
    meter = run.outputs["cost"]["meter"]
    expected = Decimal(meter["samplesPerMonth"]) * Decimal("0.000000095") + Decimal(str(meter["storedGb"])) * Decimal(
        "0.031"
    )
    assert meter["perMonth"] == float(expected.quantize(Decimal("0.0001"), rounding="ROUND_CEILING"))
    assert meter["pricesFrom"] == "eu-west-1, AWS Price List API"
    assert meter["unpriced"] == [
        "collector hours unpriced: no Price List usage type for the managed collector found here"
    ]
    # In the stack's totals: the meter's hour and month beside the parts, the collector's hours said to be left out.
    cost = run.outputs["cost"]
    assert cost["perHour"]["meter"] == meter["perHour"] > 0
    assert cost["perHour"]["total"] == pytest.approx(sum(cost["perHour"][p] for p in PARTS) + meter["perHour"])
    assert cost["perMonth"]["meter"] == meter["perMonth"]
    assert cost["perMonth"]["total"] == pytest.approx(sum(cost["perMonth"][p] for p in PARTS) + meter["perMonth"])
    assert cost["excludes"] == (
        "excludes the GPU meter's collector hours unpriced: no Price List usage type for the managed collector found "
        "here"
    )


def test_a_region_without_a_known_usage_type_is_not_priced_from_another(amp_market):
    values = {**METERED, "aws:region": "ap-south-1"}
    run = harness.run("test", as_cli_config(values), live_prices=True)
    meter = run.outputs["cost"]["meter"]
    assert meter["perMonth"] is None
    assert "no Price List usage type known here for ap-south-1" in meter["unpriced"]


def test_a_priced_meter_is_in_the_terms_always_on_figure():
    settings = run_values(METERED).stack.settings
    priced = meter_cost(500, 30, MeterPrices("0.0000001", "0.03"))
    days = (datetime.date(2027, 1, 4), datetime.date(2027, 1, 31))
    ceilings = {name: 1.0 for name in settings.labs}

    def stack(meter):
        return stack_cost("eu-west-1", "1.34", "STANDARD", ["m7i.large"], 2, None, ceilings, LIST, days[0], meter)

    hours = term_hours(days)
    without, with_it = stack(None), stack(priced)
    assert with_it.always_on_over(days[0], hours) == pytest.approx(
        without.always_on_over(days[0], hours) + priced.over(hours)
    )
    assert with_it.total == pytest.approx(without.total + priced.per_hour)
    assert without.excludes == "" and with_it.excludes.startswith("excludes the GPU meter's collector hours")
