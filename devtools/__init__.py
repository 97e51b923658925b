"""Developers' tools: the Go helpers' builds (go_build.py; helmbatch/, netpol/ and promtool/ are their Go modules),
the render's benchmark and its SDK floor (benchmark.py, sdk_floor.py), and docs/node-capacity.md's tables
(node_capacity_tables.py)."""
