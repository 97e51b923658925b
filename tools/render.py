"""`python -m tools.render <stack> --out <dir>`: the offline render. Its code lives in render/ (render/run.py runs
it)."""

import sys

from render.run import main

if __name__ == "__main__":
    sys.exit(main())
