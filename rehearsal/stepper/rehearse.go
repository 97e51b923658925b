package main

// Karpenter 1.14.1's controllers, wired as the AWS provider's cmd/controller/main.go wires them
// (sigs.k8s.io/karpenter pkg/controllers NewControllers, in a controller-runtime manager as pkg/operator builds it),
// against the API server of the rehearsal's twin (rehearsal/controlplane, rehearsal/twin.py), on a simulated clock that
// a driver steps with one JSON line at a time (rehearsal/karpenter.py; docs/developers/rehearsal.md, "Karpenter on a
// clock").
//
//	stepper -kubeconfig <file> -region <aws region> -start <RFC3339> [-cronjobs <address>]
//	        [-spot-interruptions-per-node-hour <rate>] <render dir>
//
// It answers a first line {"ready": true, "now": ..., "karpenter": ..., "shortenedTimers": [...], "spot": {...}}
// (spot.go record), then, for each {"advance": "<RFC3339>"} line, moves the clock there, runs the controllers until
// they have settled and answers {"now": ..., "events": [...], "nodes": [...], "wall": {...}} (with "unsettled" when
// they did not within stepLimit; "wall" is where the step's wall-clock time went). With -cronjobs, the address of the
// CronJob controller's process (rehearsal/controlplane/cronjob-controller), the clock also stops where a CronJob falls
// due, and a step that the controller made Jobs in ends there, before its time, with "jobs": [...] (cronjobs.go
// firedJob) for the driver to run; the driver then asks for the same time again. So does a step in which a spot
// interruption moved pods, with "moved": [...] (journal.go movedPod), for the driver to make them again. A line it
// cannot take is answered {"error": "..."}.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/samber/lo"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	controllerruntime "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	nodeclasshash "github.com/aws/karpenter-provider-aws/pkg/controllers/nodeclass/hash"
	awsutils "github.com/aws/karpenter-provider-aws/pkg/utils"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	cloudmetrics "sigs.k8s.io/karpenter/pkg/cloudprovider/metrics"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	corecontrollers "sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/disruption"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/gpulab/planner/karpenter"
	"github.com/gpulab/planner/render"
	"github.com/gpulab/planner/standin"
)

const (
	// The provisioner's batch windows (Karpenter's BATCH_IDLE_DURATION and BATCH_MAX_DURATION, wall clock): they count
	// only once a step runs (simClock.step), when the driver has made the pods of one moment, so a short window still
	// gathers them.
	rehearsalBatchIdle = 200 * time.Millisecond
	rehearsalBatchMax  = 2 * time.Second
	// Settled means, besides what the conditions below wait for, no change to a pod, node, NodeClaim, NodePool or
	// CapacityBuffer for quiet: the time an informer's other handlers take to queue what the stepper's handler saw.
	quiet = 50 * time.Millisecond
	// A pod Karpenter placed waits this long without other change for kube-scheduler to bind it: longer than
	// kube-scheduler's longest backoff for an unschedulable pod (podMaxBackoffSeconds, 10 s by default).
	bindWait = 12 * time.Second
	// What the batch windows' entries in shortenedTimers add (simClock.step).
	batchWindowsGated = " of wall clock, counted only while a step runs, not while the driver acts between steps: the pods it makes at one moment are one batch however slowly it makes them"
	// The most wall-clock time one step may take; past it the answer says what had not settled.
	stepLimit = 90 * time.Second
	// The annotation the stepper sets on every NodeClaim after it moves the clock (see touch).
	clockAnnotation = "rehearsal.gpulab.dev/clock"
)

// shortenedTimer is one timer the rehearsal runs otherwise than Karpenter does in a cluster (rehearsal.json's
// shortenedTimers).
type shortenedTimer struct {
	Timer     string `json:"timer"`
	Source    string `json:"source"`
	Original  string `json:"original"`
	Rehearsal string `json:"rehearsal"`
}

