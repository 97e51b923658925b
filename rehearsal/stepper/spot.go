package main

// Spot interruptions on the simulated clock, read by Karpenter's own interruption controller
// (github.com/aws/karpenter-provider-aws v1.14.1 pkg/controllers/interruption): EC2 warns two minutes before it
// reclaims a spot instance and sends the warning through EventBridge to the interruption queue, from which the
// controller reads it, marks the offering unavailable and deletes the instance's NodeClaim (utils.go handleMessage,
// handleNodeClaim, deleteNodeClaim); Karpenter's termination then drains the node and launches a replacement for its
// pods. Here a queue in memory (spotQueue, the provider's sqs.Provider interface, pkg/providers/sqs/sqs.go) holds the
// warnings, written in EventBridge's shape, and the stepper runs the controller's Reconcile when one is due. At the
// end of the warning the stand-in's EC2 reclaims the instance, whatever Karpenter has done by then.
//
// When: spot instances are interrupted at a rate per spot node-hour (-spot-interruptions-per-node-hour): the warnings
// are a Poisson process over the time spot instances run, its gaps drawn from a generator of fixed seed, and each
// warning goes to one of the spot instances then running, drawn from the same generator among them in a fixed order.
// The same stack plays the same warnings at the same times on every run.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	"github.com/aws/karpenter-provider-aws/pkg/controllers/interruption"
	"github.com/aws/karpenter-provider-aws/pkg/controllers/interruption/messages"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/gpulab/planner/render"
	"github.com/gpulab/planner/standin"
)

const (
	// EC2's warning: "two minutes before Amazon EC2 stops or terminates your Spot Instance" (AWS EC2 User Guide,
	// "Spot Instance interruption notices"; REPORTED, the guide is not stored here). The instance goes then, drained
	// or not.
	spotWarning = 2 * time.Minute
	// The seed of the generator that draws the warnings: any fixed number gives one answer per stack.
	spotSeed = 48
	// The queue's name as the controller logs it; the stack's real queue is the Karpenter component's.
	spotQueueName = "rehearsal-interruption-queue"
	// The account an EventBridge event names: a stand-in, as the instance IDs are.
	spotAccount = "000000000000"
)

// spotQueue is the interruption queue: the provider's sqs.Provider, in memory.
type spotQueue struct {
	mu       sync.Mutex
	sent     int
	messages []*sqstypes.Message
}

func (q *spotQueue) Name() string { return spotQueueName }

// GetSQSMessages answers at once with what is queued (the real queue long-polls up to 20 s, sqs.go): the stepper
// runs the controller only when a warning is there.
func (q *spotQueue) GetSQSMessages(context.Context) ([]*sqstypes.Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]*sqstypes.Message(nil), q.messages...), nil
}

func (q *spotQueue) SendMessage(_ context.Context, body any) (string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent++
	id := fmt.Sprintf("rehearsal-%d", q.sent)
	q.messages = append(q.messages, &sqstypes.Message{MessageId: &id, ReceiptHandle: &id, Body: lo.ToPtr(string(raw))})
	return id, nil
}

func (q *spotQueue) DeleteSQSMessage(_ context.Context, msg *sqstypes.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.messages = lo.Reject(q.messages, func(m *sqstypes.Message, _ int) bool { return *m.ReceiptHandle == *msg.ReceiptHandle })
	return nil
}

func (q *spotQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.messages)
}

// spotWarningEvent is EC2's "EC2 Spot Instance Interruption Warning" as EventBridge delivers it to the queue (the
// event's fields as the AWS EC2 User Guide shows them, REPORTED; the fields Karpenter reads are in
// pkg/controllers/interruption/messages/types.go Metadata and messages/spotinterruption/model.go, and its parser
// picks the event by version, source and detail-type, parser.go).
type spotWarningEvent struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     spotWarningBody `json:"detail"`
}

type spotWarningBody struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
}

