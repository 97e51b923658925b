"""Label, taint and tag keys that several components must agree on, defined once."""

# Karpenter finds the subnets and security groups of its nodes by this tag (EC2NodeClass selector terms).
DISCOVERY_TAG = "karpenter.sh/discovery"

# Nodes of the system managed node group carry this label; Karpenter's controller is pinned to them.
SYSTEM_NODE_LABEL = "gpulab.dev/node-role"
SYSTEM_NODE_VALUE = "system"

# Names the lab that a Karpenter node, NodeOverlay or AWS resource belongs to.
LAB_LABEL = "gpulab.dev/lab"
