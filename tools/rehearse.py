"""`python -m tools.rehearse <stack> --out <dir>`: the class rehearsal on the twin. Its code lives in rehearsal/
(rehearsal/run.py runs it)."""

import sys

from rehearsal.run import main

if __name__ == "__main__":
    sys.exit(main())
