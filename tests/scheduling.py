"""Whether a pod may run on a node: the parts of kube-scheduler's rules the device plugin's DaemonSets depend on."""


def matches(term, labels):
    """Whether a node with `labels` satisfies one nodeSelectorTerm (the operators the plugin's affinity may use)."""
    for expression in term["matchExpressions"]:
        value = labels.get(expression["key"])
        operator = expression["operator"]
        if operator == "In" and value not in expression["values"]:
            return False
        if operator == "Exists" and value is None:
            return False
        if operator not in ("In", "Exists"):
            raise AssertionError(f"unexpected operator {operator}")
    return True


def tolerates(tolerations, taint):
    return any(
        t["key"] == taint["key"]
        and t.get("effect") in (None, taint["effect"])
        and (t["operator"] == "Exists" or t.get("value") == taint.get("value"))
        for t in tolerations
    )


def can_run(pod, labels, taints):
    """Whether a pod with this nodeSelector, required node affinity and tolerations may run on the node."""
    if any(labels.get(key) != value for key, value in pod["nodeSelector"].items()):
        return False
    required = pod["affinity"].get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required and not any(matches(term, labels) for term in required["nodeSelectorTerms"]):
        return False
    return all(tolerates(pod["tolerations"], taint) for taint in taints if taint["effect"] != "PreferNoSchedule")
