"""What the Pulumi SDK alone spends on a lab: the floor under the render's cost per lab (devtools/benchmark.py).

    python -m devtools.sdk_floor <stack file with one lab> <copies>

Runs the program once for the stack's one lab (not timed), then registers that many copies of the lab's resources as
the program registers them (class, inputs, parent, provider, dependencies, delete timeout) with no gpulab code: no
validation and no manifests, under a monitor that only answers, where the render's monitor records each registration
and the render then writes them out. Prints the seconds those registrations take. A lab's copy leaves out a little of
what the program's lab costs the SDK (its wait for the AMI look-ups, its registered outputs, and the expansion of the
components it waits for into their children, which the recorded dependencies already list), so the true floor is a
little higher.
"""

import contextvars
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.proto import resource_pb2

import program
import render.run
from components.karpenter.gpu_node_pool import TYPE as LAB_TYPE
from render import harness
from render.event_loops import owned_event_loops


class _Monitor(pulumi_mocks.MockMonitor):
    """Answers a registration with its own inputs as the resource's state, as a preview of a create does, and keeps
    each request (for the tests)."""

    def __init__(self) -> None:
        super().__init__(_Mocks())
        self.registered: list[Any] = []  # the requests

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        self.registered.append(request)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=f"{request.name}-id", object=request.object)


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        raise AssertionError("the floor's monitor answers every registration itself")

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        raise AssertionError("the floor registers resources and looks nothing up")


def lab_resources(run: harness.Run) -> list[harness.Registration]:
    """The one lab's component and its children, each after the children it waits for."""
    (lab,) = run.of_type(LAB_TYPE)
    children = [r for r in run.resources if r.parent == lab.token]
    ordered: list[harness.Registration] = []
    while children:
        inside = {r.token for r in children}
        ready = [r for r in children if not inside & set(r.dependencies)]
        ordered += ready
        children = [r for r in children if r not in ready]
    return [lab, *ordered]


def replay(resources: list[harness.Registration], copies: int) -> tuple[float, _Monitor]:
    """Seconds to register `copies` copies of a lab's resources, and the monitor that answered them."""
    monitor = _Monitor()
    with ThreadPoolExecutor(max_workers=1) as thread:  # at the depth the render runs the program (render/harness.py)
        seconds = thread.submit(contextvars.copy_context().run, _replay, resources, copies, monitor).result()
    return seconds, monitor


@owned_event_loops()
def _replay(resources: list[harness.Registration], copies: int, monitor: _Monitor) -> float:
    pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_mocks(monitor.mocks, project=harness.PROJECT, stack="floor", preview=False, monitor=monitor)
    lab, *children = resources
    outside = sorted({d for r in children for d in r.dependencies} - {r.token for r in children})
    providers = sorted({r.provider for r in children if r.provider})

    @pulumi.runtime.test
    def registrations() -> None:
        # Stand-ins for what the lab waits for outside itself and for its provider, made once as the program makes them.
        stand_ins = {token: pulumi.CustomResource(*_type_and_name(token), {}) for token in outside}
        provider_of = {}
        for token in providers:
            provider_type, name = _type_and_name(token)
            provider_of[token] = pulumi.ProviderResource(provider_type.removeprefix("pulumi:providers:"), name)
        for copy in range(copies):
            component = pulumi.ComponentResource(lab.type, f"{lab.name}-{copy}")
            made: dict[str, pulumi.Resource] = {}
            for r in children:
                opts = pulumi.ResourceOptions(
                    parent=component,
                    provider=provider_of.get(r.provider or ""),
                    depends_on=[made.get(d) or stand_ins[d] for d in r.dependencies],
                    custom_timeouts=pulumi.CustomTimeouts(delete=r.delete_timeout),
                )
                # By the class the program makes them with (components/karpenter/gpu_node_pool.py): the SDK's work
                # on a registration depends on it too.
                made[r.token] = k8s.apiextensions.CustomResource(
                    f"{r.name}-{copy}",
                    api_version=r.inputs["apiVersion"],
                    kind=r.inputs["kind"],
                    metadata=r.inputs["metadata"],
                    spec=r.inputs["spec"],
                    opts=opts,
                )

    start = time.perf_counter()
    registrations()  # returns once the SDK has finished every registration
    return time.perf_counter() - start


def _type_and_name(token: str) -> tuple[str, str]:
    resource_type, name = token.split("::")  # "<type token>::<name>", as render/harness.py records a resource
    return resource_type, name


def main(argv: list[str] | None = None) -> None:
    stack, copies = argv if argv is not None else sys.argv[1:]
    program.collect_rarely()  # as the render, and `pulumi preview`, run the program
    name, path = render.run.stack_file(stack)
    run = harness.run(name, render.run.read_stack_file(path))
    seconds, _ = replay(lab_resources(run), int(copies))
    print(f"{seconds:.3f}")


if __name__ == "__main__":
    main()
