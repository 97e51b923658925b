"""Entry point of `pulumi up` and `pulumi preview`: everything lives in program.py."""

import program

program.main()
