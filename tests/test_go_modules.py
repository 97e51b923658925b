"""The rehearsal's stepper (rehearsal/stepper, a Go module of its own) runs the Karpenter the planner runs: it imports
the planner's packages through a replace of ../../planner, and its go.mod requires every module the planner's requires
at the planner's version. Go would build it with the higher of two versions without a word; these tests say which
module moved on one side alone (`go get` the same version in both, then `go mod tidy` in both)."""

from pathlib import Path

from tests.support.go_mod import directives, requires

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "planner" / "go.mod"
STEPPER = ROOT / "rehearsal" / "stepper" / "go.mod"
PLANNER_MODULE = "github.com/gpulab/planner"


def test_the_stepper_requires_the_planners_module_versions():
    planner, stepper = requires(PLANNER), requires(STEPPER)
    both = planner.keys() & stepper.keys()
    assert {"sigs.k8s.io/karpenter", "github.com/aws/karpenter-provider-aws", "k8s.io/client-go"} <= both
    differ = {m: (planner[m], stepper[m]) for m in sorted(both) if planner[m] != stepper[m]}
    assert differ == {}, f"(planner/go.mod, rehearsal/stepper/go.mod) versions differ: {differ}"


def test_the_stepper_replaces_the_planner_and_nothing_else():
    assert requires(STEPPER)[PLANNER_MODULE] == "v0.0.0"
    assert directives(STEPPER, "replace") == [f"{PLANNER_MODULE} => ../../planner"]
    assert directives(PLANNER, "replace") == []


def test_both_modules_name_the_same_go():
    assert directives(PLANNER, "go") == directives(STEPPER, "go")
    assert directives(PLANNER, "toolchain") == directives(STEPPER, "toolchain")


def test_a_version_moved_on_one_side_is_found(tmp_path):
    moved = tmp_path / "go.mod"
    moved.write_text(STEPPER.read_text().replace("sigs.k8s.io/karpenter v1.14.1", "sigs.k8s.io/karpenter v1.14.2"))
    planner = requires(PLANNER)
    assert planner["sigs.k8s.io/karpenter"] == "v1.14.1" != requires(moved)["sigs.k8s.io/karpenter"]
