"""Objects of a chart that the API server would refuse for their size, which helm template does not check.

A Secret's or a ConfigMap's values may total at most 1 MiB, keys not counted (ValidateSecret, ValidateConfigMap:
kubernetes pkg/apis/core/validation/validation.go, core.MaxSecretSize). The labs grow two such objects: the device
plugin's ConfigMap holds each lab's profile (domain/stack/limits.py MAX_LABS keeps it within the limit) and the
JupyterHub chart's `hub` Secret holds all of the chart's values, each lab's spawn-page profile among them. Past the
limit, `pulumi up` fails on the object halfway through the release; the render says so first.
"""

import base64
import re
from typing import Any

import yaml

MAX_DATA_BYTES = 1024 * 1024
# Only these kinds have the limit; the other documents, CRDs among them, are not parsed at all.
_LIMITED = re.compile(r"^kind: (Secret|ConfigMap)$", re.MULTILINE)


def data_bytes(obj: dict[str, Any]) -> int:
    """The bytes of a Secret's or ConfigMap's values as the API server counts them: a Secret's stringData is written
    into its data (the same key replaced), a ConfigMap's data and binaryData both count."""
    if obj["kind"] == "Secret":
        values = {k: len(base64.b64decode(v)) for k, v in (obj.get("data") or {}).items()}
        values |= {k: len(v.encode()) for k, v in (obj.get("stringData") or {}).items()}
        return sum(values.values())
    text = sum(len(v.encode()) for v in (obj.get("data") or {}).values())
    return text + sum(len(base64.b64decode(v)) for v in (obj.get("binaryData") or {}).values())


def oversized(release: str, manifest: str) -> list[str]:
    """One line for each object of the release's manifest (helm template's output) that the API server would refuse."""
    lines = []
    for document in manifest.split("\n---\n"):
        if not _LIMITED.search(document):
            continue
        obj = yaml.load(document, Loader=yaml.CSafeLoader)
        if not isinstance(obj, dict) or obj.get("kind") not in ("Secret", "ConfigMap"):
            continue
        size = data_bytes(obj)
        if size > MAX_DATA_BYTES:
            meta = obj.get("metadata") or {}
            where = "/".join(part for part in (meta.get("namespace"), meta.get("name")) if part)
            # The labs are what grows these objects, so the line names their key.
            lines.append(
                f"gpulab:labs: {obj['kind']} {where} of the {release} release (charts/{release}.yaml) would hold "
                f"{size:,} bytes of values, more than the "
                f"{MAX_DATA_BYTES:,} (1 MiB) the API server accepts, so `pulumi up` would fail on it; each lab adds "
                "its profile to the device plugin's ConfigMap and, on the JupyterHub spawn page, to the hub's Secret: "
                "put fewer labs in the stack, or on the spawn page (labs.<lab>.onSpawnPage: false)"
            )
    return lines
