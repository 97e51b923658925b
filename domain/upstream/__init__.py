"""What gpulab pins upstream: the versions of charts, add-ons and images, the AMI releases, and the fetch of
the upstream reference data at those versions."""
