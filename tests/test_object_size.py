"""Chart objects the API server would refuse for their size: the render refuses them first (render/object_size.py)."""

import base64
import copy

import pytest
import yaml

from components.jupyterhub.hub import RELEASE as JUPYTERHUB
from render import charts, object_size
from render.object_size import MAX_DATA_BYTES
from tests.support.rendered import rendered


def manifest(*objects: dict) -> str:
    """Objects as helm template prints them: each document after a `---` line."""
    return "".join(
        f"---\n# Source: chart/templates/{i}.yaml\n{yaml.dump(o, Dumper=yaml.CSafeDumper)}"
        for i, o in enumerate(objects)
    )


def secret(data: dict[str, int], string_data: dict[str, int] | None = None) -> dict:
    """A Secret whose values have these sizes in bytes."""
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hub", "namespace": "jupyterhub"}}
    obj["data"] = {key: base64.b64encode(b"x" * size).decode() for key, size in data.items()}
    if string_data:
        obj["stringData"] = {key: "x" * size for key, size in string_data.items()}
    return obj


def config_map(data: int, binary_data: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "configs"},
        "data": {"text": "é" * (data // 2)},  # two bytes a character: the limit counts bytes
        "binaryData": {"blob": base64.b64encode(b"\0" * binary_data).decode()},
    }


def test_a_secret_of_1_mib_fits_and_one_byte_more_does_not():
    assert object_size.oversized("jupyterhub", manifest(secret({"a": MAX_DATA_BYTES - 10, "b": 10}))) == []
    (line,) = object_size.oversized("jupyterhub", manifest(secret({"a": MAX_DATA_BYTES - 10, "b": 11})))
    assert line.startswith(
        "gpulab:labs: Secret jupyterhub/hub of the jupyterhub release (charts/jupyterhub.yaml) would hold 1,048,577 "
        "bytes of values, more than the 1,048,576 "
        "(1 MiB) the API server accepts, so `pulumi up` would fail on it;"
    )


def test_string_data_counts_and_replaces_its_keys_data():
    assert object_size.oversized("r", manifest(secret({"a": MAX_DATA_BYTES}, {"a": 1}))) == []
    assert object_size.oversized("r", manifest(secret({"a": MAX_DATA_BYTES}, {"b": 1})))


def test_a_config_maps_data_and_binary_data_count_together():
    half = MAX_DATA_BYTES // 2
    assert object_size.oversized("r", manifest(config_map(half, half))) == []
    (line,) = object_size.oversized("r", manifest(config_map(half + 2, half)))
    assert "ConfigMap configs of the r release (charts/r.yaml) would hold 1,048,578 bytes" in line


def test_other_kinds_have_no_such_limit():
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "big"}}
    crd["spec"] = {"description": "x" * (2 * MAX_DATA_BYTES)}
    assert object_size.oversized("r", manifest(crd, secret({"a": 1}))) == []


@pytest.mark.charts
def test_a_spawn_page_too_big_for_the_secret_fails_naming_it():
    """The jupyterhub chart keeps all its values in the hub's Secret: a few thousand labs' profiles overflow it."""
    r = rendered("synthetic-jupyterhub")
    values = copy.deepcopy(dict(r.release(JUPYTERHUB).values))
    first = values["singleuser"]["profileList"][0]
    copies = MAX_DATA_BYTES // len(yaml.safe_dump(first)) + 1
    values["singleuser"]["profileList"] = [{**first, "slug": f"lab-{i}"} for i in range(copies)]
    with pytest.raises(
        charts.Oversized,
        match=r"^gpulab:labs: Secret hub of the jupyterhub release \(charts/jupyterhub\.yaml\) would hold [0-9,]+",
    ):
        r.template(JUPYTERHUB, values)
