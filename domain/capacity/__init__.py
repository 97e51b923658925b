"""Capacity: the GPU instance types, Kubernetes quantities, what a node leaves its learners (allocatable less
the DaemonSets), GPU sharing and disks."""
