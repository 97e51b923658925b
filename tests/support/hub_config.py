"""The hub of a rendered stack's jupyterhub release, for the tests: its configuration (rehearsal/learner_pods.py builds
it and the learner pods from it) and its authenticator class."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from traitlets.config import Config

from components.jupyterhub.hub import RELEASE
from rehearsal.learner_pods import hub_config
from tests.support.rendered import rendered


def authenticator_class(name: str) -> type:
    """JupyterHub's lookup of authenticator_class: an entry point name, else an import path."""
    (found,) = [e for e in entry_points(group="jupyterhub.authenticators") if e.name == name] or [None]
    if found:
        return found.load()
    module, _, cls = name.rpartition(".")
    return getattr(importlib.import_module(module), cls)


@functools.cache
def stack_hub_config(stack: str) -> Config:
    """hub_config of a rendered stack's jupyterhub release (components/jupyterhub/hub.py names it)."""
    r = rendered(stack)
    return hub_config(r.chart(RELEASE), r.run.stack.settings.jupyterhub.namespace)
