"""`python -m tools.reconcile <stack> [--aws-answers FILE] [--at TIME]`: each budgeted lab's spend this month as AWS
Budgets counts it beside the meter's, and the difference. Its code lives in reports/ (reports/reconcile.py)."""

import sys

from reports.reconcile import main

if __name__ == "__main__":
    sys.exit(main())