// shorten sets Karpenter's options as the rehearsal runs them and says which timers that changes.
func shorten(ctx context.Context, interrupting bool) []shortenedTimer {
	opts := coreoptions.FromContext(ctx)
	timers := []shortenedTimer{
		{"the provisioner's batch window, idle (BATCH_IDLE_DURATION, wall clock)", "sigs.k8s.io/karpenter pkg/controllers/provisioning/batcher.go",
			opts.BatchIdleDuration.String(), rehearsalBatchIdle.String() + batchWindowsGated},
		{"the provisioner's batch window, longest (BATCH_MAX_DURATION, wall clock)", "sigs.k8s.io/karpenter pkg/controllers/provisioning/batcher.go",
			opts.BatchMaxDuration.String(), rehearsalBatchMax.String() + batchWindowsGated},
		{"the disruption controller's poll (pollingPeriod, wall clock)", "sigs.k8s.io/karpenter pkg/controllers/disruption/controller.go",
			"10s", "run by the stepper at each step once the other controllers have settled, and again after each action"},
		{"the NodeClaim lifecycle and expiration controllers' sleep after a write (clock.Sleep)",
			"sigs.k8s.io/karpenter pkg/controllers/nodeclaim/lifecycle/controller.go, nodeclaim/expiration/controller.go",
			"1s", readYourWritesSleep.String() + " wall clock"},
		{"requeues after a simulated duration (consolidateAfter, expireAfter), which controller-runtime waits out on the wall clock",
			"sigs.k8s.io/karpenter pkg/controllers/nodeclaim/disruption/consolidation.go, nodeclaim/expiration/controller.go",
			"the duration left", "every NodeClaim is annotated after each move of the clock, so its controllers reconcile at once"},
		{"the CapacityBuffer controller's recheck of each buffer, which starts a provisioning pass (wall clock)",
			"sigs.k8s.io/karpenter pkg/controllers/capacitybuffer/controller.go",
			"30s", "every CapacityBuffer is annotated when a node's GPU slices are advertised, so it reconciles then"},
		{"the termination controller's requeues while a node drains, its volumes detach and its instance terminates, which controller-runtime waits out on the wall clock",
			"sigs.k8s.io/karpenter pkg/controllers/node/termination/controller.go (awaitDrain, awaitVolumeDetachment, awaitInstanceTermination)",
			"1s, 5s for the instance", "the node and its NodeClaim annotated every " + nudgeEvery.String() + " until the node is gone or waits for Karpenter's clock; the clock does not move meanwhile"},
		{"the termination controller's requeue while a drain lasts its shortest time (MinDrainTime, 5 s of Karpenter's clock)",
			"sigs.k8s.io/karpenter pkg/controllers/node/termination/controller.go (awaitDrain)",
			"1s", "the Node of every terminating NodeClaim is annotated after each move of the clock, so it reconciles at once"},
	}
	if interrupting {
		timers = append(timers, shortenedTimer{"the interruption controller's reading of its queue (SQS long poll of up to 20 s, again at once after each answer)",
			"github.com/aws/karpenter-provider-aws pkg/controllers/interruption/controller.go, pkg/providers/sqs/sqs.go",
			"20s", "run by the stepper at the simulated time each spot warning is queued (spot.go)"})
		timers = append(timers, shortenedTimer{"the mark of a spot offering as unavailable after its interruption (UnavailableOfferingsTTL, a go-cache on the wall clock)",
			"github.com/aws/karpenter-provider-aws pkg/cache/cache.go, pkg/cache/unavailableofferings.go",
			"3m wall clock", "3m of the simulated clock (the stepper deletes the mark then; the wall clock's would end it too, after 3 wall minutes)"})
	}
	opts.BatchIdleDuration, opts.BatchMaxDuration = rehearsalBatchIdle, rehearsalBatchMax
	// One controller, no leader election; Karpenter's metrics controllers observe only.
	opts.DisableLeaderElection = true
	opts.DisableClusterStateObservability = true
	return timers
}

func rehearse(args []string) error {
	fs := flag.NewFlagSet("stepper", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "the twin's kubeconfig, an identity that may act as Karpenter and the kubelets")
	region := fs.String("region", "", "the stack's AWS region (aws:region)")
	startAt := fs.String("start", "", "the simulated clock's first time, RFC3339")
	timingsFile := fs.String("timings", "", "the labs' node boot and image times (boot.go); without it, nodes register at their launch")
	cronJobs := fs.String("cronjobs", "", "the address of the CronJob controller's process on the simulated clock, if it runs")
	spotRate := fs.Float64("spot-interruptions-per-node-hour", 0, "EC2's spot interruption warnings per hour a spot instance runs (spot.go); 0: none")
	spotPricesFile := fs.String("spot-prices", "", "each instance type's spot price and its source, from a preview (spot.go); without it, spot is priced on-demand")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *kubeconfig == "" || *region == "" || *startAt == "" {
		return errors.New("usage: stepper -kubeconfig <file> -region <aws region> -start <RFC3339> [-timings <file>] <render dir>")
	}
	if math.IsNaN(*spotRate) || math.IsInf(*spotRate, 0) || *spotRate < 0 {
		return fmt.Errorf("-spot-interruptions-per-node-hour: must be a number at least 0, got %v", *spotRate)
	}
	start, err := time.Parse(time.RFC3339, *startAt)
	if err != nil {
		return fmt.Errorf("-start: %w", err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	r, err := render.Read(fs.Arg(0))
	if err != nil {
		return err
	}
	bootTimes, err := readTimings(*timingsFile)
	if err != nil {
		return err
	}
	spotPrices, err := readSpotPrices(*spotPricesFile)
	if err != nil {
		return err
	}
	ctx, err := karpenter.ControllerContext(r.ControllerEnv)
	if err != nil {
		return err
	}
	// The client's rate limits as Karpenter's operator sets them (pkg/operator/operator.go; KUBE_CLIENT_QPS 200,
	// KUBE_CLIENT_BURST 300), not client-go's default of 5 per second.
	config.QPS, config.Burst = float32(coreoptions.FromContext(ctx).KubeClientQPS), coreoptions.FromContext(ctx).KubeClientBurst
	timers := shorten(ctx, *spotRate > 0)
	// The controllers' logs go to stderr; stdout is the driver's.
	logger := zap.New(zap.WriteTo(os.Stderr))
	log.SetLogger(logger)
	klog.SetLogger(logger)
	ctx, cancel := context.WithCancel(log.IntoContext(ctx, logger))
	defer cancel()
	s, err := newStepper(ctx, config, r, *region, newSimClock(start), bootTimes, *spotRate, spotPrices)
	if err != nil {
		return err
	}
	if *cronJobs != "" {
		s.cronJobs = newCronJobController(*cronJobs)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.mgr.Start(ctx) }()
	if !s.mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the controllers' caches did not sync with the twin's API server")
	}
	if err := s.resolveNodeClasses(r); err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(map[string]any{"ready": true, "now": s.now(), "karpenter": karpenter.ProviderVersion(), "shortenedTimers": timers,
		"spot": s.spot.record()}); err != nil {
		return err
	}
	lines := make(chan string)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			lines <- in.Text()
		}
		close(lines)
	}()
	for {
		select {
		case err := <-stopped:
			return fmt.Errorf("the controller manager stopped: %w", err)
		case line, ok := <-lines:
			if !ok {
				return nil // the driver closed stdin: the rehearsal is over
			}
			if err := out.Encode(s.answer(line)); err != nil {
				return err
			}
		}
	}
}

