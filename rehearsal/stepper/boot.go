package main

// A launched node's boot and its learners' image, on the simulated clock: the Node Ready some time after the launch,
// its GPU slices advertised later still (the device plugin), its learner image there once pre-pulled. The figures are
// gpulab's timing table as the driver resolved them per lab and instance type (-timings, written by
// rehearsal/timings.py from domain/capacity/boot_timings.py); the stepper stops its clock at each of these times
// (nextDue), as it does where Karpenter has something to decide, and does then what the kubelet and the device plugin
// would (due).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// nodeTiming is one lab's instance type as rehearsal/timings.py resolves it, in seconds from the launch.
type nodeTiming struct {
	ReadySeconds  float64 `json:"readySeconds"`  // the Node registered and Ready
	SlicesSeconds float64 `json:"slicesSeconds"` // nvidia.com/gpu advertised
	LearnerImage  string  `json:"learnerImage"`  // "" when the lab names none
	ImageSeconds  float64 `json:"imageSeconds"`  // the learner image pre-pulled
}

// timings is the -timings file: by lab (the NodePool's gpulab.dev/lab), by instance type; and Karpenter's
// registration timeout, after which its liveness check deletes a NodeClaim whose Node has not registered
// (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness.go:52, unexported; gpulab's copy is
// domain/capacity/boot_timings.py REGISTRATION_TIMEOUT), where the stepper stops its clock for that check.
type timings struct {
	Labs                       map[string]map[string]nodeTiming `json:"labs"`
	RegistrationTimeoutSeconds float64                          `json:"registrationTimeoutSeconds"`
}

func readTimings(path string) (*timings, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-timings: %w", err)
	}
	t := &timings{}
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("-timings %s: %w", path, err)
	}
	return t, nil
}

// booting is a launched node on its way: the Node as it will register (Ready, no GPU advertised yet), and what the
// device plugin then advertises.
type booting struct {
	node                  *corev1.Node
	capacity, allocatable corev1.ResourceList
	readyAt, slicesAt     time.Time
	registered            bool
}

// image is a node's learner image and when it is there.
type image struct {
	name string
	at   time.Time
}

// boots keeps each launched node's boot until its slices are advertised, and each node's learner image.
type boots struct {
	timings *timings // nil: every node registers with its slices at its launch, as Karpenter's KWOK provider's do
	writer  client.Client
	mu      sync.Mutex
	pending map[string]*booting // by NodeClaim name, which is also the Node's
	images  map[string]image    // by Node name
}

func newBoots(t *timings, writer client.Client) *boots {
	return &boots{timings: t, writer: writer, pending: map[string]*booting{}, images: map[string]image{}}
}

// timing is the lab's figures for the instance type, if the driver gave any.
func (b *boots) timing(lab, instanceType string) (nodeTiming, bool) {
	if b.timings == nil {
		return nodeTiming{}, false
	}
	t, ok := b.timings.Labs[lab][instanceType]
	return t, ok
}

// registrationTimeout is Karpenter's, as the driver gave it; none without timings (every node registers at once).
func (b *boots) registrationTimeout() (time.Duration, bool) {
	if b.timings == nil {
		return 0, false
	}
	return time.Duration(b.timings.RegistrationTimeoutSeconds * float64(time.Second)), true
}

// launch keeps the node's boot from its launch at `at`; it says false when the node has no timing (then it registers
// at once).
func (b *boots) launch(lab, instanceType string, at time.Time, node *corev1.Node, capacity, allocatable corev1.ResourceList) bool {
	t, ok := b.timing(lab, instanceType)
	if !ok {
		return false
	}
	seconds := func(s float64) time.Time { return at.Add(time.Duration(s * float64(time.Second))) }
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending[node.Name] = &booting{node: node, capacity: capacity, allocatable: allocatable,
		readyAt: seconds(t.ReadySeconds), slicesAt: seconds(t.SlicesSeconds)}
	if t.LearnerImage != "" {
		b.images[node.Name] = image{t.LearnerImage, seconds(t.ImageSeconds)}
	}
	return true
}

// forget drops a node's boot and image: its instance is terminated.
func (b *boots) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pending, name)
	delete(b.images, name)
}

// isBooting says whether the node (or its NodeClaim) has a step of its boot ahead of the clock.
func (b *boots) isBooting(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.pending[name]
	return ok
}

// next is each boot step still ahead: a Node's registration and its slices.
func (b *boots) next() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var due []time.Time
	for _, p := range b.pending {
		if !p.registered {
			due = append(due, p.readyAt)
		}
		due = append(due, p.slicesAt)
	}
	return due
}

// imageAt is when a pod of these images can start on the node: once the node's learner image is there, if the pod
// runs it; else at once (the zero time).
func (b *boots) imageAt(node string, pod *corev1.Pod) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	img, ok := b.images[node]
	if !ok {
		return time.Time{}
	}
	for _, c := range pod.Spec.Containers {
		if c.Image == img.name {
			return img.at
		}
	}
	return time.Time{}
}

// due does what falls due by now: each Node registers (Ready, its GPU not yet advertised: the kubelet zeroes an
// extended resource until its device plugin registers, as Karpenter's initialization reads it,
// nodeclaim/lifecycle/initialization.go RequestedResourcesRegistered), then gets its slices. It says whether a node got
// its slices.
func (b *boots) due(ctx context.Context, now time.Time, register func(context.Context, *corev1.Node) error) (bool, error) {
	b.mu.Lock()
	var steps []*booting
	for _, p := range b.pending {
		if (!p.registered && !p.readyAt.After(now)) || !p.slicesAt.After(now) {
			steps = append(steps, p)
		}
	}
	b.mu.Unlock()
	advertised := false
	for _, p := range steps {
		if !p.registered && !p.readyAt.After(now) {
			if err := register(ctx, p.node); err != nil {
				return false, err
			}
			p.registered = true
		}
		if !p.slicesAt.After(now) {
			if err := b.advertise(ctx, p); err != nil {
				return false, err
			}
			b.mu.Lock()
			delete(b.pending, p.node.Name)
			b.mu.Unlock()
			advertised = true
		}
	}
	return advertised, nil
}

// advertise writes the capacity and allocatable the device plugin's registration gives the Node.
func (b *boots) advertise(ctx context.Context, p *booting) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		stored := &corev1.Node{}
		if err := b.writer.Get(ctx, types.NamespacedName{Name: p.node.Name}, stored); err != nil {
			return client.IgnoreNotFound(err) // deleted meanwhile
		}
		stored.Status.Capacity, stored.Status.Allocatable = p.capacity, p.allocatable
		return b.writer.Status().Update(ctx, stored)
	})
}
