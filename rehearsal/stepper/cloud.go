package main

// The rehearsal's cloud provider: the AWS provider's, over the stand-ins, whose launch also makes the Node that a
// kubelet would register, as Karpenter's own KWOK provider does (sigs.k8s.io/karpenter v1.14.1 kwok/cloudprovider/
// cloudprovider.go: Create makes the Node, Delete removes it).

import (
	"context"
	"fmt"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"

	"github.com/gpulab/planner/render"
	"github.com/gpulab/planner/standin"
)

// The resource the device plugin advertises with renameByDefault: the resource's name with ".shared" (NVIDIA device
// plugin v0.20.0 docs, "Shared Access to GPUs").
var sharedGPU = awsv1.ResourceNVIDIAGPU + ".shared"

// nodeMaker is the AWS provider's cloud provider, whose Create also registers the Node and whose Delete removes it.
type nodeMaker struct {
	cloudprovider.CloudProvider
	aws     *standin.AWS
	writer  client.Client // the twin as the kubelet writes to it: the admin's identity, no cache
	render  *render.Render
	journal *journal
	clock   *simClock
	boots   *boots
}

// Create launches as the AWS provider does and then makes the Node as the kubelet registers it: the NodeClaim's
// labels (the instance type's and the NodePool's), its providerID, the karpenter.sh/unregistered taint the kubelet
// registers with (Karpenter then adds the NodePool's taints and removes it), Ready, the capacity and allocatable
// Karpenter expects, and nvidia.com/gpu as the lab's device-plugin profile advertises it. Where the driver gave the
// lab's timings, the Node registers Ready that long after the launch, without its GPU, and gets its slices later
// (boot.go); else at once, with them, as Karpenter's KWOK provider's nodes do.
func (m *nodeMaker) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	resolved, err := m.CloudProvider.Create(ctx, nodeClaim)
	if err != nil {
		return nil, err
	}
	labels := lo.Assign(nodeClaim.Labels, resolved.Labels, map[string]string{corev1.LabelHostname: nodeClaim.Name})
	capacity, allocatable, err := m.devicePluginResources(labels, resolved.Status.Capacity, resolved.Status.Allocatable)
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeClaim.Name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: resolved.Status.ProviderID, Taints: []corev1.Taint{karpv1.UnregisteredNoExecuteTaint}},
		Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable, Phase: corev1.NodeRunning},
	}
	booting := node.DeepCopy()
	booting.Status.Capacity, booting.Status.Allocatable = withoutGPU(capacity), withoutGPU(allocatable)
	lab, instanceType := labels[render.LabLabel], labels[corev1.LabelInstanceTypeStable]
	if !m.boots.launch(lab, instanceType, m.clock.Now(), booting, capacity, allocatable) {
		if err := m.register(ctx, node); err != nil {
			return nil, err
		}
	}
	// The price of the offering launched: the resolved labels (type, zone, capacity type) of the NodeClaim's class.
	priced := nodeClaim.DeepCopy()
	priced.Labels = labels
	price, err := m.aws.Price(ctx, priced)
	if err != nil {
		return nil, err
	}
	m.journal.launched(nodeClaim.Name, labels, price)
	return resolved, nil
}

// reasonOf is why the NodeClaim goes: registration_timeout when its Node never registered within Karpenter's
// registration timeout (its liveness check deletes it then: sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/nodeclaim/lifecycle/liveness.go:53, the reason it records), else as the journal says.
func (m *nodeMaker) reasonOf(nodeClaim *karpv1.NodeClaim) string {
	registered := nodeClaim.StatusConditions().Get(karpv1.ConditionTypeRegistered)
	if timeout, ok := m.boots.registrationTimeout(); ok && registered != nil && !registered.IsTrue() &&
		!m.clock.Now().Before(registered.LastTransitionTime.Add(timeout)) {
		return "registration_timeout"
	}
	return m.journal.reasonOf(nodeClaim)
}

// withoutGPU is a node's resources before its device plugin registers: the kubelet zeroes an extended resource
// until then (sigs.k8s.io/karpenter v1.14.1 nodeclaim/lifecycle/initialization.go, RequestedResourcesRegistered).
func withoutGPU(resources corev1.ResourceList) corev1.ResourceList {
	without := resources.DeepCopy()
	delete(without, awsv1.ResourceNVIDIAGPU)
	delete(without, sharedGPU)
	return without
}

