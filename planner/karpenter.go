package main

// A Karpenter 1.14.1 controller without a cluster: controller-runtime's fake client holds the objects of the render, and
// Karpenter's own controllers and provisioner run against it, wired as the AWS provider's cmd/controller/main.go wires
// them (aws/karpenter-provider-aws v1.14.1), following kubernetes-sigs/karpenter's scheduling benchmark
// (pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go) and its test harness
// (pkg/test/expectations/expectations.go, ExpectProvisioned: Schedule, Create, then the cloud provider's Create).

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/patrickmn/go-cache"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	awscloudprovider "github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
	awsoptions "github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/pricing"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers/capacitybuffer"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeclaim/lifecycle"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/controllers/nodepool/readiness"
	"sigs.k8s.io/karpenter/pkg/controllers/nodepool/validation"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/metrics"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/state/virtualpods"
)

// controllerContext carries Karpenter's options as the controller container would parse them: its env in the render's
// charts/karpenter.yaml (FEATURE_GATES with NodeOverlay and CapacityBuffer as gpulab sets them, VM memory overhead,
// reserved ENIs, ...), read by the same flag sets (sigs.k8s.io/karpenter pkg/operator/options, and the AWS provider's
// pkg/operator/options), with the defaults they have for what the chart does not set.
func controllerContext(env []corev1.EnvVar) (context.Context, error) {
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

// cluster is one simulated cluster: the render's objects, Karpenter's state of it, and Karpenter's controllers.
type cluster struct {
	ctx         context.Context
	kube        client.Client
	clock       clock.Clock
	state       *state.Cluster
	aws         *awscloudprovider.CloudProvider
	provider    cloudprovider.CloudProvider // decorated with the NodeOverlays, as Karpenter's provisioner sees it
	provisioner *provisioning.Provisioner
	buffers     *capacitybuffer.Controller
}

func newCluster(ctx context.Context, r *Render, region string) (*cluster, error) {
	clk := clock.RealClock{}
	kube := fake.NewClientBuilder().
		WithScheme(scheme.Scheme).
		// One REST mapper for every simulated cluster, and a plain object tracker: the fake client would otherwise
		// build both anew for each object it stores (managed fields, which nothing here reads).
		WithRESTMapper(restMapper()).
		WithObjectTracker(clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())).
		WithStatusSubresource(&karpv1.NodePool{}, &karpv1.NodeClaim{}, &awsv1.EC2NodeClass{}, &v1alpha1.NodeOverlay{},
			&autoscalingv1beta1.CapacityBuffer{}).
		// The field indexes Karpenter's operator registers (sigs.k8s.io/karpenter pkg/operator/operator.go) and its
		// code lists by.
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithIndex(&karpv1.NodeClaim{}, "status.providerID", func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).
		Build()
	zones := lo.Map(r.Subnets, func(s string, _ int) string { return standInZone(s) })
	ec2api, err := newEC2StandIn(launchable(r), zones)
	if err != nil {
		return nil, err
	}
	// The pricing provider as it starts: the generated static price list (pkg/providers/pricing/
	// zz_generated.pricing_aws.go, us-east-1 where the region has none), spot priced as on-demand until a spot price
	// update, which never comes offline.
	prices := pricing.NewDefaultProvider(nil, ec2api, region, false)
	unavailable := awscache.NewUnavailableOfferings()
	reservations := capacityreservation.NewProvider(ec2api, clk, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.CapacityReservationAvailabilityTTL, awscache.DefaultCleanupInterval))
	placementGroups := placementgroup.NewProvider(ec2api, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.PlacementGroupAvailabilityTTL, awscache.DefaultCleanupInterval))
	// pkg/operator/operator.go, NewOperator: the instance-type provider and its caches, without a subnet provider
	// (instance types never ask it) and with zonal shift off (the chart's default).
	instanceTypes := instancetype.NewDefaultProvider(
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DiscoveredCapacityCacheTTL, awscache.DefaultCleanupInterval),
		ec2api, nil, prices, reservations, placementGroups, unavailable, instancetype.NewDefaultResolver(region),
		arczonalshift.NewNoopProvider(), kube,
	)
	if err := instanceTypes.UpdateInstanceTypes(ctx); err != nil {
		return nil, err
	}
	if err := instanceTypes.UpdateInstanceTypeOfferings(ctx); err != nil {
		return nil, err
	}
	store := nodeoverlay.NewInstanceTypeStore()
	recorder := events.NewRecorder(&record.FakeRecorder{})
	awsProvider := awscloudprovider.New(instanceTypes, &launchStandIn{}, recorder, kube, nil, nil, reservations, placementGroups, store, nil)
	provider := overlay.Decorate(awsProvider, kube, store)
	clusterState := state.NewCluster(clk, kube, provider)
	c := &cluster{
		ctx: ctx, kube: kube, clock: clk, state: clusterState, aws: awsProvider, provider: provider,
	}
	// The provisioner and the buffer controller share one cache of virtual pods (pkg/controllers/controllers.go).
	virtualPods := virtualpods.NewVirtualPodCache(kube)
	c.provisioner = provisioning.NewProvisioner(kube, recorder, provider, clusterState, clk, nil, virtualPods)
	c.buffers = capacitybuffer.NewController(kube, nil, virtualPods)
	if err := c.apply(r); err != nil {
		return nil, err
	}
	if coreoptions.FromContext(ctx).FeatureGates.NodeOverlay {
		// The overlay controller validates every NodeOverlay against every NodePool's instance types (from the
		// undecorated cloud provider, as main.go gives it) and fills the store the decorator applies.
		overlays := nodeoverlay.NewController(clk, kube, awsProvider, store, clusterState)
		if _, err := overlays.Reconcile(ctx, reconcile.Request{}); err != nil {
			return nil, fmt.Errorf("nodeoverlay controller: %w", err)
		}
	}
	return c, nil
}