// stepper runs Karpenter's controllers against the twin and steps the simulated clock.
type stepper struct {
	ctx        context.Context
	mgr        manager.Manager
	reader     client.Client // the manager's cache
	writer     client.Client // the twin itself, as the admin
	clock      *simClock
	journal    *journal
	cluster    *state.Cluster
	disruption *disruption.Controller
	queue      *disruption.Queue // the disruption commands under way
	// The disruption controller's pass under way, if one waits for simulated time; nil when none.
	disrupting chan bool
	boots      *boots
	kubelet    *kubelet
	register   func(context.Context, *corev1.Node) error // the cloud provider's registration of a booted Node
	lastChange atomic.Int64                              // wall clock, UnixNano, of the last change the caches saw
	wall       *stepWall                                 // where the step under way spends its wall-clock time
	cronJobs   *cronJobController                        // the CronJob controller's process, if it runs (cronjobs.go)
	fired      []firedJob                                // the Jobs it made that the step under way hands to the driver
	moved      []movedPod                                // the pods a spot interruption moved, which it hands too
	recorder   events.Recorder
	spot       *spotInterruptions // EC2's spot interruption warnings and Karpenter's interruption controller (spot.go)
	nudged     time.Time          // when the stepper last nudged a terminating node (termination.go), wall clock
	nudges     int
}

// stepWall is where one step's wall-clock time went (the answer's "wall"; docs/developers/measurements.md,
// "Rehearsals"):
// waiting for the caches and for each kind of unsettled condition (unsettled's kinds), in the disruption controller's
// passes, and annotating objects with the clock; with the number of passes and of the clock's moves.
type stepWall struct {
	Seconds           float64            `json:"seconds"`
	WaitingFor        map[string]float64 `json:"waitingFor"`
	DisruptionSeconds float64            `json:"disruptionSeconds"`
	DisruptionPasses  int                `json:"disruptionPasses"`
	AnnotatingSeconds float64            `json:"annotatingSeconds"`
	ClockMoves        int                `json:"clockMoves"`
}

