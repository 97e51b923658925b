package main

// What the rehearsal tells its driver happened, in simulated time, and the client Karpenter's controllers use, through
// which it sees their evictions and gives their NodeClaims simulated creation times.

import (
	"context"
	"sync"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/metrics"

	"github.com/gpulab/planner/render"
)

// event is one line of the shared event format (rehearsal/karpenter.py; docs/developers/rehearsal.md): what, at which
// simulated time, in which lab, and the fields of its kind.
type event struct {
	At           string  `json:"at"`
	What         string  `json:"what"`
	Lab          string  `json:"lab"`
	Node         string  `json:"node,omitempty"`
	Pod          string  `json:"pod,omitempty"`
	InstanceType string  `json:"instanceType,omitempty"`
	CapacityType string  `json:"capacityType,omitempty"`
	PricePerHour float64 `json:"pricePerHour,omitempty"`
	Reason       string  `json:"reason,omitempty"`
}

// journal collects the events of a step and the simulated creation time of each NodeClaim.
type journal struct {
	clock     *simClock
	mu        sync.Mutex
	events    []event
	createdAt map[types.UID]time.Time // each NodeClaim's simulated creation time
	removedAt map[types.UID]time.Time // and deletion time
	labs      map[string]string       // each node's lab
	// The pods noted as disrupted: a pod is disrupted once, though Karpenter may evict it again while it terminates
	// (its eviction queue retries until the pod is gone) or delete it after evicting it.
	disruptedPods map[types.UID]bool
	// The NodeClaims the interruption controller deleted, with the kind of its message (spot.go), and the pods their
	// drains moved that the stepper has not yet handed to the driver.
	interruptions map[types.UID]string
	moved         []movedPod
}

// movedPod is a pod moved off a node the interruption controller deleted, which the driver may make again.
type movedPod struct {
	Lab string `json:"lab"`
	Pod string `json:"pod"` // namespace/name
}

func newJournal(clk *simClock) *journal {
	return &journal{clock: clk, createdAt: map[types.UID]time.Time{}, removedAt: map[types.UID]time.Time{}, labs: map[string]string{},
		disruptedPods: map[types.UID]bool{}, interruptions: map[types.UID]string{}}
}

func (j *journal) add(e event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e.At = j.clock.Now().UTC().Format(time.RFC3339)
	j.events = append(j.events, e)
}

// take returns the events since the last take.
func (j *journal) take() []event {
	j.mu.Lock()
	defer j.mu.Unlock()
	events := j.events
	j.events = nil
	if events == nil {
		return []event{}
	}
	return events
}

func (j *journal) launched(node string, labels map[string]string, price float64) {
	j.mu.Lock()
	j.labs[node] = labels[render.LabLabel]
	j.mu.Unlock()
	j.add(event{What: "nodeLaunched", Lab: labels[render.LabLabel], Node: node,
		InstanceType: labels[corev1.LabelInstanceTypeStable], CapacityType: labels[karpv1.CapacityTypeLabelKey], PricePerHour: price})
}

func (j *journal) deleted(node, lab, reason string) {
	j.add(event{What: "nodeDeleted", Lab: lab, Node: node, Reason: reason})
}

func (j *journal) bound(pod *corev1.Pod) {
	j.add(event{What: "podBound", Lab: j.lab(pod.Spec.NodeName), Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName})
}

// ready notes a learner's pod running: its notebook started, its node's image there.
func (j *journal) ready(pod *corev1.Pod) {
	j.add(event{What: "podReady", Lab: j.lab(pod.Spec.NodeName), Pod: pod.Namespace + "/" + pod.Name, Node: pod.Spec.NodeName})
}

func (j *journal) lab(node string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.labs[node]
}

func (j *journal) deletedAt(uid types.UID) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.removedAt[uid]
	return t, ok
}

func (j *journal) created(uid types.UID) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.createdAt[uid]
	return t, ok
}

// isInterruption says whether a reason is the kind of an interruption message the controller acted on.
func (j *journal) isInterruption(reason string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, kind := range j.interruptions {
		if kind == reason {
			return true
		}
	}
	return false
}

