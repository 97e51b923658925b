package main

// What the kubelet of each rehearsal node would do, for want of one: run the pods bound to it (their status), confirm
// their deletion once they are gone, and renew the node's lease while its instance runs, without which the node
// lifecycle controller of kube-controller-manager would mark the node unreachable and taint it.

import (
	"context"
	"sync"
	"time"

	"github.com/samber/lo"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	controllerruntime "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	nodeutils "sigs.k8s.io/karpenter/pkg/utils/node"

	"github.com/gpulab/planner/standin"
)

const (
	// The kubelet's defaults (KubeletConfiguration nodeLeaseDurationSeconds 40, renewed every quarter of it).
	leaseSeconds = 40
	leaseRenewal = 10 * time.Second
	nodeLeases   = "kube-node-lease"
	// Karpenter's podevents controller writes a NodeClaim's lastPodEventTime at most once in this much of its clock
	// (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/nodeclaim/podevents/controller.go:43, dedupeTimeout; unexported).
	podEventsDedupe = 10 * time.Second
	// How often a deleted pod held for Karpenter's podevents controller is looked at again (wall clock).
	goingPoll = 20 * time.Millisecond
)

// kubelet stands in for the kubelets of the nodes Karpenter launched (those with a karpenter.sh/nodepool label). A
// bound pod runs once its node has its image (boots.imageAt): at once, or at that time of the simulated clock, when
// the stepper, which stops there (nextDue), starts it (startDue).
type kubelet struct {
	reader  client.Client // the manager's cache
	writer  client.Client
	launch  *standin.Launch // the stand-in's EC2: a node's kubelet runs while its instance does
	clock   *simClock
	boots   *boots
	journal *journal
	mu      sync.Mutex
	// Bound pods waiting for their node's image, and when it is there, by UID: a learner's pod moved by a spot
	// interruption is made again under the same name, and must not start at its gone namesake's time.
	starts map[types.UID]podStart
}

func (k *kubelet) register(m manager.Manager) error {
	return controllerruntime.NewControllerManagedBy(m).Named("rehearsal.kubelet").For(&corev1.Pod{}).Complete(k)
}

func (k *kubelet) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := k.reader.Get(ctx, req.NamespacedName, pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pod.Spec.NodeName == "" || !k.ours(ctx, pod.Spec.NodeName) {
		return reconcile.Result{}, nil
	}
	if pod.DeletionTimestamp != nil {
		if seen, err := k.goingSeen(ctx, pod); err != nil || !seen {
			return reconcile.Result{RequeueAfter: goingPoll}, err
		}
		// No container runs, so a deleted pod has stopped once Karpenter saw it going: the kubelet's final delete
		// (grace period 0).
		return reconcile.Result{}, client.IgnoreNotFound(k.writer.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	}
	if pod.Status.Phase == corev1.PodRunning {
		return reconcile.Result{}, nil
	}
	k.mu.Lock()
	start, waiting := k.starts[pod.UID]
	if !waiting && !isDaemon(pod) {
		start = podStart{req.NamespacedName, k.boots.imageAt(pod.Spec.NodeName, pod)}
		if start.at.After(k.clock.Now()) {
			k.starts[pod.UID], waiting = start, true
		}
	}
	k.mu.Unlock()
	if waiting && start.at.After(k.clock.Now()) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, k.run(ctx, req.NamespacedName, pod.UID)
}

// podStart is a bound pod waiting for its node's image, and when the image is there.
type podStart struct {
	key types.NamespacedName
	at  time.Time
}

// goingSeen says whether Karpenter's podevents controller has recorded that the deleted pod is going, on its node's
// NodeClaim (status.lastPodEventTime, from which consolidateAfter counts), or needs not. It reads the pod from its
// cache when the pod turns terminating, and a pod already gone is never recorded (controller-runtime's AsReconciler
// skips one not found): sigs.k8s.io/karpenter v1.14.1 pkg/controllers/nodeclaim/podevents/controller.go. A kubelet
// takes time to stop a pod's containers, so in a cluster Karpenter sees the pod terminating; this stand-in, which
// stops none, would remove it at once and race that read: a node emptied then could be consolidated counting from
// its pod's binding instead, and the day differ from run to run (seen in the twin's audit log: docs/rehearsal.md,
// "One answer per stack"). So the pod stays until the NodeClaim's time is within the controller's dedupe window of
// the clock (recorded now, or recent enough that it writes nothing); the stepper does not move the clock meanwhile
// (unsettled, "deleting"). Pods it ignores (a DaemonSet's, on a node without one NodeClaim) and pods of a NodeClaim
// being deleted, whose time no decision reads, are not held.
func (k *kubelet) goingSeen(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if isDaemon(pod) {
		return true, nil
	}
	node := &corev1.Node{}
	if err := k.reader.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	nc, err := nodeutils.NodeClaimForNode(ctx, k.reader, node)
	if err != nil || nc.DeletionTimestamp != nil {
		return true, nil
	}
	last := nc.Status.LastPodEventTime.Time
	return !last.IsZero() && k.clock.Since(last) < podEventsDedupe, nil
}

// next is when each pod waiting for its node's image can start.
func (k *kubelet) next() []time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return lo.Map(lo.Values(k.starts), func(s podStart, _ int) time.Time { return s.at })
}

