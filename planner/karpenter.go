package main

// A Karpenter 1.14.1 controller without a cluster: controller-runtime's fake client holds the objects of the render, and
// Karpenter's own controllers and provisioner run against it, wired as the AWS provider's cmd/controller/main.go wires
// them (aws/karpenter-provider-aws v1.14.1), following kubernetes-sigs/karpenter's scheduling benchmark
// (pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go) and its test harness
// (pkg/test/expectations/expectations.go, ExpectProvisioned: Schedule, Create, then the cloud provider's Create).

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
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
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/state/virtualpods"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/gpulab/planner/karpenter"
	"github.com/gpulab/planner/render"
	"github.com/gpulab/planner/standin"
)

// cluster is one simulated cluster: the render's objects, Karpenter's state of it, and Karpenter's controllers.
type cluster struct {
	ctx         context.Context
	kube        client.Client
	clock       clock.Clock
	state       *state.Cluster
	aws         *standin.AWS
	provider    cloudprovider.CloudProvider // decorated with the NodeOverlays, as Karpenter's provisioner sees it
	provisioner *provisioning.Provisioner
	buffers     *capacitybuffer.Controller
	virtualPods *virtualpods.Cache
	pods        *podsByNode
	nodes       []*launched             // every node launched, in launch order
	boundTo     map[types.UID]*launched // the node each bound pod runs on
	learnerPods []*corev1.Pod           // the learners that arrived, in order
	// The learner pods made, those withdrawn included: the next one's number (learners).
	learnersMade int
	// The most nodes a trickle's passes may consider in all (planner.trickleBudget).
	trickleBudget int
}

func newCluster(ctx context.Context, r *render.Render, region string) (*cluster, error) {
	clk := clock.RealClock{}
	pods := &podsByNode{byNode: map[string][]client.ObjectKey{}}
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
		WithInterceptorFuncs(interceptor.Funcs{List: pods.list}).
		Build()
	store := nodeoverlay.NewInstanceTypeStore()
	recorder := events.NewRecorder(&record.FakeRecorder{})
	zones := lo.Map(r.Subnets, func(s string, _ int) string { return standin.Zone(s) })
	aws, err := standin.NewAWS(ctx, kube, clk, karpenter.Launchable(r), zones, region, store, recorder)
	if err != nil {
		return nil, err
	}
	provider := overlay.Decorate(aws.CloudProvider, kube, store)
	clusterState := state.NewCluster(clk, kube, provider)
	c := &cluster{
		ctx: ctx, kube: kube, clock: clk, state: clusterState, aws: aws, provider: provider, pods: pods,
		boundTo: map[types.UID]*launched{},
		// The provisioner and the buffer controller share one cache of virtual pods (pkg/controllers/controllers.go).
		virtualPods: virtualpods.NewVirtualPodCache(kube),
	}
	c.provisioner = provisioning.NewProvisioner(kube, recorder, provider, clusterState, clk, nil, c.virtualPods)
	c.buffers = capacitybuffer.NewController(kube, nil, c.virtualPods)
	if err := c.apply(r); err != nil {
		return nil, err
	}
	if coreoptions.FromContext(ctx).FeatureGates.NodeOverlay {
		// The overlay controller validates every NodeOverlay against every NodePool's instance types (from the
		// undecorated cloud provider, as main.go gives it) and fills the store the decorator applies.
		overlays := nodeoverlay.NewController(clk, kube, aws.CloudProvider, store, clusterState)
		if _, err := overlays.Reconcile(ctx, reconcile.Request{}); err != nil {
			return nil, fmt.Errorf("nodeoverlay controller: %w", err)
		}
	}
	return c, nil
}

// podsByNode answers the lists of pods by node (spec.nodeName; "" for pending pods, which the provisioner lists,
// sigs.k8s.io/karpenter pkg/utils/node GetProvisionablePods; a node's name for its pods, which state.Cluster lists
// when a node joins) from the field index, as the controller's cache does in a cluster. The fake client would copy
// every pod of the cluster on each list and filter the copies: with a lab's learners bound one pass at a time, that
// took time in the square of its seats.
type podsByNode struct {
	// The pods of each node, in the order they were made (the provisioner's queue sorts them; ties keep this order).
	byNode map[string][]client.ObjectKey
}