// unavailableSpot is an offering the controller marked unavailable, and when its mark ends on the simulated clock.
type unavailableSpot struct {
	instanceType, zone string
	until              time.Time
}

// spotInterruptions delivers the warnings and reclaims the instances.
type spotInterruptions struct {
	perNodeHour float64
	prices      map[string]spotPrice // nil: spot is priced on-demand
	region      string
	rng         *rand.Rand
	queue       *spotQueue
	controller  *interruption.Controller
	launch      *standin.Launch
	unavailable *awscache.UnavailableOfferings
	reader      client.Client // the manager's cache
	kube        client.Client // as Karpenter's controllers write (simClient)
	journal     *journal
	nodes       *nodeMaker
	// Spot node-time left before the next warning, and when it was last counted down.
	owed    time.Duration
	counted time.Time
	// The instances warned and when EC2 reclaims each; the offerings the controller marked.
	reclaims map[string]time.Time
	marked   []unavailableSpot
}

func newSpotInterruptions(perNodeHour float64, prices map[string]spotPrice, region string, start time.Time, aws *standin.AWS, reader, kube client.Client,
	j *journal, maker *nodeMaker, recorder events.Recorder) *spotInterruptions {
	s := &spotInterruptions{perNodeHour: perNodeHour, prices: prices, region: region, rng: rand.New(rand.NewPCG(spotSeed, spotSeed)),
		queue: &spotQueue{}, launch: aws.Launch, unavailable: aws.Unavailable, reader: reader, kube: kube, journal: j,
		nodes: maker, counted: start, reclaims: map[string]time.Time{}}
	// The controller as the provider's controllers.go builds it, with the queue in memory instead of SQS's client.
	s.controller = interruption.NewController(&interruptingClient{Client: kube, journal: j}, maker.clock, maker,
		recorder, s.queue, nil, aws.Unavailable, aws.Reservations)
	s.owed = s.draw()
	return s
}

// record is how the rehearsal plays spot (rehearsal.json's spot): the rate, the warning, the seed, and the price a
// spot node is billed at: each type's from -spot-prices, else on-demand with why.
func (s *spotInterruptions) record() map[string]any {
	if s.prices != nil {
		// Spot where the preview had a spot price for any type; each type's own pricedAs says which.
		pricedAs := "on-demand"
		if lo.SomeBy(lo.Values(s.prices), func(p spotPrice) bool { return p.PricedAs == "spot" }) {
			pricedAs = "spot"
		}
		return map[string]any{
			"interruptionsPerNodeHour": s.perNodeHour, "warningSeconds": spotWarning.Seconds(), "seed": spotSeed,
			"pricedAs": pricedAs, "prices": s.prices,
		}
	}
	return map[string]any{
		"interruptionsPerNodeHour": s.perNodeHour, "warningSeconds": spotWarning.Seconds(), "seed": spotSeed,
		"pricedAs": "on-demand",
		"priceSource": "no spot price offline: the AWS provider prices spot as on-demand until its first spot price update " +
			"(github.com/aws/karpenter-provider-aws v1.14.1 pkg/providers/pricing/pricing.go Reset), which calls EC2's " +
			"DescribeSpotPriceHistory and never runs in the rehearsal",
	}
}

// spotPrice is one instance type's spot price as a preview recorded it (labs.<lab>.cost.spot.<type> in the stack's
// outputs; the driver passes usdPerHour, pricedAs and source): pricedAs is on-demand where EC2 had no spot price then.
type spotPrice struct {
	USDPerHour float64 `json:"usdPerHour"`
	PricedAs   string  `json:"pricedAs"`
	Source     string  `json:"source"`
}

// readSpotPrices reads -spot-prices: {"<instance type>": spotPrice}; nil without the flag.
func readSpotPrices(path string) (map[string]spotPrice, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-spot-prices: %w", err)
	}
	prices := map[string]spotPrice{}
	if err := json.Unmarshal(data, &prices); err != nil {
		return nil, fmt.Errorf("-spot-prices: %w", err)
	}
	for name, p := range prices {
		if !(p.USDPerHour > 0) || p.Source == "" {
			return nil, fmt.Errorf("-spot-prices: %s: wants usdPerHour above 0 and a source", name)
		}
	}
	return prices, nil
}