// takeMoved returns the pods interruptions moved since the last take.
func (j *journal) takeMoved() []movedPod {
	j.mu.Lock()
	defer j.mu.Unlock()
	moved := j.moved
	j.moved = nil
	return moved
}

// interrupted notes that the interruption controller deleted the NodeClaim on a message of this kind.
func (j *journal) interrupted(uid types.UID, kind string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.interruptions[uid] = kind
}

// reasonOf is why Karpenter deleted a NodeClaim: the kind of the message its interruption controller deleted it on
// (spot_interrupted, as the controller counts it in karpenter_nodeclaims_disrupted_total: aws/karpenter-provider-aws
// v1.14.1 pkg/controllers/interruption/utils.go deleteNodeClaim), its disruption reason (Empty, Underutilized,
// Drifted; the orchestration queue sets it, pkg/controllers/disruption/queue.go), expired when its expireAfter has
// passed (the expiration controller deletes it without one), else terminated.
func (j *journal) reasonOf(nodeClaim *karpv1.NodeClaim) string {
	j.mu.Lock()
	kind, interrupted := j.interruptions[nodeClaim.UID]
	j.mu.Unlock()
	if interrupted {
		return kind
	}
	if cond := nodeClaim.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason); cond.IsTrue() {
		return cond.Reason
	}
	if expireAfter := nodeClaim.Spec.ExpireAfter.Duration; expireAfter != nil {
		if created, ok := j.created(nodeClaim.UID); ok && !j.clock.Now().Before(created.Add(*expireAfter)) {
			return metrics.ExpiredReason
		}
	}
	return "terminated"
}

// simClient is the client Karpenter's controllers get. The API server stamps each object's creationTimestamp with
// the wall clock, while Karpenter compares a NodeClaim's with its own clock (expireAfter, pkg/controllers/nodeclaim/
// expiration; the instance-type drift check after an hour, nodeclaim/disruption/drift.go; a node's disruption cost,
// pkg/utils/disruption): so a NodeClaim reads as created at the simulated time Karpenter created it. It also notes
// each pod Karpenter evicts or deletes, with its node's disruption reason.
type simClient struct {
	client.Client
	journal *journal
}

func (c *simClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if nc, ok := obj.(*karpv1.NodeClaim); ok && err == nil {
		c.simulated(nc)
	}
	return err
}

func (c *simClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if nc, ok := obj.(*karpv1.NodeClaim); ok && err == nil {
		c.simulated(nc)
	}
	return err
}

// Patch and Update answer with the object as the API server stored it: its times the wall clock's again.
func (c *simClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.simulatedObject(obj)
	return err
}

func (c *simClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.simulatedObject(obj)
	return err
}

func (c *simClient) simulatedObject(obj client.Object) {
	if nc, ok := obj.(*karpv1.NodeClaim); ok {
		c.simulated(nc)
	}
}

func (c *simClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Client.List(ctx, list, opts...)
	if ncs, ok := list.(*karpv1.NodeClaimList); ok && err == nil {
		for i := range ncs.Items {
			c.simulated(&ncs.Items[i])
		}
	}
	return err
}

// simulated gives the NodeClaim the simulated times of its creation and deletion: when Karpenter created or deleted
// it through this client, or else when the client first saw it so (deletion timestamps count too: Karpenter adds
// terminationGracePeriod to it, pkg/controllers/nodeclaim/lifecycle/controller.go).
func (c *simClient) simulated(nc *karpv1.NodeClaim) {
	j := c.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.clock.Now()
	if _, ok := j.createdAt[nc.UID]; !ok {
		j.createdAt[nc.UID] = now
	}
	nc.CreationTimestamp = metav1.NewTime(j.createdAt[nc.UID])
	if nc.DeletionTimestamp != nil {
		if _, ok := j.removedAt[nc.UID]; !ok {
			j.removedAt[nc.UID] = now
		}
		nc.DeletionTimestamp = &metav1.Time{Time: j.removedAt[nc.UID]}
	}
	// Conditions too: operatorpkg starts each missing condition Unknown at the wall clock's time unless given a clock,
	// and Karpenter's first look at a NodeClaim does so (an Unknown condition set Unknown again keeps its time), so
	// the lifecycle's liveness would compare the wall clock's Registered time with its registration timeout
	// (nodeclaim/lifecycle/liveness.go). A condition's time the simulated clock never showed is its creation's, and
	// the missing ones start at the simulated time.
	for i, cond := range nc.Status.Conditions {
		if !j.clock.hasShown(cond.LastTransitionTime.Time) {
			nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(j.createdAt[nc.UID])
		}
	}
	nc.StatusConditions(status.WithClock(j.clock))
}

