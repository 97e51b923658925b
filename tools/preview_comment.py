"""`python -m tools.preview_comment --stack <name> ...`: the pull-request comment of a stack's preview. Its code lives
in reports/ (reports/preview_comment.py writes it)."""

import sys

from reports.preview_comment import main

if __name__ == "__main__":
    sys.exit(main())