// launchable is the part of gpulab's table that some NodePool allows (its node.kubernetes.io/instance-type
// requirement): Karpenter filters every NodePool's instance types by its requirements before it schedules, so the
// types no NodePool allows change none of its decisions, and leaving them out keeps each simulated cluster small.
func launchable(r *Render) map[string]InstanceTypeRow {
	allowed := map[string]InstanceTypeRow{}
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

var restMapper = sync.OnceValue(func() meta.RESTMapper { return testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme) })

// standInZone names the zone of a subnet: offline only the subnet IDs are known, so each is taken to be its own zone.
func standInZone(subnet string) string { return subnet + "-zone" }

// apply creates the render's objects, with the status AWS and Karpenter's controllers would give them.
func (c *cluster) apply(r *Render) error {
	for _, nc := range r.NodeClasses {
		nc := nc.DeepCopy()
		nc.Generation = 1
		if err := c.kube.Create(c.ctx, nc); err != nil {
			return err
		}
		// What the EC2NodeClass controller resolves from AWS (subnets, security groups, AMIs, instance profile),
		// assumed to resolve: one zone per private subnet; AMI, group and profile names are stand-ins.
		nc.Status.Subnets = lo.Map(r.Subnets, func(s string, _ int) awsv1.Subnet {
			return awsv1.Subnet{ID: s, Zone: standInZone(s), ZoneID: standInZone(s) + "-id"}
		})
		nc.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-planner"}}
		nc.Status.InstanceProfile = nc.Name + "-planner-profile"
		nc.Status.AMIs = lo.Map([]string{karpv1.ArchitectureAmd64, karpv1.ArchitectureArm64}, func(arch string, _ int) awsv1.AMI {
			return awsv1.AMI{ID: "ami-planner-" + arch, Requirements: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
			}}
		})
		conditions := nc.StatusConditions()
		for _, t := range []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
			awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeValidationSucceeded, awsv1.ConditionTypePlacementGroupReady,
			awsv1.ConditionTypeCapacityReservationsReady} {
			conditions.SetTrue(t)
		}
		if err := c.kube.Status().Update(c.ctx, nc); err != nil {
			return err
		}
	}
	objects := []client.Object{}
	for _, o := range r.Overlays {
		objects = append(objects, o.DeepCopy())
	}
	for _, o := range r.PodTemplates {
		objects = append(objects, o.DeepCopy())
	}
	for _, o := range r.Buffers {
		objects = append(objects, o.DeepCopy())
	}
	for _, o := range r.DaemonSets {
		objects = append(objects, o.DeepCopy())
	}
	for _, o := range r.NodePools {
		objects = append(objects, o.DeepCopy())
	}
	for _, o := range objects {
		if err := c.kube.Create(c.ctx, o); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	// Karpenter's NodePool controllers: runtime validation, then readiness from the EC2NodeClass.
	validate := validation.NewController(c.clock, c.kube, c.provider)
	ready := readiness.NewController(c.clock, c.kube, c.provider)
	for _, np := range r.NodePools {
		for _, reconcileNodePool := range []func(context.Context, *karpv1.NodePool) (reconcile.Result, error){validate.Reconcile, ready.Reconcile} {
			latest := &karpv1.NodePool{}
			if err := c.kube.Get(c.ctx, client.ObjectKeyFromObject(np), latest); err != nil {
				return err
			}
			if _, err := reconcileNodePool(c.ctx, latest); err != nil {
				return fmt.Errorf("NodePool %s: %w", np.Name, err)
			}
		}
	}
	return nil
}

