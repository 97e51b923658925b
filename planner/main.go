// Command planner answers, offline, what Karpenter 1.14.1 would launch for each lab of a gpulab render: it runs
// Karpenter's own provisioner, scheduler, NodeOverlay and CapacityBuffer controllers and the AWS provider's instance
// types and prices against the objects the render writes, and prints plan.json (docs/planner.md).
//
//	planner -region <aws region> [-all-labs] <render dir>
//
// The rehearsal's stepper, which runs Karpenter's controllers against the rehearsal's twin, is a module of its own
// (rehearsal/stepper) that shares the planner's packages karpenter, render and standin.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/operator/logging"

	"github.com/gpulab/planner/karpenter"
	"github.com/gpulab/planner/render"
)

// A full-trickle's passes consider this many nodes in all at most: a trickle onto about 280 nodes, some 26 s of CPU
// here (one lab of 768 seats on 256 single-GPU nodes considers 33,000 in 22 s). Past it the planner stops the trickle
// and says so in the scenario (docs/planner.md).
const defaultTrickleBudget = 40_000

func main() {
	region := flag.String("region", "", "the stack's AWS region (aws:region)")
	allLabs := flag.Bool("all-labs", false, "simulate each lab with every lab's objects, as the cluster holds them "+
		"(slow: the time grows with the square of the labs; the tests compare it with the default)")
	trickleBudget := flag.Int("trickle-budget", defaultTrickleBudget, "the most nodes the passes of one lab's full-trickle "+
		"may consider in all: its time grows with the square of the lab's nodes (docs/planner.md)")
	flag.Parse()
	if flag.NArg() != 1 || *region == "" {
		fmt.Fprintln(os.Stderr, "usage: planner -region <aws region> [-all-labs] <render dir>")
		os.Exit(2)
	}
	// Most of what the planner allocates is Karpenter's short-lived requirement sets, made anew for every node in every
	// pass: collecting less often spends memory (some hundred MiB for a lab of 1,536 seats) to save about a fifth of
	// its CPU.
	debug.SetGCPercent(400)
	// Karpenter's controllers log as they would in the cluster; the plan is the answer (as in its scheduling benchmark).
	log.SetLogger(logging.NopLogger)
	r, err := render.Read(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	plan, err := (&planner{render: r, region: *region, allLabs: *allLabs, trickleBudget: *trickleBudget}).plan(karpenter.ProviderVersion())
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(plan); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "planner: %v\n", err)
	os.Exit(1)
}
