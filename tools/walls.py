"""`python -m tools.walls <stack> --out <dir>`: the walls around learners as EKS enforces them, into <dir>/walls.json.
Its code lives in render/ (render/walls.py; render/run.py walls_main runs it)."""

import sys

from render.run import walls_main

if __name__ == "__main__":
    sys.exit(walls_main())
