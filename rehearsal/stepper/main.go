// Command stepper is the rehearsal's stepper: Karpenter 1.14.1's controllers against the rehearsal's twin on a
// simulated clock that rehearsal/karpenter.py steps (rehearse.go; docs/developers/rehearsal.md, "Karpenter on a
// clock").
//
//	stepper -kubeconfig <file> -region <aws region> -start <RFC3339> <render dir>
//
// A module of its own, rehearsal/stepper/go.mod, apart from the planner's binary: it shares the planner's packages
// (github.com/gpulab/planner karpenter, render and standin) through a replace of ../../planner, and requires every
// module the planner requires at the planner's version (tests/test_go_modules.py holds the two go.mod files to that).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := rehearse(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "stepper: %v\n", err)
		os.Exit(1)
	}
}
