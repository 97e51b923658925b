"""devtools/sdk_floor.py, the benchmark's floor, registers copies of a lab's resources as the program registers them."""

from pulumi.runtime import rpc

from devtools import sdk_floor
from render import harness


def test_a_lab_is_its_component_then_children_in_wait_order(base_run):
    lab, *children = sdk_floor.lab_resources(base_run)
    assert (lab.type, lab.name) == (sdk_floor.LAB_TYPE, "intro")
    assert {r.parent for r in children} == {lab.token}
    everything = [r for r in base_run.resources if r.parent == lab.token]
    assert sorted(children, key=lambda r: (r.type, r.name)) == everything  # the run lists them sorted so
    position = {r.token: i for i, r in enumerate(children)}
    waits = [(position[d], position[r.token]) for r in children for d in r.dependencies if d in position]
    assert waits and all(before < after for before, after in waits)  # the NodePool waits for its EC2NodeClass


def test_each_copy_has_the_labs_types_inputs_and_options(base_run):
    lab, *children = sdk_floor.lab_resources(base_run)
    seconds, monitor = sdk_floor.replay([lab, *children], 2)
    assert seconds > 0
    inside = {r.token for r in children}
    for copy in range(2):
        (component,) = [q for q in monitor.registered if (q.type, q.name) == (lab.type, f"intro-{copy}")]
        registered = {q.name: q for q in monitor.registered if q.parent.endswith(f"{lab.type}::intro-{copy}")}
        assert sorted(registered) == sorted(f"{r.name}-{copy}" for r in children)
        for r in children:
            q = registered[f"{r.name}-{copy}"]
            assert q.type == r.type and q.custom
            assert harness.normalise(rpc.deserialize_properties(q.object)) == r.inputs
            assert harness.urn_token(q.provider.rsplit("::", 1)[0]) == r.provider
            renamed = {f"{d}-{copy}" if d in inside else d for d in r.dependencies}
            assert {harness.urn_token(urn) for urn in q.dependencies} == renamed
            assert q.customTimeouts.delete == r.delete_timeout
        assert not component.dependencies