// Delete notes when Karpenter deletes a NodeClaim, and a pod Karpenter deletes itself: one its
// terminationGracePeriod ran out for (pkg/controllers/node/termination/terminator).
func (c *simClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if err != nil {
		return err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		c.disrupted(ctx, o)
	case *karpv1.NodeClaim:
		c.journal.mu.Lock()
		if _, ok := c.journal.removedAt[o.UID]; !ok {
			c.journal.removedAt[o.UID] = c.journal.clock.Now()
		}
		c.journal.mu.Unlock()
	}
	return nil
}

// Status writes a NodeClaim's conditions with simulated times, for a condition Karpenter's code set without its clock
// (see simulated).
func (c *simClient) Status() client.SubResourceWriter {
	return &simStatus{SubResourceWriter: c.Client.Status(), clock: c.journal.clock, client: c}
}

type simStatus struct {
	client.SubResourceWriter
	clock  *simClock
	client *simClient
}

func (s *simStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.simulated(obj)
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	s.client.simulatedObject(obj)
	return err
}

func (s *simStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.simulated(obj)
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	s.client.simulatedObject(obj)
	return err
}

func (s *simStatus) simulated(obj client.Object) {
	nc, ok := obj.(*karpv1.NodeClaim)
	if !ok {
		return
	}
	for i, cond := range nc.Status.Conditions {
		if !s.clock.hasShown(cond.LastTransitionTime.Time) {
			nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(s.clock.Now())
		}
	}
}

func (c *simClient) SubResource(name string) client.SubResourceClient {
	return &evictions{SubResourceClient: c.Client.SubResource(name), name: name, client: c}
}

// evictions notes each pod Karpenter evicts (the eviction queue, pkg/controllers/node/termination/terminator/
// eviction.go) once the API server has accepted the eviction.
type evictions struct {
	client.SubResourceClient
	name   string
	client *simClient
}

func (e *evictions) Create(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	err := e.SubResourceClient.Create(ctx, obj, subResource, opts...)
	if pod, ok := obj.(*corev1.Pod); ok && e.name == "eviction" && err == nil {
		e.client.disrupted(ctx, pod)
	}
	return err
}

// disrupted notes a pod Karpenter removed from its node, with the reason its node goes: the NodeClaim's disruption
// reason, or why the NodeClaim was deleted.
func (c *simClient) disrupted(ctx context.Context, pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || isDaemon(pod) || !c.journal.firstDisruption(pod.UID) {
		return
	}
	reason := "terminated"
	claims := &karpv1.NodeClaimList{}
	if err := c.List(ctx, claims); err == nil {
		for i := range claims.Items {
			if claims.Items[i].Status.NodeName == pod.Spec.NodeName {
				reason = c.journal.reasonOf(&claims.Items[i])
			}
		}
	}
	c.journal.add(event{What: "disrupted", Lab: c.journal.lab(pod.Spec.NodeName), Pod: pod.Namespace + "/" + pod.Name,
		Node: pod.Spec.NodeName, Reason: reason})
	if c.journal.isInterruption(reason) {
		c.journal.mu.Lock()
		c.journal.moved = append(c.journal.moved, movedPod{c.journal.labs[pod.Spec.NodeName], pod.Namespace + "/" + pod.Name})
		c.journal.mu.Unlock()
	}
}

// firstDisruption says whether the pod is noted as disrupted for the first time.
func (j *journal) firstDisruption(uid types.UID) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	first := !j.disruptedPods[uid]
	j.disruptedPods[uid] = true
	return first
}

func isDaemon(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}

// simManager is the manager as Karpenter's controllers see it: its client is simClient (operatorpkg's reconcilers
// read the object they reconcile with the manager's client).
type simManager struct {
	manager.Manager
	client client.Client
}

func (m *simManager) GetClient() client.Client { return m.client }
