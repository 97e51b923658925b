"""Reads a lab's AL2023 user data back as nodeadm and cloud-init do: its MIME parts, the pre-pull script, its pull."""

import email
import shlex

from components.karpenter.user_data import MIME_BOUNDARY


def mime_parts(user_data: str) -> list[email.message.Message]:
    """The parts of the MIME document, which must be multipart/mixed with gpulab's boundary."""
    message = email.message_from_string(user_data)
    assert message.get_content_type() == "multipart/mixed"
    assert message.get_boundary() == MIME_BOUNDARY
    return message.get_payload()


def prepull_script(user_data: str) -> str:
    """The one shell-script part: the pre-pull."""
    scripts = [p.get_payload() for p in mime_parts(user_data) if p.get_content_type() == "text/x-shellscript"]
    assert len(scripts) == 1
    return scripts[0]


def pull_command(script: str) -> list[str]:
    """The words of the pull the pre-pull script runs, up to the image."""
    (line,) = [line for line in script.splitlines() if '"$image"' in line and " pull " in line]
    words = shlex.split(line.strip().removeprefix("if ").removesuffix("; then"))
    return words[: words.index("$image")]


def flag(words: list[str], name: str) -> str:
    """The value a command's words give the flag."""
    return words[words.index(name) + 1]
