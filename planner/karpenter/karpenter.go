// Package karpenter is what the planner (planner/) and the rehearsal's stepper (rehearsal/stepper, a module of its own
// that requires this one through a replace) share about running Karpenter 1.14.1 offline: its options as the render's
// controller container would parse them, the instance types some NodePool allows, and the AWS provider release the
// binary was built with. The stand-ins for AWS are planner/standin, the render's objects planner/render.
package karpenter

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awsoptions "github.com/aws/karpenter-provider-aws/pkg/operator/options"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/gpulab/planner/render"
)

// ProviderModule is the module whose version plan.json and rehearsal.json name: the AWS provider release, which pins
// the core Karpenter it runs.
const ProviderModule = "github.com/aws/karpenter-provider-aws"

// ProviderVersion is the version of ProviderModule this binary was built with ("unknown" without build information).
func ProviderVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == ProviderModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// ControllerContext carries Karpenter's options as the controller container would parse them: its env in the render's
// charts/karpenter.yaml (FEATURE_GATES with NodeOverlay and CapacityBuffer as gpulab sets them, VM memory overhead,
// reserved ENIs, ...), read by the same flag sets (sigs.k8s.io/karpenter pkg/operator/options, and the AWS provider's
// pkg/operator/options), with the defaults they have for what the chart does not set.
func ControllerContext(env []corev1.EnvVar) (context.Context, error) {
	// The options read the process environment, as in the container: only the controller's own env counts.
	os.Clearenv()
	for _, e := range env {
		if e.ValueFrom == nil { // fieldRef/resourceFieldRef values (pod name, memory limit) need a running pod
			if err := os.Setenv(e.Name, e.Value); err != nil {
				return nil, err
			}
		}
	}
	fs := &coreoptions.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
	core, aws := &coreoptions.Options{}, &awsoptions.Options{}
	core.AddFlags(fs)
	aws.AddFlags(fs)
	if err := core.Parse(fs); err != nil {
		return nil, fmt.Errorf("karpenter options from charts/karpenter.yaml: %w", err)
	}
	if err := aws.Parse(fs); err != nil {
		return nil, fmt.Errorf("karpenter AWS options from charts/karpenter.yaml: %w", err)
	}
	// cmd/controller/main.go: reserved capacity adds the CapacityReservationsReady condition to EC2NodeClasses.
	awsv1.CapacityReservationsEnabled = core.FeatureGates.ReservedCapacity
	ctx := injection.WithControllerName(context.Background(), "provisioner")
	return aws.ToContext(core.ToContext(ctx)), nil
}

// Launchable is the part of gpulab's table that some NodePool allows (its node.kubernetes.io/instance-type
// requirement): Karpenter filters every NodePool's instance types by its requirements before it schedules, so the
// types no NodePool allows change none of its decisions, and leaving them out keeps each simulated cluster small.
func Launchable(r *render.Render) map[string]render.InstanceTypeRow {
	allowed := map[string]render.InstanceTypeRow{}
	for _, np := range r.NodePools {
		req, ok := lo.Find(np.Spec.Template.Spec.Requirements, func(req karpv1.NodeSelectorRequirementWithMinValues) bool {
			return req.Key == corev1.LabelInstanceTypeStable && req.Operator == corev1.NodeSelectorOpIn
		})
		if !ok {
			return r.InstanceTypes
		}
		for _, name := range req.Values {
			if row, known := r.InstanceTypes[name]; known {
				allowed[name] = row
			}
		}
	}
	return allowed
}