// draw is the spot node-time until the next warning: exponential with the rate (a Poisson process).
func (s *spotInterruptions) draw() time.Duration {
	hours := s.rng.ExpFloat64() / s.perNodeHour
	if hours*float64(time.Hour) > math.MaxInt64/2 {
		return math.MaxInt64 / 2 // never, within any rehearsal
	}
	return time.Duration(hours * float64(time.Hour))
}

// running is the spot instances the stand-in's EC2 runs.
func (s *spotInterruptions) running(ctx context.Context) ([]*instance.Instance, error) {
	all, err := s.launch.List(ctx)
	if err != nil {
		return nil, err
	}
	return lo.Filter(all, func(i *instance.Instance, _ int) bool { return i.CapacityType == karpv1.CapacityTypeSpot }), nil
}

// countDown takes the node-time the spot instances running now run until `to` off what is owed: called before the
// clock moves there (the instances change only while the clock stands).
func (s *spotInterruptions) countDown(ctx context.Context, to time.Time) error {
	if s.perNodeHour == 0 {
		return nil
	}
	running, err := s.running(ctx)
	if err != nil {
		return err
	}
	s.owed -= time.Duration(len(running)) * to.Sub(s.counted)
	s.counted = to
	return nil
}

// next is when the next warning falls due at the spot instances running now (to the second up), each reclaim and
// each end of a mark.
func (s *spotInterruptions) next(ctx context.Context) ([]time.Time, error) {
	due := lo.Values(s.reclaims)
	due = append(due, lo.Map(s.marked, func(m unavailableSpot, _ int) time.Time { return m.until })...)
	if s.perNodeHour == 0 {
		return due, nil
	}
	running, err := s.running(ctx)
	if err != nil || len(running) == 0 {
		return due, err
	}
	gap := (s.owed + time.Duration(len(running)) - 1) / time.Duration(len(running))
	at := s.counted.Add(gap)
	if !at.Equal(at.Truncate(time.Second)) {
		at = at.Truncate(time.Second).Add(time.Second)
	}
	return append(due, at), nil
}

// due does what falls due by now: each warning owed (to a spot instance drawn among those running and not warned,
// taken in the order of their launch, the pods on their node, type and zone), read by the controller; each instance
// reclaimed at the end of its warning; each mark the controller set that has lasted its time, after which the pods
// still pending are provisioned for again.
func (s *spotInterruptions) due(ctx context.Context, now time.Time) error {
	ended := false
	for _, m := range s.marked {
		if !m.until.After(now) {
			s.unavailable.Delete(ec2types.InstanceType(m.instanceType), m.zone, karpv1.CapacityTypeSpot)
			ended = true
		}
	}
	s.marked = lo.Filter(s.marked, func(m unavailableSpot, _ int) bool { return m.until.After(now) })
	if ended {
		if err := s.touchPending(ctx, now); err != nil {
			return err
		}
	}
	for id, at := range s.reclaims {
		if !at.After(now) {
			if err := s.reclaim(ctx, id); err != nil {
				return err
			}
			delete(s.reclaims, id)
		}
	}
	for s.perNodeHour > 0 && s.owed <= 0 {
		s.owed += s.draw()
		candidates, err := s.unwarned(ctx)
		if err != nil {
			return err
		}
		if len(candidates) == 0 {
			continue
		}
		if err := s.warn(ctx, now, candidates[s.rng.IntN(len(candidates))]); err != nil {
			return err
		}
	}
	return nil
}

// candidate is a spot instance that may be warned, with what orders it.
type candidate struct {
	instance *instance.Instance
	node     string
	pods     string
}

