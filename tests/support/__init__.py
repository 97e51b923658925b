"""What the tests share: rendered stacks, chart and schema checks, synthetic stacks, the hub's doubles, the twin's
helpers, the upstream reference data and the CI skip list. No tests here (pytest collects tests/test_*.py)."""
