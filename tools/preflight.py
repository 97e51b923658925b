"""`python -m tools.preflight <stack> [--aws-answers FILE]`: read-only checks of the AWS account a stack deploys to
(quotas, VPC, subnets, certificate, AMI), each problem with what to fix. Its code lives in reports/
(reports/preflight.py runs it)."""

import sys

from reports.preflight import main

if __name__ == "__main__":
    sys.exit(main())