// unwarned is the running spot instances not warned yet, in a fixed order: their launch, the pods on their nodes,
// then their type and zone (NodeClaim and instance names differ from run to run, the learners' pods do not; which of
// two nodes launched together a pod is bound to is kube-scheduler's choice at random between equals, so the pods
// come before the zone).
func (s *spotInterruptions) unwarned(ctx context.Context) ([]candidate, error) {
	running, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	var found []candidate
	for _, i := range running {
		if _, warned := s.reclaims[i.ID]; warned {
			continue
		}
		c := candidate{instance: i}
		claims := &karpv1.NodeClaimList{}
		if err := s.reader.List(ctx, claims, client.MatchingFields{"status.instanceID": i.ID}); err != nil {
			return nil, err
		}
		if len(claims.Items) == 1 {
			c.node = claims.Items[0].Name
			pods := &corev1.PodList{}
			if err := s.reader.List(ctx, pods, client.MatchingFields{"spec.nodeName": c.node}); err != nil {
				return nil, err
			}
			names := lo.FilterMap(pods.Items, func(p corev1.Pod, _ int) (string, bool) { return p.Namespace + "/" + p.Name, !isDaemon(&p) })
			sort.Strings(names)
			c.pods = strings.Join(names, ",")
		}
		found = append(found, c)
	}
	sort.Slice(found, func(a, b int) bool {
		x, y := found[a], found[b]
		switch {
		case !x.instance.LaunchTime.Equal(y.instance.LaunchTime):
			return x.instance.LaunchTime.Before(y.instance.LaunchTime)
		case x.pods != y.pods:
			return x.pods < y.pods
		case x.instance.Type != y.instance.Type:
			return x.instance.Type < y.instance.Type
		case x.instance.Zone != y.instance.Zone:
			return x.instance.Zone < y.instance.Zone
		}
		return x.instance.ID < y.instance.ID
	})
	return found, nil
}

// warn queues EC2's warning for the instance and runs the interruption controller, which reads it; the instance is
// reclaimed at the end of the warning. The controller must have taken the warning off the queue (it does once it has
// acted on it, controller.go Reconcile).
func (s *spotInterruptions) warn(ctx context.Context, now time.Time, c candidate) error {
	warning := spotWarningEvent{
		Version: "0", ID: fmt.Sprintf("rehearsal-spot-%d", s.queue.sent+1), DetailType: "EC2 Spot Instance Interruption Warning",
		Source: "aws.ec2", Account: spotAccount, Time: now.UTC().Format(time.RFC3339), Region: s.region,
		Resources: []string{fmt.Sprintf("arn:aws:ec2:%s:instance/%s", s.region, c.instance.ID)},
		Detail:    spotWarningBody{InstanceID: c.instance.ID, InstanceAction: "terminate"},
	}
	if _, err := s.queue.SendMessage(ctx, warning); err != nil {
		return err
	}
	s.reclaims[c.instance.ID] = now.Add(spotWarning)
	s.journal.add(event{What: "spotWarning", Lab: s.journal.lab(c.node), Node: c.node, InstanceType: string(c.instance.Type),
		CapacityType: c.instance.CapacityType})
	if _, err := s.controller.Reconcile(ctx); err != nil {
		return fmt.Errorf("the interruption controller on the warning for %s: %w", c.instance.ID, err)
	}
	if left := s.queue.len(); left != 0 {
		return fmt.Errorf("the interruption controller left %d warning(s) on its queue", left)
	}
	if s.unavailable.IsUnavailable(c.instance.Type, c.instance.Zone, nil, karpv1.CapacityTypeSpot) {
		// The mark lasts UnavailableOfferingsTTL (pkg/cache/cache.go) of the wall clock in a go-cache; the stepper ends
		// it after that much simulated time.
		s.marked = append(s.marked, unavailableSpot{string(c.instance.Type), c.instance.Zone, now.Add(awscache.UnavailableOfferingsTTL)})
	}
	return nil
}