func newStepper(ctx context.Context, config *rest.Config, r *render.Render, region string, clk *simClock, t *timings, spotRate float64,
	spotPrices map[string]spotPrice) (*stepper, error) {
	mgr, err := controllerruntime.NewManager(config, controllerruntime.Options{
		Scheme:                 scheme.Scheme,
		Logger:                 log.FromContext(ctx),
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		BaseContext:            func() context.Context { return ctx },
		// As Karpenter's operator caches leases (pkg/operator/operator.go).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: {Field: fields.SelectorFromSet(fields.Set{"metadata.namespace": nodeLeases})},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("controller manager: %w", err)
	}
	if err := indexFields(ctx, mgr); err != nil {
		return nil, err
	}
	writer, err := client.New(config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	s := &stepper{ctx: ctx, mgr: mgr, reader: mgr.GetClient(), writer: writer, clock: clk, journal: newJournal(clk), boots: newBoots(t, writer)}
	kube := &simClient{Client: mgr.GetClient(), journal: s.journal}
	view := &simManager{Manager: mgr, client: kube}
	recorder := events.NewRecorder(mgr.GetEventRecorderFor("karpenter")) //nolint:staticcheck // as Karpenter's operator does
	s.recorder = recorder
	store := nodeoverlay.NewInstanceTypeStore()
	zones := lo.Map(r.Subnets, func(s string, _ int) string { return standin.Zone(s) })
	aws, err := standin.NewAWS(ctx, kube, clk, karpenter.Launchable(r), zones, region, store, recorder)
	if err != nil {
		return nil, err
	}
	if spotPrices != nil {
		usd := lo.MapValues(spotPrices, func(p spotPrice, _ string) float64 { return p.USDPerHour })
		if err := aws.SetSpotPrices(ctx, usd, clk.Now()); err != nil {
			return nil, fmt.Errorf("-spot-prices: %w", err)
		}
	}
	// cmd/controller/main.go's stack of cloud providers, with the node-making launch at its bottom.
	maker := &nodeMaker{CloudProvider: aws.CloudProvider, aws: aws, writer: writer, render: r, journal: s.journal, clock: clk, boots: s.boots}
	s.register = maker.register
	s.spot = newSpotInterruptions(spotRate, spotPrices, region, clk.Now(), aws, mgr.GetClient(), kube, s.journal, maker, recorder)
	undecorated := cloudmetrics.Decorate(maker)
	provider := overlay.Decorate(undecorated, kube, store)
	s.cluster = state.NewCluster(clk, kube, provider)
	for _, c := range corecontrollers.NewControllers(ctx, view, clk, kube, recorder, provider, undecorated, s.cluster, store) {
		if d, ok := c.(*disruption.Controller); ok {
			s.disruption = d // the stepper runs it (shortenedTimers)
			continue
		}
		if q, ok := c.(*disruption.Queue); ok {
			s.queue = q
		}
		if err := c.Register(ctx, view); err != nil {
			return nil, fmt.Errorf("registering %T: %w", c, err)
		}
	}
	// The AWS provider's EC2NodeClass hash, which its drift check compares with each NodeClaim's; its other
	// EC2NodeClass controllers resolve from AWS, which ResolveNodeClass stands in for.
	if err := nodeclasshash.NewController(kube, nil).Register(ctx, view); err != nil {
		return nil, err
	}
	k := &kubelet{reader: mgr.GetClient(), writer: writer, launch: aws.Launch, clock: clk, boots: s.boots, journal: s.journal, starts: map[types.UID]podStart{}}
	s.kubelet = k
	if err := k.register(mgr); err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { k.renewLeases(ctx); return nil })); err != nil {
		return nil, err
	}
	return s, s.watch(ctx)
}

// indexFields registers the field indexes Karpenter's operator registers and its controllers list by
// (sigs.k8s.io/karpenter pkg/operator/operator.go, setupIndexers).
func indexFields(ctx context.Context, mgr manager.Manager) error {
	indexer := mgr.GetFieldIndexer()
	for _, index := range []struct {
		obj   client.Object
		field string
		value func(client.Object) string
	}{
		{&corev1.Pod{}, "spec.nodeName", func(o client.Object) string { return o.(*corev1.Pod).Spec.NodeName }},
		{&corev1.Node{}, "spec.providerID", func(o client.Object) string { return o.(*corev1.Node).Spec.ProviderID }},
		{&storagev1.VolumeAttachment{}, "spec.nodeName", func(o client.Object) string { return o.(*storagev1.VolumeAttachment).Spec.NodeName }},
		{&karpv1.NodeClaim{}, "status.providerID", func(o client.Object) string { return o.(*karpv1.NodeClaim).Status.ProviderID }},
		// The AWS provider's own (pkg/operator/operator.go SetupIndexers), which its interruption controller lists by.
		{&karpv1.NodeClaim{}, "status.instanceID", func(o client.Object) string { return instanceID(o.(*karpv1.NodeClaim).Status.ProviderID) }},
		{&corev1.Node{}, "spec.instanceID", func(o client.Object) string { return instanceID(o.(*corev1.Node).Spec.ProviderID) }},
		{&karpv1.NodeClaim{}, "spec.nodeClassRef.group", func(o client.Object) string { return o.(*karpv1.NodeClaim).Spec.NodeClassRef.Group }},
		{&karpv1.NodeClaim{}, "spec.nodeClassRef.kind", func(o client.Object) string { return o.(*karpv1.NodeClaim).Spec.NodeClassRef.Kind }},
		{&karpv1.NodeClaim{}, "spec.nodeClassRef.name", func(o client.Object) string { return o.(*karpv1.NodeClaim).Spec.NodeClassRef.Name }},
		{&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.group", func(o client.Object) string { return o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Group }},
		{&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.kind", func(o client.Object) string { return o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Kind }},
		{&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.name", func(o client.Object) string { return o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Name }},
	} {
		value := index.value
		if err := indexer.IndexField(ctx, index.obj, index.field, func(o client.Object) []string { return []string{value(o)} }); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", index.obj, index.field, err)
		}
	}
	return nil
}

// instanceID is the EC2 instance ID of a providerID as the AWS provider parses it (pkg/utils ParseInstanceID), "" for
// none.
func instanceID(providerID string) string {
	id, err := awsutils.ParseInstanceID(providerID)
	if err != nil {
		return ""
	}
	return id
}

// watch notes the time of every change the caches see, and each pod kube-scheduler binds (a podBound event).
func (s *stepper) watch(ctx context.Context) error {
	changed := func() { s.lastChange.Store(time.Now().UnixNano()) }
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &karpv1.NodeClaim{}, &karpv1.NodePool{}, &autoscalingv1beta1.CapacityBuffer{}, &batchv1.CronJob{}, &batchv1.Job{}} {
		informer, err := s.mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { changed() },
			UpdateFunc: func(old, updated any) {
				changed()
				before, isPod := old.(*corev1.Pod)
				if after, _ := updated.(*corev1.Pod); isPod && before.Spec.NodeName == "" && after.Spec.NodeName != "" && !isDaemon(after) {
					s.journal.bound(after)
				}
			},
			DeleteFunc: func(any) { changed() },
		}); err != nil {
			return err
		}
	}
	return nil
}

