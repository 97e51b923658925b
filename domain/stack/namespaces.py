"""The namespaces a stack creates, one per component and one per lab with classes, and that no two share one.

Each component creates the namespace it installs into (components/namespace.py), and each lab with classes its own
(`<lab>-classes`): two Namespace objects of one name cannot both be created, and `pulumi up` would fail on the second.
"""

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from domain.stack.fields import BUILT_IN_NAMESPACES

# A namespace name is a DNS-1123 label.
DNS_LABEL_LIMIT = 63
_CLASSES = "-classes"


class _Lab(Protocol):
    """What these checks read of a lab: domain.stack.model's Lab, which imports this module."""

    @property
    def classes(self) -> list[Any]: ...


def class_namespace(lab_name: str) -> str:
    """The lab's class namespace, `<lab>-classes`, shortened with a digest when that passes 63 characters."""
    name = f"{lab_name}{_CLASSES}"
    if len(name) <= DNS_LABEL_LIMIT:
        return name
    keep = DNS_LABEL_LIMIT - len(_CLASSES) - 9
    return f"{lab_name[:keep]}-{hashlib.sha256(lab_name.encode()).hexdigest()[:8]}{_CLASSES}"


# The settings' keys of the components with a namespace, by their Python names (as ValidationInfo.data holds them).
_KEYS = {"karpenter": "karpenter", "nvidia_device_plugin": "nvidiaDevicePlugin", "jupyterhub": "jupyterhub"}


def namespace_clash(
    namespace: str, data: Mapping[str, Any], components: Iterable[str], built_in: bool = False
) -> str | None:
    """Why `namespace` is not one a component may install into beside those of `components` (validated before it, in
    `data`) and of the labs' classes: one another creates, or a built-in one unless `built_in` allows them (which
    every cluster has, so that nothing creates them); None when it is its own."""
    if namespace in BUILT_IN_NAMESPACES:
        return None if built_in else f"must be a namespace of its own, not {namespace!r}, which every cluster has"
    for component in components:
        settings = data.get(component)
        if settings is not None and settings.namespace == namespace:
            return f"must be a namespace of its own, not {namespace!r}, which gpulab:{_KEYS[component]} uses"
    labs: Mapping[str, _Lab] = data.get("labs") or {}
    for name, lab in labs.items():
        if lab.classes and class_namespace(name) == namespace:
            return f"must be a namespace of its own, not {namespace!r}, which the classes of lab {name} use"
    return None
