"""What a resource waits for in Pulumi's create order, and so outlives on delete: its dependencies and theirs."""


def waits_for(run, registration) -> set[str]:
    """Every resource `registration` depends on, directly or through the resources it depends on."""
    edges = {r.token: set(r.dependencies) for r in run.resources}
    seen: set[str] = set()
    todo = list(edges[registration.token])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen
