// Command planner answers, offline, what Karpenter 1.14.1 would launch for each lab of a gpulab render: it runs
// Karpenter's own provisioner, scheduler, NodeOverlay and CapacityBuffer controllers and the AWS provider's instance
// types and prices against the objects the render writes, and prints plan.json (docs/planner.md).
//
//	planner -region <aws region> [-all-labs] <render dir>
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
)

// The module whose version plan.json names: the AWS provider release, which pins the core Karpenter it runs.
const providerModule = "github.com/aws/karpenter-provider-aws"

func main() {
	region := flag.String("region", "", "the stack's AWS region (aws:region)")
	allLabs := flag.Bool("all-labs", false, "simulate each lab with every lab's objects, as the cluster holds them "+
		"(slow: the time grows with the square of the labs; the tests compare it with the default)")
	flag.Parse()
	if flag.NArg() != 1 || *region == "" {
		fmt.Fprintln(os.Stderr, "usage: planner -region <aws region> [-all-labs] <render dir>")
		os.Exit(2)
	}
	// Karpenter's controllers log as they would in the cluster; the plan is the answer (as in its scheduling benchmark).
	log.SetLogger(logging.NopLogger)
	r, err := readRender(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	plan, err := (&planner{render: r, region: *region, allLabs: *allLabs}).plan(providerVersion())
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	if err := out.Encode(plan); err != nil {
		fail(err)
	}
}

func providerVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == providerModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "planner: %v\n", err)
	os.Exit(1)
}
