package main

// A node's termination driven to its end before the clock moves. Karpenter's termination controller
// (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/node/termination/controller.go) waits on the wall clock between its
// passes: 1 s while pods are being evicted, while a drain lasts its shortest time and while volumes detach, 5 s while
// the instance terminates; controller-runtime does not count such a requeue as work until it is due. Taken as settled,
// a termination under way would end at whatever simulated time the clock had reached by then, which differed from run
// to run. So a terminating node is settled only while it waits for simulated time, and while it does not, the stepper
// annotates it and its NodeClaim again and again, so that their controllers reconcile at once, not a wall second on.

import (
	"fmt"
	"time"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/controllers/node/termination"
	podutil "sigs.k8s.io/karpenter/pkg/utils/pod"
)

const (
	// The annotation the stepper sets on a terminating node and its NodeClaim to have their controllers reconcile now.
	nudgeAnnotation = "rehearsal.gpulab.dev/nudge"
	// How often, at most: often enough that a termination takes a fraction of the wall seconds its requeues would.
	nudgeEvery = 100 * time.Millisecond
)

// terminating says which terminating NodeClaim has work its controllers would do on the wall clock, "" when each
// waits for simulated time: for pods that Karpenter will not evict before its terminationGracePeriod (their
// karpenter.sh/do-not-disrupt, or a PodDisruptionBudget that allows no disruption now), or, drained, for the end of
// the drain's shortest time (MinDrainTime). Such ends are in nextDue.
func (s *stepper) terminating() (string, []client.Object, error) {
	claims := &karpv1.NodeClaimList{}
	if err := s.reader.List(s.ctx, claims); err != nil {
		return "", nil, err
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp == nil {
			continue
		}
		objects := []client.Object{nc}
		if nc.Status.NodeName == "" {
			return fmt.Sprintf("NodeClaim %s terminating", nc.Name), objects, nil
		}
		node := &corev1.Node{}
		if err := s.reader.Get(s.ctx, types.NamespacedName{Name: nc.Status.NodeName}, node); err != nil {
			return fmt.Sprintf("NodeClaim %s terminating, its node gone", nc.Name), objects, client.IgnoreNotFound(err)
		}
		objects = append(objects, node)
		waiting, err := s.waitsForGracePeriod(node)
		if err != nil {
			return "", nil, err
		}
		switch {
		case waiting == nil:
			return fmt.Sprintf("node %s draining", node.Name), objects, nil
		case *waiting > 0:
			continue // only its terminationGracePeriod ends their wait
		}
		drained := nc.StatusConditions().Get(karpv1.ConditionTypeDrained)
		if drained != nil && drained.IsUnknown() && s.clock.Since(drained.LastTransitionTime.Time) < termination.MinDrainTime {
			continue
		}
		return fmt.Sprintf("node %s terminating", node.Name), objects, nil
	}
	return "", nil, nil
}

// waitsForGracePeriod counts the pods on the node that its drain still waits for and that only the node's
// terminationGracePeriod will end (do-not-disrupt, or their PodDisruptionBudget allows no eviction); nil when a pod
// is on its way out on the wall clock (evictable now, or deleted and not yet gone). Karpenter drains a node one group
// of pods at a time and evicts none of a group while an earlier one still has pods (drainGroup), so only the first
// group with pods waiting counts: a DaemonSet's pod (the device plugin's) is not evicted while a learner's pod its
// budget holds is on the node.
func (s *stepper) waitsForGracePeriod(node *corev1.Node) (*int, error) {
	pods := &corev1.PodList{}
	if err := s.reader.List(s.ctx, pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return nil, err
	}
	waiting := lo.Filter(lo.ToSlicePtr(pods.Items), func(pod *corev1.Pod, _ int) bool { return podutil.IsWaitingEviction(pod, s.clock) })
	if len(waiting) == 0 {
		return lo.ToPtr(0), nil
	}
	first := lo.Min(lo.Map(waiting, func(pod *corev1.Pod, _ int) int { return drainGroup(pod) }))
	blocked := 0
	for _, pod := range waiting {
		if drainGroup(pod) != first {
			continue
		}
		if podutil.IsTerminating(pod) {
			return nil, nil
		}
		if podutil.IsEvictable(pod, s.clock, s.recorder) {
			held, err := s.heldByBudget(pod)
			if err != nil || !held {
				return nil, err
			}
		}
		blocked++
	}
	return &blocked, nil
}

// drainGroup is the place of a pod's group in the order Karpenter drains a node: pods neither critical nor a
// DaemonSet's, then DaemonSets' pods, then critical pods, then critical DaemonSets' pods (sigs.k8s.io/karpenter
// v1.14.1 pkg/controllers/node/termination/terminator/terminator.go groupPodsByPriority, unexported; Drain queues
// only the first group with pods for eviction).
func drainGroup(pod *corev1.Pod) int {
	group := 0
	if podutil.IsOwnedByDaemonSet(pod) {
		group++
	}
	if pod.Spec.PriorityClassName == "system-cluster-critical" || pod.Spec.PriorityClassName == "system-node-critical" {
		group += 2
	}
	return group
}

// heldByBudget says whether a PodDisruptionBudget that selects the pod allows no disruption now (the eviction API
// then refuses with 429 and Karpenter's eviction queue backs off).
func (s *stepper) heldByBudget(pod *corev1.Pod) (bool, error) {
	budgets := &policyv1.PodDisruptionBudgetList{}
	if err := s.reader.List(s.ctx, budgets, client.InNamespace(pod.Namespace)); err != nil {
		return false, err
	}
	for _, pdb := range budgets.Items {
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed <= 0 {
			return true, nil
		}
	}
	return false, nil
}

// nudge annotates the objects so that their controllers reconcile now, at most every nudgeEvery.
func (s *stepper) nudge(objects []client.Object) {
	if time.Since(s.nudged) < nudgeEvery {
		return
	}
	s.nudged = time.Now()
	s.nudges++
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, nudgeAnnotation, s.nudges)))
	for _, obj := range objects {
		target := obj.DeepCopyObject().(client.Object)
		if err := s.writer.Patch(s.ctx, target, patch); client.IgnoreNotFound(err) != nil {
			log.FromContext(s.ctx).Error(err, "nudging", "object", obj.GetName())
		}
	}
}
