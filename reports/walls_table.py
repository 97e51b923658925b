"""The walls table of a stack (render/walls.py's walls.json) in Markdown: docs/network-walls.md holds staging's, which
tests/test_walls.py keeps current. `python -m reports.walls_table <render dir>` prints the table of a render's
walls.json (`python -m tools.walls <stack> --out <dir>` writes it)."""

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reports.table import Column, markdown

COLUMNS: list[Column[Mapping[str, Any]]] = [
    Column("from", lambda p: p["from"]),
    Column("to", lambda p: p["to"]),
    Column("address", lambda p: p["address"]),
    Column("port", lambda p: f"{p['port']}/{p['protocol']}"),
    Column("", lambda p: "allowed" if p["allowed"] else "denied"),
    Column("why", lambda p: p["why"]),
]


def table(document: Mapping[str, Any]) -> list[str]:
    return markdown(COLUMNS, document["probes"])


if __name__ == "__main__":
    print("\n".join(table(json.loads((Path(sys.argv[1]) / "walls.json").read_text()))))