// resolveNodeClasses gives each EC2NodeClass the status the provider's EC2NodeClass controller would resolve from AWS
// (standin.ResolveNodeClass); the NodePools' readiness then follows from Karpenter's own controllers.
func (s *stepper) resolveNodeClasses(r *render.Render) error {
	for _, rendered := range r.NodeClasses {
		nc := &awsv1.EC2NodeClass{}
		if err := s.writer.Get(s.ctx, types.NamespacedName{Name: rendered.Name}, nc); err != nil {
			return fmt.Errorf("EC2NodeClass %s on the twin: %w", rendered.Name, err)
		}
		standin.ResolveNodeClass(nc, r.Subnets)
		if err := s.writer.Status().Update(s.ctx, nc); err != nil {
			return fmt.Errorf("EC2NodeClass %s status: %w", rendered.Name, err)
		}
	}
	return nil
}

func (s *stepper) now() string { return s.clock.Now().UTC().Format(time.RFC3339) }

// answer takes one line of the driver's.
func (s *stepper) answer(line string) any {
	var step struct {
		Advance string `json:"advance"`
	}
	decoder := json.NewDecoder(strings.NewReader(line))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&step); err != nil {
		return map[string]string{"error": fmt.Sprintf("not a step (want {\"advance\": \"<RFC3339>\"}): %v", err)}
	}
	to, err := time.Parse(time.RFC3339, step.Advance)
	if err != nil {
		return map[string]string{"error": fmt.Sprintf("advance: %v", err)}
	}
	if to.Before(s.clock.Now()) {
		return map[string]string{"error": fmt.Sprintf("advance: the clock runs forward only: %s is before %s", step.Advance, s.now())}
	}
	began := time.Now()
	s.wall = &stepWall{WaitingFor: map[string]float64{}}
	s.fired, s.moved = nil, nil
	s.clock.step(true)
	unsettled := s.advance(to)
	s.clock.step(false)
	s.wall.Seconds = time.Since(began).Seconds()
	nodes, err := s.nodes()
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	answer := map[string]any{"now": s.now(), "events": s.journal.take(), "nodes": nodes, "wall": s.wall}
	if s.fired != nil {
		answer["jobs"] = s.fired
	}
	if s.moved != nil {
		answer["moved"] = s.moved
	}
	if unsettled != "" {
		answer["unsettled"] = unsettled
	}
	return answer
}

// advance moves the clock to t and runs the controllers until they have settled there: in between, it stops the
// clock at the end of each simulated wait of a controller (disruption's validation) and at each time a decision
// falls due (nextDue), and lets them settle there.
// It returns what had not settled within stepLimit, "" when all had.
func (s *stepper) advance(t time.Time) string {
	deadline := time.Now().Add(stepLimit)
	// What the driver did just before this step (pods made, a buffer patched) may not have reached the caches yet.
	if why := s.caughtUp(deadline); why != "" {
		return why
	}
	for {
		if why := s.settle(deadline); why != "" {
			return why
		}
		fired, err := s.takeFired()
		if err != nil {
			return err.Error()
		}
		if len(fired) > 0 {
			s.fired = fired // the driver runs them now, and asks for t again
			return ""
		}
		if moved := s.journal.takeMoved(); len(moved) > 0 {
			s.moved = moved // the driver makes their learners' pods again now, as they start their servers again
			return ""
		}
		if s.disrupt(deadline) {
			continue
		}
		next := t
		if end, ok := s.clock.nextEnd(); ok && end.Before(next) {
			next = end
		}
		due, ok, err := s.nextDue(s.clock.Now())
		if err != nil {
			return err.Error()
		}
		if ok && due.Before(next) {
			next = due
		}
		if !next.After(s.clock.Now()) {
			return ""
		}
		if err := s.spot.countDown(s.ctx, next); err != nil {
			return err.Error()
		}
		s.clock.SetTime(next)
		s.wall.ClockMoves++
		advertised, err := s.boots.due(s.ctx, next, s.register)
		if err != nil {
			return err.Error()
		}
		if advertised {
			s.touchBuffers()
		}
		if err := s.kubelet.startDue(s.ctx, next); err != nil {
			return err.Error()
		}
		if err := s.spot.due(s.ctx, next); err != nil {
			return err.Error()
		}
		s.touch()
		if why := s.caughtUp(deadline); why != "" {
			return why
		}
	}
}