// setBuffer sets a CapacityBuffer's spec.replicas as the class's CronJobs do, and lets Karpenter's buffer controller
// reconcile it into status and virtual pods.
func (c *cluster) setBuffer(namespace, name string, replicas int32) error {
	cb := &autoscalingv1beta1.CapacityBuffer{}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	if err := c.kube.Get(c.ctx, key, cb); err != nil {
		return fmt.Errorf("CapacityBuffer %s: %w", key, err)
	}
	cb.Spec.Replicas = &replicas
	if err := c.kube.Update(c.ctx, cb); err != nil {
		return err
	}
	_, err := c.buffers.Reconcile(c.ctx, reconcile.Request{NamespacedName: key})
	return err
}

// addLearners creates n pending learner pods of a lab, shaped by the render's learner pod spec.
func (c *cluster) addLearners(lab string, spec corev1.PodSpec, first, n int) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("%s-learner-%d", lab, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Labels: map[string]string{"app": "learner"}},
			Spec:       *spec.DeepCopy(),
			// What kube-scheduler leaves on a pod that fits no node: Karpenter provisions only for such pods
			// (sigs.k8s.io/karpenter pkg/utils/pod/scheduling.go, IsProvisionable).
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			}}},
		}
		if err := c.kube.Create(c.ctx, pod); err != nil {
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// launched is a NodeClaim Karpenter created and the (stand-in) fleet launched.
type launched struct {
	nodeClaim *karpv1.NodeClaim
	options   []string // its instance-type options other than the one launched, cheapest first
	price     float64
}

// schedule runs one provisioning pass (Provisioner.Schedule), creates the NodeClaims it decides on
// (Provisioner.Create, which checks the NodePool's limits again), and launches them through the AWS cloud provider.
func (c *cluster) schedule() (scheduling.Results, []*launched, error) {
	results, err := c.provisioner.Schedule(c.ctx)
	if err != nil {
		return results, nil, err
	}
	var out []*launched
	for _, nc := range results.NewNodeClaims {
		l, err := c.launch(nc)
		if err != nil {
			return results, nil, err
		}
		out = append(out, l)
	}
	return results, out, nil
}

func (c *cluster) launch(nc *scheduling.NodeClaim) (*launched, error) {
	name, err := c.provisioner.Create(c.ctx, nc, provisioning.WithReason(metrics.ProvisionedReason))
	if err != nil {
		return nil, fmt.Errorf("creating NodeClaim for NodePool %s: %w", nc.NodePoolName, err)
	}
	nodeClaim := &karpv1.NodeClaim{}
	if err := c.kube.Get(c.ctx, types.NamespacedName{Name: name}, nodeClaim); err != nil {
		return nil, err
	}
	resolved, err := c.aws.Create(c.ctx, nodeClaim)
	if err != nil {
		return nil, fmt.Errorf("launching NodeClaim %s: %w", name, err)
	}
	// The NodeClaim lifecycle's launch step (pkg/controllers/nodeclaim/lifecycle/launch.go).
	nodeClaim = lifecycle.PopulateNodeClaimDetails(nodeClaim, resolved)
	instanceType := nodeClaim.Labels[corev1.LabelInstanceTypeStable]
	its, err := c.provider.GetInstanceTypes(c.ctx, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: nc.NodePoolName},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{NodeClassRef: nodeClaim.Spec.NodeClassRef}}}})
	if err != nil {
		return nil, err
	}
	it, ok := lo.Find(its, func(it *cloudprovider.InstanceType) bool { return it.Name == instanceType })
	if !ok {
		return nil, fmt.Errorf("launched instance type %s is not among NodePool %s's", instanceType, nc.NodePoolName)
	}
	price, ok := it.OfferingPrice(nodeClaim.Labels[corev1.LabelTopologyZone], nodeClaim.Labels[karpv1.CapacityTypeLabelKey])
	if !ok {
		return nil, fmt.Errorf("no price for %s", instanceType)
	}
	ordered := cloudprovider.InstanceTypes(nc.InstanceTypeOptions).OrderByPrice(nc.Requirements)
	options := lo.FilterMap(ordered, func(o *cloudprovider.InstanceType, _ int) (string, bool) { return o.Name, o.Name != instanceType })
	if err := c.register(nodeClaim); err != nil {
		return nil, err
	}
	return &launched{nodeClaim: nodeClaim, options: options, price: price}, nil
}

