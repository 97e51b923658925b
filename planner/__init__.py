"""The planner: a Go module (main.go and its packages, beside this file) that asks Karpenter's own scheduler what it
would launch for each lab, and its Python driver: plan.py builds and runs it on a render, gate.py holds each lab to
what it promises."""
