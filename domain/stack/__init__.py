"""Stack configuration: the users' contract, validated before any resource is registered."""

from domain.stack.load import ConfigError, StackConfig, from_cli, load, parse
from domain.stack.model import Lab, Settings

__all__ = ["ConfigError", "Lab", "Settings", "StackConfig", "from_cli", "load", "parse"]