// register creates the Node with its status, as a kubelet registers and then reports (the API server keeps a Node's
// status on create; kube-controller-manager's node controllers may change the Node before its status is written
// again, hence the retries). A Node of the same name left by a launch that failed after it is replaced: its
// providerID, which cannot change, is the failed launch's instance.
func (m *nodeMaker) register(ctx context.Context, node *corev1.Node) error {
	node = node.DeepCopy()
	now := metav1.Now() // the node lifecycle controller compares heartbeats with the wall clock
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message:           "rehearsal: no kubelet; the node is registered by the rehearsal's cloud provider",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}
	err := m.writer.Create(ctx, node.DeepCopy())
	if errors.IsAlreadyExists(err) {
		stale := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
		if err := m.writer.Delete(ctx, stale, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing node %s: %w", node.Name, err)
		}
		err = m.writer.Create(ctx, node.DeepCopy())
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", node.Name, err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		stored := &corev1.Node{}
		if err := m.writer.Get(ctx, types.NamespacedName{Name: node.Name}, stored); err != nil {
			return err
		}
		stored.Status = node.Status
		return m.writer.Status().Update(ctx, stored)
	})
}

// Delete terminates the instance and removes the Node, as the kubelet's node goes with its instance.
func (m *nodeMaker) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	if err := m.CloudProvider.Delete(ctx, nodeClaim); err != nil {
		return err // not found: terminated before
	}
	m.boots.forget(nodeClaim.Name)
	// The Node is named after its NodeClaim (Create), which may not have seen it register (a launch Karpenter gave up on).
	m.journal.deleted(nodeClaim.Name, nodeClaim.Labels[render.LabLabel], m.reasonOf(nodeClaim))
	node := &corev1.Node{}
	if err := m.writer.Get(ctx, types.NamespacedName{Name: nodeClaim.Name}, node); err == nil {
		if err := m.writer.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	// The stand-in terminates at once: say so as Karpenter's KWOK provider does, so that the NodeClaim's finalizer
	// goes now rather than at the lifecycle controller's next check, 5 s later (nodeclaim/lifecycle/controller.go).
	return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s terminated", nodeClaim.Status.ProviderID))
}

// devicePluginConfig is the part of a device-plugin config file (the chart's ConfigMap holds one per profile; the
// format of NVIDIA device plugin v0.20.0's README, "Shared Access to GPUs") that decides what a node advertises.
type devicePluginConfig struct {
	Sharing struct {
		TimeSlicing *sharing `json:"timeSlicing"`
		MPS         *sharing `json:"mps"`
	} `json:"sharing"`
}

type sharing struct {
	RenameByDefault bool `json:"renameByDefault"`
	Resources       []struct {
		Name     string `json:"name"`
		Replicas int64  `json:"replicas"`
	} `json:"resources"`
}

// devicePluginResources is the node's capacity and allocatable once the device plugin has registered: each GPU of
// the instance (gpulab's table) advertised replicas times, under nvidia.com/gpu (nvidia.com/gpu.shared with
// renameByDefault), by the profile the node's label names (NODE_LABEL), else the DEFAULT_CONFIG one. Karpenter's
// own figure for nvidia.com/gpu (the NodeOverlay's) is replaced: the kubelet reports what the plugin advertises.
func (m *nodeMaker) devicePluginResources(labels map[string]string, capacity, allocatable corev1.ResourceList) (corev1.ResourceList, corev1.ResourceList, error) {
	capacity, allocatable = capacity.DeepCopy(), allocatable.DeepCopy()
	delete(capacity, awsv1.ResourceNVIDIAGPU)
	delete(allocatable, awsv1.ResourceNVIDIAGPU)
	plugin := m.render.DevicePlugin
	row, known := m.render.InstanceTypes[labels[corev1.LabelInstanceTypeStable]]
	if plugin == nil || !known || row.GPU.Count == 0 || labels["nvidia.com/gpu.present"] != "true" {
		// The chart's DaemonSet runs only on nodes labelled nvidia.com/gpu.present=true (or by NFD, which gpulab
		// does not install): elsewhere no GPU is advertised.
		return capacity, allocatable, nil
	}
	profile, ok := labels[plugin.NodeLabel]
	if !ok {
		profile = plugin.Default
	}
	file, ok := plugin.Profiles[profile]
	if !ok {
		return nil, nil, fmt.Errorf("device plugin: the node's profile %q is not in the plugin's ConfigMap", profile)
	}
	config := devicePluginConfig{}
	if err := yaml.Unmarshal([]byte(file), &config); err != nil {
		return nil, nil, fmt.Errorf("device plugin profile %q: %w", profile, err)
	}
	name, replicas := corev1.ResourceName(awsv1.ResourceNVIDIAGPU), int64(1)
	for _, s := range []*sharing{config.Sharing.TimeSlicing, config.Sharing.MPS} {
		if s == nil {
			continue
		}
		for _, r := range s.Resources {
			if r.Name == awsv1.ResourceNVIDIAGPU.String() && r.Replicas > 1 {
				replicas = r.Replicas
				if s.RenameByDefault {
					name = sharedGPU
				}
			}
		}
	}
	count := resource.NewQuantity(int64(row.GPU.Count)*replicas, resource.DecimalSI)
	capacity[name], allocatable[name] = *count, *count
	return capacity, allocatable, nil
}
