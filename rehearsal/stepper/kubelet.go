package main

// What the kubelet of each rehearsal node would do, for want of one: run the pods bound to it (their status), confirm
// their deletion once they are gone, and renew the node's lease, without which the node lifecycle controller of
// kube-controller-manager would mark the node unreachable and taint it.

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controllerruntime "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

const (
	// The kubelet's defaults (KubeletConfiguration nodeLeaseDurationSeconds 40, renewed every quarter of it).
	leaseSeconds = 40
	leaseRenewal = 10 * time.Second
	nodeLeases   = "kube-node-lease"
)

// kubelet stands in for the kubelets of the nodes Karpenter launched (those with a karpenter.sh/nodepool label).
type kubelet struct {
	reader client.Client // the manager's cache
	writer client.Client
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
		// No container runs, so a deleted pod has stopped at once: the kubelet's final delete (grace period 0).
		return reconcile.Result{}, client.IgnoreNotFound(k.writer.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	}
	if pod.Status.Phase == corev1.PodRunning {
		return reconcile.Result{}, nil
	}
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
	if err := k.writer.Status().Update(ctx, running); err != nil {
		if errors.IsConflict(err) || errors.IsNotFound(err) {
			return reconcile.Result{Requeue: !errors.IsNotFound(err)}, nil
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

func (k *kubelet) ours(ctx context.Context, nodeName string) bool {
	node := &corev1.Node{}
	if err := k.reader.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		return false
	}
	_, ok := node.Labels[karpv1.NodePoolLabelKey]
	return ok
}

// renewLeases renews each launched node's lease until ctx ends, as each node's kubelet would.
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

func (k *kubelet) renew(ctx context.Context, node *corev1.Node) {
	if node.DeletionTimestamp != nil {
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
		// The next renewal, 10 s on, tries again; the node lifecycle controller waits 40 s.
		log.FromContext(ctx).Error(err, "renewing the node's lease", "Node", node.Name)
	}
}
