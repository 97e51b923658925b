"""The offline render: the program run under Pulumi mocks (harness.py, its event loops in event_loops.py) and what it
writes (run.py, `python -m tools.render`): resources, Kubernetes objects, the Helm charts' objects (charts.py, through
helm_cache.py), their sizes (object_size.py) and the EKS add-ons' DaemonSets (addons.py, eks-addons.json)."""