// touch annotates every NodeClaim, and the Node of every terminating one, with the simulated time:
// controller-runtime waits out a requeue on the wall clock, so a controller that asked to come back once time has
// passed in simulated time (consolidateAfter or expireAfter, a NodeClaim's; a drain's shortest time, the
// termination controller's, which requeues its Node every second) reconciles now instead (shortenedTimers).
func (s *stepper) touch() {
	began := time.Now()
	defer func() { s.wall.AnnotatingSeconds += time.Since(began).Seconds() }()
	claims := &karpv1.NodeClaimList{}
	if err := s.reader.List(s.ctx, claims); err != nil {
		return
	}
	patch := client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clockAnnotation, s.clock.Now().UTC().Format(time.RFC3339Nano))))
	s.touchCronJobs(patch)
	// All at once, as each is a request of its own.
	workqueue.ParallelizeUntil(s.ctx, len(claims.Items), len(claims.Items), func(i int) {
		var obj client.Object = &claims.Items[i]
		if claims.Items[i].DeletionTimestamp != nil {
			if claims.Items[i].Status.NodeName == "" {
				return
			}
			obj = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: claims.Items[i].Status.NodeName}}
		}
		if err := s.writer.Patch(s.ctx, obj, patch); client.IgnoreNotFound(err) != nil {
			log.FromContext(s.ctx).Error(err, "annotating with the clock", "object", obj.GetName())
		}
	})
}

// touchBuffers annotates every CapacityBuffer with the simulated time once a node has its slices: Karpenter's
// CapacityBuffer controller rechecks each buffer every 30 s of the wall clock and starts a provisioning pass each time
// (pkg/controllers/capacitybuffer/controller.go), which is how a cluster learns that a new node holds fewer of a
// buffer's seats than planned (its device plugin's slices, not the NodeOverlay's) and launches for the rest; the
// annotation has it reconcile now (shortenedTimers).
func (s *stepper) touchBuffers() {
	buffers := &autoscalingv1beta1.CapacityBufferList{}
	if err := s.reader.List(s.ctx, buffers); err != nil {
		return
	}
	patch := client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clockAnnotation, s.clock.Now().UTC().Format(time.RFC3339Nano))))
	for i := range buffers.Items {
		if err := s.writer.Patch(s.ctx, &buffers.Items[i], patch); client.IgnoreNotFound(err) != nil {
			log.FromContext(s.ctx).Error(err, "annotating with the clock", "CapacityBuffer", buffers.Items[i].Name)
		}
	}
}

