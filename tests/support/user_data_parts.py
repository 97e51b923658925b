"""Reads a lab's AL2023 user data back as nodeadm and cloud-init do: its MIME parts, its scripts (the host firewall,
the pre-pull), the pull."""

import email
import shlex

from components.karpenter import host_firewall
from components.karpenter.user_data import MIME_BOUNDARY, PREPULL_UNIT


def mime_parts(user_data: str) -> list[email.message.Message]:
    """The parts of the MIME document, which must be multipart/mixed with gpulab's boundary."""
    message = email.message_from_string(user_data)
    assert message.get_content_type() == "multipart/mixed"
    assert message.get_boundary() == MIME_BOUNDARY
    return message.get_payload()


def scripts(user_data: str) -> list[str]:
    """The shell-script parts, in order."""
    return [p.get_payload() for p in mime_parts(user_data) if p.get_content_type() == "text/x-shellscript"]


def prepull_script(user_data: str) -> str:
    """The one shell-script part that installs the pre-pull unit."""
    (script,) = [s for s in scripts(user_data) if PREPULL_UNIT in s]
    return script


def firewall_script(user_data: str) -> str:
    """The one shell-script part that installs the host firewall."""
    (script,) = [s for s in scripts(user_data) if host_firewall.UNIT in s]
    return script


def pull_command(script: str) -> list[str]:
    """The words of the pull the pre-pull script runs, up to the image."""
    (line,) = [line for line in script.splitlines() if '"$image"' in line and " pull " in line]
    words = shlex.split(line.strip().removeprefix("if ").removesuffix("; then"))
    return words[: words.index("$image")]


def flag(words: list[str], name: str) -> str:
    """The value a command's words give the flag."""
    return words[words.index(name) + 1]