// reclaim is EC2 taking the instance back at the end of its warning. Where Karpenter's termination has already
// terminated it, nothing is left to do. Else the instance goes, its kubelet with it: the node is no longer Ready, as
// the node lifecycle controller marks a node whose kubelet stopped reporting (it waits for its grace period first,
// which the stepper does not), and the pods still on it are gone, as kube-controller-manager's pod garbage collector
// deletes the pods of a node that is gone; Karpenter's termination then finds the instance gone and lets the node go
// (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/node/termination/controller.go: a node not Ready whose instance is
// not found loses its finalizer).
func (s *spotInterruptions) reclaim(ctx context.Context, id string) error {
	if _, err := s.launch.Get(ctx, id); cloudprovider.IsNodeClaimNotFoundError(err) {
		return nil
	}
	if err := s.launch.Delete(ctx, id); err != nil {
		return err
	}
	claims := &karpv1.NodeClaimList{}
	if err := s.reader.List(ctx, claims, client.MatchingFields{"status.instanceID": id}); err != nil {
		return err
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		s.nodes.boots.forget(nc.Name)
		// The reclaim, then the node's end: the driver counts the nodes whose drain EC2 cut short (rehearsal.json's
		// spot.reclaimed).
		s.journal.add(event{What: "spotReclaimed", Lab: nc.Labels[render.LabLabel], Node: nc.Name,
			InstanceType: nc.Labels[corev1.LabelInstanceTypeStable], CapacityType: karpv1.CapacityTypeSpot})
		s.journal.deleted(nc.Name, nc.Labels[render.LabLabel], s.nodes.reasonOf(nc))
		if err := s.notReady(ctx, nc.Name); err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := s.reader.List(ctx, pods, client.MatchingFields{"spec.nodeName": nc.Name}); err != nil {
			return err
		}
		for j := range pods.Items {
			if err := s.kube.Delete(ctx, &pods.Items[j], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// notReady marks the node's Ready condition Unknown, as the node lifecycle controller does for a silent kubelet.
func (s *spotInterruptions) notReady(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := &corev1.Node{}
		if err := s.nodes.writer.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return client.IgnoreNotFound(err)
		}
		now := metav1.Now()
		for i := range node.Status.Conditions {
			if node.Status.Conditions[i].Type == corev1.NodeReady {
				node.Status.Conditions[i].Status, node.Status.Conditions[i].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
				node.Status.Conditions[i].Message = "rehearsal: the spot instance was reclaimed at the end of its warning"
				node.Status.Conditions[i].LastTransitionTime = now
			}
		}
		return s.nodes.writer.Status().Update(ctx, node)
	})
}

// touchPending annotates each pod waiting for a node with the clock: Karpenter's provisioner looks at a pending pod
// again every 10 s of the wall clock (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/provisioning/controller.go
// PodController, RequeueAfter), by which time the simulated clock may be long past the moment an offering came back;
// the annotation has it provision now.
func (s *spotInterruptions) touchPending(ctx context.Context, now time.Time) error {
	pods := &corev1.PodList{}
	if err := s.reader.List(ctx, pods, client.MatchingFields{"spec.nodeName": ""}); err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clockAnnotation, now.UTC().Format(time.RFC3339Nano))))
	for i := range pods.Items {
		if pods.Items[i].Status.Phase != corev1.PodPending || pods.Items[i].DeletionTimestamp != nil || isDaemon(&pods.Items[i]) {
			continue
		}
		if err := s.nodes.writer.Patch(ctx, &pods.Items[i], patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// interruptingClient is the interruption controller's client: simClient, noting each NodeClaim the controller
// deletes, so that the node's deletion and its pods' disruption carry the controller's reason.
type interruptingClient struct {
	client.Client
	journal *journal
}

func (c *interruptingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if nc, ok := obj.(*karpv1.NodeClaim); ok && err == nil {
		c.journal.interrupted(nc.UID, string(messages.SpotInterruptionKind))
	}
	return err
}