// startDue runs the pods whose node has their image by now.
func (k *kubelet) startDue(ctx context.Context, now time.Time) error {
	k.mu.Lock()
	due := map[types.UID]types.NamespacedName{}
	for uid, start := range k.starts {
		if !start.at.After(now) {
			due[uid] = start.key
		}
	}
	k.mu.Unlock()
	for uid, key := range due {
		if err := k.run(ctx, key, uid); err != nil {
			return err
		}
		k.mu.Lock()
		delete(k.starts, uid)
		k.mu.Unlock()
	}
	return nil
}

// run reports the pod Running and Ready, as the kubelet does once its containers have started; a learner's pod (not
// a DaemonSet's) is a podReady event. Nothing, if the pod of that UID is gone.
func (k *kubelet) run(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	var pod *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod = &corev1.Pod{}
		if err := k.writer.Get(ctx, key, pod); err != nil {
			return err
		}
		if pod.UID != uid || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodRunning {
			pod = nil
			return nil
		}
		return k.writer.Status().Update(ctx, running(pod))
	})
	if errors.IsNotFound(err) || pod == nil {
		return nil
	}
	if err != nil {
		return err
	}
	if !isDaemon(pod) {
		k.journal.ready(pod)
	}
	return nil
}

// running is the pod's status once its containers run.
func running(pod *corev1.Pod) *corev1.Pod {
	now := metav1.Now()
	running := pod.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	running.Status.StartTime = &now
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			scheduled = c
		}
	}
	running.Status.Conditions = []corev1.PodCondition{scheduled}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		running.Status.Conditions = append(running.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	running.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		running.Status.ContainerStatuses = append(running.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return running
}

func (k *kubelet) ours(ctx context.Context, nodeName string) bool {
	node := &corev1.Node{}
	if err := k.reader.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		return false
	}
	_, ok := node.Labels[karpv1.NodePoolLabelKey]
	return ok
}

// renewLeases renews the lease of each launched node whose instance runs, until ctx ends, as each node's kubelet
// would.
func (k *kubelet) renewLeases(ctx context.Context) {
	for {
		nodes := &corev1.NodeList{}
		if err := k.reader.List(ctx, nodes, client.HasLabels{karpv1.NodePoolLabelKey}); err == nil {
			for i := range nodes.Items {
				k.renew(ctx, &nodes.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaseRenewal):
		}
	}
}

// renew renews the node's lease if its instance runs. A node being deleted keeps its kubelet while it drains, until
// Karpenter terminates the instance or EC2 reclaims it: were the lease to lapse sooner, the node lifecycle controller
// would mark the node NotReady at a wall-clock time, and Karpenter's node repair (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/node/health/controller.go), which compares that time with its own clock, would read it as far past
// its 30-minute toleration and cut a drain held on the simulated clock short.
func (k *kubelet) renew(ctx context.Context, node *corev1.Node) {
	if _, err := k.launch.Get(ctx, instanceID(node.Spec.ProviderID)); err != nil {
		return
	}
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	err := k.writer.Get(ctx, types.NamespacedName{Namespace: nodeLeases, Name: node.Name}, lease)
	if errors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: nodeLeases, Name: node.Name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node.Name), LeaseDurationSeconds: ptr.To[int32](leaseSeconds), RenewTime: &now},
		}
		err = k.writer.Create(ctx, lease)
	} else if err == nil {
		lease.Spec.RenewTime = &now
		err = k.writer.Update(ctx, lease)
	}
	if err != nil {
		// The next renewal, 10 s on, tries again; the node lifecycle controller waits 50 s after the last one (its
		// node-monitor-grace-period, which the twin leaves at its default: 50 s in Kubernetes v1.34.12, v1.35.8 and
		// v1.36.5, pkg/controller/nodelifecycle/config/v1alpha1/defaults.go).
		log.FromContext(ctx).Error(err, "renewing the node's lease", "Node", node.Name)
	}
}