func (x *podsByNode) add(pod *corev1.Pod) {
	x.byNode[pod.Spec.NodeName] = append(x.byNode[pod.Spec.NodeName], client.ObjectKeyFromObject(pod))
}

func (x *podsByNode) remove(pod *corev1.Pod) {
	x.byNode[pod.Spec.NodeName] = lo.Without(x.byNode[pod.Spec.NodeName], client.ObjectKeyFromObject(pod))
}

func (x *podsByNode) pending(key client.ObjectKey) bool { return lo.Contains(x.byNode[""], key) }

func (x *podsByNode) list(ctx context.Context, kube client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	pods, isPods := list.(*corev1.PodList)
	options := (&client.ListOptions{}).ApplyOptions(opts)
	if !isPods || options.FieldSelector == nil || options.LabelSelector != nil || options.Namespace != "" ||
		len(options.FieldSelector.Requirements()) != 1 {
		return kube.List(ctx, list, opts...)
	}
	node, found := options.FieldSelector.RequiresExactMatch("spec.nodeName")
	if !found {
		return kube.List(ctx, list, opts...)
	}
	keys := x.byNode[node]
	pods.Items = make([]corev1.Pod, len(keys))
	for i, key := range keys {
		if err := kube.Get(ctx, key, &pods.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

var restMapper = sync.OnceValue(func() meta.RESTMapper { return testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme) })

// apply creates the render's objects, with the status AWS and Karpenter's controllers would give them.
func (c *cluster) apply(r *render.Render) error {
	for _, nc := range r.NodeClasses {
		nc := nc.DeepCopy()
		nc.Generation = 1
		if err := c.kube.Create(c.ctx, nc); err != nil {
			return err
		}
		standin.ResolveNodeClass(nc, r.Subnets)
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

// addPods creates n pending pods of one spec, named <prefix>-<first> on, in a namespace.
func (c *cluster) addPods(namespace, prefix string, labels map[string]string, spec corev1.PodSpec, first, n int) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(namespace + "/" + name), Labels: labels},
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
		c.pods.add(pod)
		pods = append(pods, pod)
	}
	return pods, nil
}

// snapshot is the lab's nodes as they are.
func (c *cluster) snapshot() []*launched { return append([]*launched(nil), c.nodes...) }

// withdraw removes pending pods that have not arrived after all (see learners).
func (c *cluster) withdraw(pods []*corev1.Pod) error {
	for _, pod := range pods {
		if err := c.kube.Delete(c.ctx, pod); err != nil {
			return err
		}
		c.pods.remove(pod)
	}
	return nil
}

// launched is a NodeClaim Karpenter created and the (stand-in) fleet launched.
type launched struct {
	nodeClaim *karpv1.NodeClaim
	options   []string          // its instance-type options other than the one launched, cheapest first
	price     float64           // the AWS provider's price of its offering, before any NodeOverlay
	slices    resource.Quantity // the nvidia.com/gpu its bound pods request
}

// pass is one provisioning pass and what it decided: the pods it placed on each node (existing or launched), and the
// pods it could not place, with Karpenter's reason.
type pass struct {
	placed   map[*launched][]*corev1.Pod
	errors   map[types.UID]error
	launched []*launched
}

// schedule runs one provisioning pass (Provisioner.Schedule) and commits what it decides.
func (c *cluster) schedule() (*pass, error) {
	results, err := c.provisioner.Schedule(c.ctx)
	if err != nil {
		return nil, err
	}
	return c.commit(results, true)
}

// commit carries out a pass's decisions: it creates the NodeClaims the pass decided on (Provisioner.Create, which
// checks the NodePool's limits again) and launches them through the AWS cloud provider, unless launch is false, and
// binds each pod placed on a node to it, as kube-scheduler then would (the bind is what the next pass sees of it).
func (c *cluster) commit(results scheduling.Results, launch bool) (*pass, error) {
	p := &pass{placed: map[*launched][]*corev1.Pod{}, errors: map[types.UID]error{}}
	for pod, err := range results.PodErrors {
		p.errors[pod.UID] = err
	}
	byProviderID := lo.SliceToMap(c.nodes, func(l *launched) (string, *launched) { return l.nodeClaim.Status.ProviderID, l })
	for _, en := range results.ExistingNodes {
		if len(en.Pods) == 0 {
			continue
		}
		l, ok := byProviderID[en.ProviderID()]
		if !ok {
			return nil, fmt.Errorf("karpenter placed pods on node %s, which the planner did not launch", en.Name())
		}
		p.placed[l] = append(p.placed[l], en.Pods...)
	}
	for _, nc := range results.NewNodeClaims {
		if !launch {
			break
		}
		l, err := c.launch(nc)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, l)
		p.launched = append(p.launched, l)
		p.placed[l] = nc.Pods
	}
	// Karpenter decides each pod once: placed on one node, or refused (or left undecided at its solve's timeout).
	seen := map[types.UID]bool{}
	for l, pods := range p.placed {
		for _, pod := range pods {
			if _, refused := p.errors[pod.UID]; refused || seen[pod.UID] {
				return nil, fmt.Errorf("karpenter decided pod %s twice in one pass", pod.Name)
			}
			seen[pod.UID] = true
			if err := c.bind(pod, l); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// room is how many more pods of the spec the lab's nodes have nvidia.com/gpu slices for, by the allocatable Karpenter
// expects of each node (its NodeClaim's): a bound on the learners that can land without a new node, never a decision
// (CPU or memory may run out first; Karpenter's pass says).
func (c *cluster) room(spec corev1.PodSpec) int {
	request := resources.RequestsForPods(&corev1.Pod{Spec: spec})[awsv1.ResourceNVIDIAGPU]
	if request.IsZero() {
		return 0
	}
	return lo.SumBy(c.nodes, func(l *launched) int {
		free := l.nodeClaim.Status.Allocatable[awsv1.ResourceNVIDIAGPU]
		free.Sub(l.slices)
		return int(max(free.Value()/request.Value(), 0))
	})
}

// bind puts a placed pod on its node, running. A CapacityBuffer's virtual pods exist in Karpenter's memory only: the
// nodes launched for them stay, but nothing binds.
func (c *cluster) bind(placed *corev1.Pod, l *launched) error {
	if !c.pods.pending(client.ObjectKeyFromObject(placed)) {
		return nil
	}
	pod := &corev1.Pod{}
	if err := c.kube.Get(c.ctx, client.ObjectKeyFromObject(placed), pod); err != nil {
		return err
	}
	pod.Spec.NodeName = l.nodeClaim.Status.NodeName
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
	if err := c.kube.Update(c.ctx, pod); err != nil {
		return err
	}
	c.pods.remove(placed)
	c.pods.add(pod)
	l.slices.Add(resources.RequestsForPods(pod)[awsv1.ResourceNVIDIAGPU])
	c.boundTo[pod.UID] = l
	return c.state.UpdatePod(c.ctx, pod)
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
	resolved, err := c.aws.CloudProvider.Create(c.ctx, nodeClaim)
	if err != nil {
		return nil, fmt.Errorf("launching NodeClaim %s: %w", name, err)
	}
	// The NodeClaim lifecycle's launch step (pkg/controllers/nodeclaim/lifecycle/launch.go).
	nodeClaim = lifecycle.PopulateNodeClaimDetails(nodeClaim, resolved)
	price, err := c.aws.Price(c.ctx, nodeClaim)
	if err != nil {
		return nil, err
	}
	instanceType := nodeClaim.Labels[corev1.LabelInstanceTypeStable]
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
