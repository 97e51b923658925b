// Command cronjob-controller runs Kubernetes' own CronJob controller (k8s.io/kubernetes pkg/controller/cronjob,
// ControllerV2, at the release rehearsal/controlplane builds) against the twin's API server, on the rehearsal's
// simulated clock instead of the wall clock (docs/developers/rehearsal.md, "The class CronJobs on the clock").
//
//	cronjob-controller -kubeconfig <file> -start <RFC3339>
//
// The twin's kube-controller-manager runs without its cronjob-controller (--controllers=*,-cronjob-controller); this
// runs it instead, unchanged but for two things the rehearsal gives it:
//   - its time: ControllerV2 reads the time through an unexported field, `now func() time.Time` ("done to facilitate
//     unit tests", cronjob_controllerv2.go, the same field in v1.34.12, v1.35.8 and v1.36.5), which has no setter; it
//     is set by reflection to the simulated clock. The clock starts at -start and moves to the time of the
//     rehearsal.gpulab.dev/clock annotation the stepper (rehearsal/stepper) sets on every CronJob after each move of
//     its own, read as the informer receives the CronJob, before the controller's handler sees the update (which
//     requeues it at once: updateCronJob requeues on any change but schedule and timeZone).
//   - each CronJob's creationTimestamp, which the API server stamps with the wall clock and the controller counts
//     schedules from (utils.go mostRecentScheduleTime): read as one second before -start, the CronJob made before the
//     day the rehearsal plays, whose earlier runs it does not play.
//
// It prints one line, {"address": "127.0.0.1:<port>"}, and answers GET /state there with {"idle", "writes", "seen"}:
// whether the controller's work queue is empty with no item under way (from the queue's own metrics, depth and the
// count of items taken less those done), how many writes it has made to the API server, and the clock each CronJob
// was last seen with; the stepper waits on them before it moves the clock again.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/cronjob"
)

// The annotation the stepper sets on every CronJob after it moves the clock (rehearsal/stepper rehearse.go).
const clockAnnotation = "rehearsal.gpulab.dev/clock"

// The name the controller gives its work queue (NewControllerV2's TypedRateLimitingQueueConfig).
const queueName = "cronjob"

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "cronjob-controller: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "the twin's kubeconfig, as the cronjob-controller service account")
	startAt := flag.String("start", "", "the simulated clock's first time, RFC3339")
	klog.InitFlags(nil)
	flag.Parse()
	if *kubeconfig == "" || *startAt == "" {
		return errors.New("usage: cronjob-controller -kubeconfig <file> -start <RFC3339>")
	}
	start, err := time.Parse(time.RFC3339, *startAt)
	if err != nil {
		return fmt.Errorf("-start: %w", err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	w := &writes{}
	config.Wrap(w.wrap)
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// Before the controller makes its queue: the queue takes the provider set first.
	queue := &queueMetrics{}
	workqueue.SetProvider(queue)
	clk := &clock{now: start, seen: map[string]string{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	cronJobs := factory.Batch().V1().CronJobs()
	created := metav1.NewTime(start.Add(-time.Second))
	if err := cronJobs.Informer().SetTransform(func(obj any) (any, error) {
		cj, ok := obj.(*batchv1.CronJob)
		if !ok {
			return obj, nil // a tombstone
		}
		clk.saw(cj)
		cj.CreationTimestamp = created
		return cj, nil
	}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jm, err := cronjob.NewControllerV2(ctx, factory.Batch().V1().Jobs(), cronJobs, client)
	if err != nil {
		return err
	}
	if err := setNow(jm, clk.Now); err != nil {
		return err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	http.HandleFunc("/state", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"idle": queue.idle(), "writes": w.count.Load(), "seen": clk.seenNow()})
	})
	go func() { _ = http.Serve(listener, nil) }()
	factory.Start(ctx.Done())
	go jm.Run(ctx, 5) // kube-controller-manager's --concurrent-cron-job-syncs default
	if err := json.NewEncoder(os.Stdout).Encode(map[string]string{"address": listener.Addr().String()}); err != nil {
		return err
	}
	// The rehearsal closes stdin when it is over.
	_, _ = os.Stdin.Read(make([]byte, 1))
	return nil
}

// setNow sets the controller's unexported `now` field: reflection finds it by name and type, so a release that
// renames or retypes it fails here, at start, and not silently on the wall clock.
func setNow(jm *cronjob.ControllerV2, now func() time.Time) error {
	field := reflect.ValueOf(jm).Elem().FieldByName("now")
	if !field.IsValid() || field.Type() != reflect.TypeOf(now) {
		return errors.New("k8s.io/kubernetes pkg/controller/cronjob ControllerV2 has no field `now func() time.Time`")
	}
	reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Set(reflect.ValueOf(now))
	return nil
}

// clock is the simulated time: -start, then the latest clock annotation seen on a CronJob.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	seen map[string]string // each CronJob's clock annotation when last received, by namespace/name
}

func (c *clock) saw(cj *batchv1.CronJob) {
	c.mu.Lock()
	defer c.mu.Unlock()
	text := cj.Annotations[clockAnnotation]
	c.seen[cj.Namespace+"/"+cj.Name] = text
	if t, err := time.Parse(time.RFC3339Nano, text); err == nil && t.After(c.now) {
		c.now = t
	}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) seenNow() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]string, len(c.seen))
	for k, v := range c.seen {
		seen[k] = v
	}
	return seen
}

// writes counts the controller's requests that change the API server's objects (Jobs, the CronJobs' status, events).
type writes struct{ count atomic.Int64 }

func (w *writes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.Method != http.MethodGet {
			w.count.Add(1)
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// queueMetrics is client-go's workqueue metrics provider, kept for the controller's queue only: its depth (items
// added and not yet taken), and the items taken (the latency metric observes each Get) and done (the work duration
// metric observes each Done). Idle is no item waiting and none under way; an item requeued after a delay
// (AddAfter) is not waiting until its time has come, on the wall clock, which the rehearsal never waits for.
type queueMetrics struct {
	depth, taken, done atomic.Int64
}

func (q *queueMetrics) idle() bool {
	return q.depth.Load() == 0 && q.taken.Load() == q.done.Load()
}

type gauge struct{ v *atomic.Int64 }

func (g gauge) Inc() {
	if g.v != nil {
		g.v.Add(1)
	}
}
func (g gauge) Dec() {
	if g.v != nil {
		g.v.Add(-1)
	}
}

type observer struct{ v *atomic.Int64 }

func (o observer) Observe(float64) {
	if o.v != nil {
		o.v.Add(1)
	}
}

type ignored struct{}

func (ignored) Inc()        {}
func (ignored) Set(float64) {}

func (q *queueMetrics) of(name string, v *atomic.Int64) *atomic.Int64 {
	if name != queueName {
		return nil
	}
	return v
}

func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return gauge{q.of(name, &q.depth)}
}
func (q *queueMetrics) NewAddsMetric(string) workqueue.CounterMetric { return ignored{} }
func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return observer{q.of(name, &q.taken)}
}
func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return observer{q.of(name, &q.done)}
}
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return ignored{}
}
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return ignored{}
}
func (q *queueMetrics) NewRetriesMetric(string) workqueue.CounterMetric { return ignored{} }
