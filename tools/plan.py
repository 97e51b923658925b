"""`python -m tools.plan`: what Karpenter would launch for each lab. Its code lives in planner/: planner/plan.py drives
the Go planner beside it and planner/gate.py holds each lab to what it promises. The render runs them:
`python -m tools.render <stack> --out <dir> --plan` (`make plan`) writes plan.json and prints every scenario."""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Says where the plan is made: the planner runs inside the render, which it reads."""
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__)
    parser.parse_args(argv)
    print("the plan is made by the render: python -m tools.render <stack> --out <dir> --plan", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
