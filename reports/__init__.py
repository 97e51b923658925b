"""What a person reads: the render's summary (summary.py), the pull-request comment (preview_comment.py), the cost
table and cost diff (cost_report.py, cost_diff.py), the classes' table (class_table.py), in Markdown tables
(table.py)."""
