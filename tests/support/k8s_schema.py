"""Would the API server of the cluster's Kubernetes version accept this object, field by field?

Built-in kinds are checked against Kubernetes' own OpenAPI schemas of that version, as kubernetes-validate ships them
(its strict variant: an unknown field is an error, as with server-side apply's strict field validation, which Pulumi
and kubectl use). A kind Kubernetes does not define is a custom resource: the upstream CRDs check it (tests/crd_schema).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import kubernetes_validate

from tests.support.crd_schema import crd_kinds, crd_problems


@functools.cache
def is_built_in(api_version: str, kind: str, kubernetes_version: str) -> bool:
    """Whether Kubernetes of that version defines the kind itself (else only a CRD can)."""
    try:
        kubernetes_validate.validate({"apiVersion": api_version, "kind": kind}, kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return False
    except kubernetes_validate.ValidationError:  # a bare object is invalid, but its schema exists
        return True
    return True


def object_problems(manifest: Mapping[str, Any], kubernetes_version: str) -> list[str]:
    """Why the cluster would reject the object, one line per problem; empty when it would accept it."""
    return _problems(json.dumps(manifest, sort_keys=True), kubernetes_version)


@functools.cache
def _problems(manifest_json: str, kubernetes_version: str) -> list[str]:
    # Memoised on the object's text: every stack installs the same CRDs, the largest objects here.
    manifest = json.loads(manifest_json)
    api_version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
    group, _, version = api_version.rpartition("/")
    if (group, version, kind) in crd_kinds():
        return crd_problems(manifest)
    try:
        kubernetes_validate.validate(manifest, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(p) for p in error.path) or "(object)"
        return [f"{where}: {error.message[:300]}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"Kubernetes {kubernetes_version} has no {api_version} {kind}, and no upstream CRD defines it"]
    except kubernetes_validate.VersionNotSupportedError:
        raise AssertionError(
            f"kubernetes-validate {kubernetes_validate.__version__} has no schemas for Kubernetes {kubernetes_version};"
            " pin a release that has them (requirements.txt)"
        ) from None
    return []