// caughtUp waits until the manager's caches hold every pod, node, NodeClaim and CapacityBuffer the API server holds,
// at its resourceVersion or later, and none it has deleted: what was written before it was called (the driver's
// pods, touch's annotations) has reached the controllers. It returns what had not, by the deadline.
func (s *stepper) caughtUp(deadline time.Time) string {
	began := time.Now()
	defer func() { s.wall.WaitingFor["caches"] += time.Since(began).Seconds() }()
	for _, list := range []func() client.ObjectList{
		func() client.ObjectList { return &corev1.PodList{} },
		func() client.ObjectList { return &corev1.NodeList{} },
		func() client.ObjectList { return &karpv1.NodeClaimList{} },
		func() client.ObjectList { return &autoscalingv1beta1.CapacityBufferList{} },
		func() client.ObjectList { return &batchv1.CronJobList{} },
		func() client.ObjectList { return &batchv1.JobList{} },
	} {
		stored := list()
		if err := s.writer.List(s.ctx, stored); err != nil {
			return err.Error()
		}
		want, err := versions(stored)
		if err != nil {
			return err.Error()
		}
		for {
			cached := list()
			if err := s.reader.List(s.ctx, cached); err != nil {
				return err.Error()
			}
			have, err := versions(cached)
			if err != nil {
				return err.Error()
			}
			behind := ""
			for uid, v := range want {
				got, ok := have[uid]
				if ok && got.number >= v.number {
					continue
				}
				if !ok && s.gone(v.object) {
					delete(want, uid) // deleted since it was listed, and the cache has seen that
					continue
				}
				behind = fmt.Sprintf("the controllers' cache of %T behind the API server", cached)
			}
			if behind == "" {
				break
			}
			if time.Now().After(deadline) {
				return behind
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return ""
}

// version is a listed object's resourceVersion as a number: the twin's API server (etcd's) numbers its writes in
// order, so a later version of an object has a greater one.
type version struct {
	number uint64
	object client.Object
}

// versions is each listed object's version, by UID.
func versions(list client.ObjectList) (map[types.UID]version, error) {
	found := map[types.UID]version{}
	return found, apimeta.EachListItem(list, func(o runtime.Object) error {
		object := o.(client.Object)
		v, err := strconv.ParseUint(object.GetResourceVersion(), 10, 64)
		if err != nil {
			return fmt.Errorf("%T %s: resourceVersion %q: %w", o, object.GetName(), object.GetResourceVersion(), err)
		}
		found[object.GetUID()] = version{v, object}
		return nil
	})
}

// gone says whether the API server no longer has the object (by its UID).
func (s *stepper) gone(object client.Object) bool {
	now := object.DeepCopyObject().(client.Object)
	err := s.writer.Get(s.ctx, client.ObjectKeyFromObject(object), now)
	return apierrors.IsNotFound(err) || (err == nil && now.GetUID() != object.GetUID())
}

// settle waits until the controllers have settled, or the deadline; it returns what had not settled by then.
func (s *stepper) settle(deadline time.Time) string {
	for {
		began := time.Now()
		why, kind := s.unsettled()
		if why == "" {
			return ""
		}
		if time.Now().After(deadline) {
			return why
		}
		time.Sleep(5 * time.Millisecond)
		s.wall.WaitingFor[kind] += time.Since(began).Seconds()
	}
}

func (s *stepper) quietFor(d time.Duration) bool {
	return time.Since(time.Unix(0, s.lastChange.Load())) >= d
}

// unsettled says what the controllers are still doing, "" when nothing: a change within quiet, a batch of the
// provisioner's under way, a disruption command in the queue, a controller with work queued or under way, a NodeClaim
// not yet initialized, a pending pod Karpenter has not decided on, or one it placed that kube-scheduler has not bound
// yet, a node terminating on the wall clock (termination.go: one that waits for the simulated clock, for its
// shortest drain or its terminationGracePeriod, has settled), or the CronJob controller or a Job of its not done
// (cronjobs.go).
func (s *stepper) unsettled() (string, string) {
	if !s.quietFor(quiet) {
		return "the controllers were still changing objects", "quiet"
	}
	if s.clock.isBatching() {
		return "the provisioner's batch under way", "batch"
	}
	if !s.queue.IsEmpty() {
		return "a disruption command under way", "command"
	}
	if name, err := busy(); err != nil {
		return err.Error(), "error"
	} else if name != "" {
		return fmt.Sprintf("controller %s has work queued or under way", name), "busy"
	}
	if why, objects, err := s.terminating(); err != nil {
		return err.Error(), "error"
	} else if why != "" {
		s.nudge(objects)
		return why, "terminating"
	}
	claims := &karpv1.NodeClaimList{}
	if err := s.reader.List(s.ctx, claims); err != nil {
		return err.Error(), "error"
	}
	for _, nc := range claims.Items {
		// A node still booting waits for the clock (boot.go).
		if nc.DeletionTimestamp == nil && !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() && !s.boots.isBooting(nc.Name) {
			return fmt.Sprintf("NodeClaim %s not initialized", nc.Name), "initializing"
		}
	}
	if why, kind := s.cronJobsUnsettled(time.Now().Add(stepLimit)); why != "" {
		return why, kind
	}
	pods := &corev1.PodList{}
	if err := s.reader.List(s.ctx, pods); err != nil {
		return err.Error(), "error"
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		// A deleted pod on a launched node goes once Karpenter has seen it going (kubelet.go goingSeen), at this time.
		if pod.DeletionTimestamp != nil && pod.Spec.NodeName != "" && !isDaemon(pod) && s.kubelet.ours(s.ctx, pod.Spec.NodeName) {
			return fmt.Sprintf("pod %s deleted, not yet gone", client.ObjectKeyFromObject(pod)), "deleting"
		}
		if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || isDaemon(pod) || pod.Status.Phase != corev1.PodPending {
			continue
		}
		// kube-scheduler failed it for a reason of its own, not for want of a node: Karpenter decides only on pods it
		// marked Unschedulable (pkg/utils/pod IsProvisionable), so none will come. And a pod with a claim is never
		// bound: the twin runs no CSI driver to provision its volume (the hub's database, on a system node), which
		// kube-scheduler waits for (its VolumeBinding plugin, up to 600 s) and then fails as a SchedulerError.
		if cond := podCondition(pod, corev1.PodScheduled); cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		if lo.SomeBy(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil }) {
			continue
		}
		key := client.ObjectKeyFromObject(pod)
		if s.cluster.PodSchedulingDecisionTime(key).IsZero() {
			return fmt.Sprintf("pod %s: no decision of Karpenter's yet", key), "undecided"
		}
		// A pod Karpenter placed on a node still booting waits for the clock, not for kube-scheduler.
		if s.boots.isBooting(s.cluster.PodNodeClaimMapping(key)) {
			continue
		}
		if !s.cluster.PodSchedulingSuccessTime(key).IsZero() && !s.quietFor(bindWait) {
			return fmt.Sprintf("pod %s: placed by Karpenter, not bound by kube-scheduler", key), "unbound"
		}
	}
	return "", ""
}

// busy names a controller of the manager's with work queued or under way, "" when none: controller-runtime's own
// gauges of each controller's queue (workqueue_depth, which a requeue after a delay is not in until it is due) and
// of its workers (controller_runtime_active_workers). The provisioner's one worker is always under way (its batcher
// waits a second for a first pod, again and again): simClock.batching says when it has a batch.
func busy() (string, error) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return "", err
	}
	for _, family := range families {
		label := map[string]string{"workqueue_depth": "name", "controller_runtime_active_workers": "controller"}[family.GetName()]
		if label == "" {
			continue
		}
		for _, m := range family.GetMetric() {
			name := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					name = l.GetValue()
				}
			}
			if m.GetGauge().GetValue() > 0 && !(label == "controller" && name == provisionerName) {
				return name, nil
			}
		}
	}
	return "", nil
}

