"""A go.mod's directives as the tests read them: its require and replace lines, its go and godebug lines."""

import re
from pathlib import Path


def directives(go_mod: Path, verb: str) -> list[str]:
    """The lines of every `verb` directive in go_mod, a block's or a single line's, comments dropped."""
    text = re.sub(r"//.*", "", go_mod.read_text())
    lines = []
    for block in re.findall(rf"^{verb}\s*\((.*?)^\)", text, re.M | re.S):
        lines += block.splitlines()
    lines += re.findall(rf"^{verb}\s+([^(\s].*)$", text, re.M)
    return [line.strip() for line in lines if line.strip()]


def requires(go_mod: Path) -> dict[str, str]:
    """Each module go_mod requires, with its version, direct or indirect."""
    return dict(line.split()[:2] for line in directives(go_mod, "require"))
