"""Pure builder of the NVIDIA device plugin's named configuration profiles: one per lab, and a default.

A node picks its profile by its `nvidia.com/device-plugin.config` label, which each lab's NodePool sets to the lab's
name; the profile's replicas are the lab's slicesPerGpu, so that each physical GPU is advertised as that many
`nvidia.com/gpu`, shared by time-slicing or by MPS (the lab's `sharing`). The chart's MPS control daemon reads the same
profile through the same label, so it runs MPS exactly where the plugin expects it.
"""

import functools
from collections.abc import Mapping

import yaml

from components.labels import GPU_RESOURCE
from domain.capacity.sharing import DEFAULT_PROFILE, Sharing
from domain.stack.model import Lab


def profile(slices_per_gpu: int, sharing: Sharing = "timeSlicing") -> dict:
    """One device plugin configuration (config file version v1) that shares each GPU `slices_per_gpu` ways."""
    config: dict = {"version": "v1", "flags": {"migStrategy": "none"}}
    # The plugin refuses sharing with fewer than 2 replicas (api/config/v1/replicas.go at v0.20.0), so a lab
    # that does not share gets the plain profile.
    if slices_per_gpu > 1:
        # One strategy per profile: with both, the plugin silently uses MPS (Sharing.SharingStrategy, sharing.go).
        config["sharing"] = {
            sharing: {
                # Without renaming, learners keep asking for nvidia.com/gpu (not nvidia.com/gpu.shared).
                "renameByDefault": False,
                # A pod asking for two slices would get two slices of one GPU, not more GPU: refuse it (upstream's
                # recommendation with time-slicing, and the default with MPS: NewConfig in api/config/v1/config.go).
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": GPU_RESOURCE, "replicas": slices_per_gpu}],
            }
        }
    return config


def config_map(labs: Mapping[str, Lab]) -> dict[str, str]:
    """The chart's `config.map`: profile name to the profile serialised as YAML."""
    return {DEFAULT_PROFILE: _text(profile(1))} | {
        name: _profile_text(lab.slices_per_gpu, lab.sharing) for name, lab in labs.items()
    }


# Serialised once per kind of profile: a stack of many labs has as many profiles, and nearly all of them alike.
@functools.cache
def _profile_text(slices_per_gpu: int, sharing: Sharing) -> str:
    return _text(profile(slices_per_gpu, sharing))


def _text(config: dict) -> str:
    # libyaml's emitter: the same bytes as PyYAML's own.
    return yaml.dump(config, Dumper=yaml.CSafeDumper, sort_keys=False)