// The provisioner's controller name (pkg/controllers/provisioning/provisioner.go Name).
const provisionerName = "provisioner"

// disrupt runs one pass of Karpenter's disruption controller, or waits for the one under way, and says whether it
// acted. A pass that waits for simulated time (its validation) is left waiting once the others have settled: the
// stepper moves the clock.
func (s *stepper) disrupt(deadline time.Time) bool {
	began := time.Now()
	defer func() { s.wall.DisruptionSeconds += time.Since(began).Seconds() }()
	if s.disrupting == nil {
		s.wall.DisruptionPasses++
		s.disrupting = make(chan bool, 1)
		go func(done chan<- bool) {
			result, err := s.disruption.Reconcile(s.ctx)
			if err != nil {
				log.FromContext(s.ctx).Error(err, "disruption")
			}
			// A pass that started a command asks to run again at once (singleton.RequeueImmediately).
			done <- err == nil && (result.Requeue || result.RequeueAfter < time.Second)
		}(s.disrupting)
	}
	for {
		select {
		case acted := <-s.disrupting:
			s.disrupting = nil
			return acted
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				return false
			}
			if _, waiting := s.clock.nextEnd(); waiting {
				if why, _ := s.unsettled(); why == "" {
					return false
				}
			}
		}
	}
}

// node is one of the answer's nodes.
type node struct {
	Name         string `json:"name"`
	Lab          string `json:"lab"`
	InstanceType string `json:"instanceType"`
	CapacityType string `json:"capacityType"`
	GPUSlices    int64  `json:"gpuSlices"` // nvidia.com/gpu (or .shared) allocatable, as the device plugin advertises
	Pods         int    `json:"pods"`      // pods bound to it, DaemonSets' not counted
	Terminating  bool   `json:"terminating"`
}

// nodes lists the nodes Karpenter launched, by name.
func (s *stepper) nodes() ([]node, error) {
	list := &corev1.NodeList{}
	if err := s.reader.List(s.ctx, list, client.HasLabels{karpv1.NodePoolLabelKey}); err != nil {
		return nil, err
	}
	answer := []node{}
	for _, n := range list.Items {
		pods := &corev1.PodList{}
		if err := s.reader.List(s.ctx, pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
			return nil, err
		}
		slices := n.Status.Allocatable[awsv1.ResourceNVIDIAGPU]
		if shared, ok := n.Status.Allocatable[sharedGPU]; ok {
			slices = shared
		}
		answer = append(answer, node{
			Name: n.Name, Lab: n.Labels[render.LabLabel], InstanceType: n.Labels[corev1.LabelInstanceTypeStable],
			CapacityType: n.Labels[karpv1.CapacityTypeLabelKey], GPUSlices: slices.Value(),
			Pods:        lo.CountBy(pods.Items, func(p corev1.Pod) bool { return !isDaemon(&p) && p.DeletionTimestamp == nil }),
			Terminating: n.DeletionTimestamp != nil,
		})
	}
	sort.Slice(answer, func(i, j int) bool { return answer[i].Name < answer[j].Name })
	return answer, nil
}
