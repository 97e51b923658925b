"""Label, taint and tag keys that several components must agree on, defined once."""

# Karpenter finds the subnets and security groups of its nodes by this tag (EC2NodeClass selector terms).
DISCOVERY_TAG = "karpenter.sh/discovery"

# Nodes of the system managed node group carry this label; Karpenter's controller is pinned to them.
SYSTEM_NODE_LABEL = "gpulab.dev/node-role"
SYSTEM_NODE_VALUE = "system"
# Where pods that belong on the system node group (Karpenter, the class scheduler) are pinned.
SYSTEM_NODE_SELECTOR = {"kubernetes.io/os": "linux", SYSTEM_NODE_LABEL: SYSTEM_NODE_VALUE}

# Names the lab that a Karpenter node, NodeOverlay or AWS resource belongs to.
LAB_LABEL = "gpulab.dev/lab"

# NVIDIA: the device plugin's chart schedules only on nodes with this label; GPU NodePools put it on their nodes.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
# The device plugin reads its named sharing profile for a node from this label (its config manager watches it).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
# The chart's MPS control daemon runs only on nodes with this label set to "true" (its DaemonSet's nodeSelector).
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"
# The extended resource a learner's pod asks for, and the key of the taint that keeps other pods off GPU nodes.
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
# Tolerates the GPU taint whatever its value: for the device plugin and for pods that use a slice.
GPU_TOLERATION = {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}

# A capped lab's cap and what its GPU limit costs (USD per hour at the reference prices) on its NodePool: the policy
# pack compares the two, and a preview shows a change of either.
GPU_LIMIT_COST_ANNOTATION = "gpulab.dev/gpu-limit-hourly-cost-usd"
MAX_HOURLY_COST_ANNOTATION = "gpulab.dev/max-hourly-cost-usd"