// register makes the launched NodeClaim's node join and initialize, as Karpenter's test harness does
// (pkg/test/expectations: ExpectNodeClaimDeployed, ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated; the node
// is built as pkg/test NodeClaimLinkedNode builds it): allocatable is what the NodeClaim says Karpenter expects.
func (c *cluster) register(nodeClaim *karpv1.NodeClaim) error {
	nodeName := strings.TrimPrefix(nodeClaim.Status.ProviderID, "aws:///")
	nodeName = strings.ReplaceAll(nodeName, "/", "-")
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName,
			Labels: lo.Assign(map[string]string{
				karpv1.NodeClassLabelKey(nodeClaim.Spec.NodeClassRef.GroupKind()): nodeClaim.Spec.NodeClassRef.Name,
				corev1.LabelHostname: nodeName,
			}, nodeClaim.Labels, map[string]string{karpv1.NodeRegisteredLabelKey: "true", karpv1.NodeInitializedLabelKey: "true"}),
			Annotations: nodeClaim.Annotations,
		},
		Spec: corev1.NodeSpec{ProviderID: nodeClaim.Status.ProviderID, Taints: nodeClaim.Spec.Taints},
		Status: corev1.NodeStatus{
			Capacity: nodeClaim.Status.Capacity, Allocatable: nodeClaim.Status.Allocatable, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
		},
	}
	nodeClaim.Status.NodeName = nodeName
	for _, t := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		nodeClaim.StatusConditions().SetTrue(t)
	}
	launchedStatus := nodeClaim.Status.DeepCopy()
	if err := c.kube.Update(c.ctx, nodeClaim); err != nil {
		return err
	}
	nodeClaim.Status = *launchedStatus
	if err := c.kube.Status().Update(c.ctx, nodeClaim); err != nil {
		return err
	}
	if err := c.kube.Create(c.ctx, node); err != nil {
		return err
	}
	c.state.UpdateNodeClaim(nodeClaim)
	return c.state.UpdateNode(c.ctx, node)
}
