package main

// The class CronJobs on the simulated clock: Kubernetes' own CronJob controller runs in a process of its own
// (rehearsal/controlplane/cronjob-controller, at the twin's Kubernetes release), which takes its time from the clock
// annotation the stepper sets on every CronJob (touch). The stepper stops the clock at each CronJob's next schedule
// time, waits until that controller has taken in the clock and has nothing left to do, and hands each Job it made to
// the driver once the Job controller has made its pod and kube-scheduler has placed it (or found no place for it):
// the driver runs the pod's command, as the kubelet would run its container (rehearsal/cron_jobs.py).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The label the Job controller puts on a Job's pods (batch/v1 JobNameLabel, "batch.kubernetes.io/job-name").
const jobNameLabel = batchv1.JobNameLabel

// cronJobController is the CronJob controller's process as the stepper sees it: the address of its /state.
type cronJobController struct {
	address  string
	http     *http.Client
	writes   int64              // its writes when the stepper last caught up with them
	reported map[types.UID]bool // the Jobs handed to the driver
}

// cronJobState is its answer to GET /state (rehearsal/controlplane/cronjob-controller main.go).
type cronJobState struct {
	Idle   bool              `json:"idle"`
	Writes int64             `json:"writes"`
	Seen   map[string]string `json:"seen"`
}

func newCronJobController(address string) *cronJobController {
	return &cronJobController{address: address, http: &http.Client{Timeout: 5 * time.Second}, reported: map[types.UID]bool{}}
}

func (c *cronJobController) state() (cronJobState, error) {
	var st cronJobState
	resp, err := c.http.Get("http://" + c.address + "/state")
	if err != nil {
		return st, fmt.Errorf("the CronJob controller: %w", err)
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// firedJob is one Job the CronJob controller made, as the answer's "jobs" hands it to the driver.
type firedJob struct {
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	CronJob   string `json:"cronJob"`
	At        string `json:"at"`  // the simulated time it is handed over: the time the controller made it
	Pod       string `json:"pod"` // its pod, which the Job controller made
	Node      string `json:"node,omitempty"`
	// Why kube-scheduler found no node for the pod (its PodScheduled condition), when it did not place it.
	Unschedulable string `json:"unschedulable,omitempty"`
}

// schedule is the CronJob's schedule as its controller parses it (pkg/controller/cronjob formatSchedule and
// cron.ParseStandard): on its timeZone, or, without one, on the controller's local time, which is UTC (the driver
// starts it with TZ=UTC, as kube-controller-manager's image has no local time zone). A zone Go cannot load makes the
// controller start no Job (syncCronJob's UnknownTimeZone): no schedule.
func schedule(cj *batchv1.CronJob) (cron.Schedule, bool) {
	zone := "UTC"
	if cj.Spec.TimeZone != nil {
		zone = *cj.Spec.TimeZone
	}
	if _, err := time.LoadLocation(zone); err != nil {
		return nil, false
	}
	sched, err := cron.ParseStandard(fmt.Sprintf("TZ=%s %s", zone, cj.Spec.Schedule))
	return sched, err == nil
}

// cronJobsDue is when each CronJob that may start a Job next falls due after now: the clock stops there, so that the
// controller decides at that time.
func (s *stepper) cronJobsDue(now time.Time) ([]time.Time, error) {
	if s.cronJobs == nil {
		return nil, nil
	}
	list := &batchv1.CronJobList{}
	if err := s.reader.List(s.ctx, list); err != nil {
		return nil, err
	}
	var due []time.Time
	for i := range list.Items {
		cj := &list.Items[i]
		if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
			continue
		}
		if sched, ok := schedule(cj); ok {
			due = append(due, sched.Next(now))
		}
	}
	return due, nil
}

// touchCronJobs annotates every CronJob with the simulated time: the controller takes its time from it, and the
// update requeues each CronJob at once (updateCronJob).
func (s *stepper) touchCronJobs(patch client.Patch) {
	if s.cronJobs == nil {
		return
	}
	list := &batchv1.CronJobList{}
	if err := s.reader.List(s.ctx, list); err != nil {
		return
	}
	for i := range list.Items {
		_ = s.writer.Patch(s.ctx, &list.Items[i], patch)
	}
}

// cronJobsUnsettled says what the CronJob controller, or a Job it made, is still waiting for: the controller has
// not taken in the clock on every CronJob or has work queued or under way, or has written what the stepper's caches
// have not seen yet, or a Job of a CronJob's has no pod yet (the Job controller's), or its pod is neither placed nor
// found unschedulable by kube-scheduler.
func (s *stepper) cronJobsUnsettled(deadline time.Time) (string, string) {
	if s.cronJobs == nil {
		return "", ""
	}
	st, err := s.cronJobs.state()
	if err != nil {
		return err.Error(), "error"
	}
	if !st.Idle {
		return "the CronJob controller has work queued or under way", "cronJob"
	}
	list := &batchv1.CronJobList{}
	if err := s.reader.List(s.ctx, list); err != nil {
		return err.Error(), "error"
	}
	for _, cj := range list.Items {
		if clock := cj.Annotations[clockAnnotation]; clock != "" && st.Seen[cj.Namespace+"/"+cj.Name] != clock {
			return fmt.Sprintf("the CronJob controller has not seen CronJob %s/%s at %s", cj.Namespace, cj.Name, clock), "cronJob"
		}
	}
	if st.Writes != s.cronJobs.writes {
		if why := s.caughtUp(deadline); why != "" {
			return why, "caches"
		}
		s.cronJobs.writes = st.Writes
	}
	_, waiting, err := s.firedJobs()
	if err != nil {
		return err.Error(), "error"
	}
	return waiting, "job"
}

// firedJobs lists the Jobs of CronJobs not yet handed to the driver whose pods kube-scheduler has placed or found no
// place for, and says what else a Job of a CronJob's waits for ("" when none).
func (s *stepper) firedJobs() ([]firedJob, string, error) {
	jobs := &batchv1.JobList{}
	if err := s.reader.List(s.ctx, jobs); err != nil {
		return nil, "", err
	}
	var ready []firedJob
	for i := range jobs.Items {
		job := &jobs.Items[i]
		owner := metav1.GetControllerOf(job)
		if owner == nil || owner.Kind != "CronJob" || s.cronJobs.reported[job.UID] {
			continue
		}
		pods := &corev1.PodList{}
		if err := s.reader.List(s.ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
			return nil, "", err
		}
		if len(pods.Items) == 0 {
			if ended := jobEnded(job); ended != "" {
				// The Job controller, on the wall clock, ended it (its activeDeadlineSeconds) before its pod was placed.
				ready = append(ready, firedJob{Namespace: job.Namespace, Job: job.Name, CronJob: owner.Name, At: s.now(),
					Unschedulable: "the Job ended before its pod was placed: " + ended})
				continue
			}
			return nil, fmt.Sprintf("Job %s/%s: no pod yet (the Job controller's)", job.Namespace, job.Name), nil
		}
		pod := &pods.Items[0]
		fired := firedJob{Namespace: job.Namespace, Job: job.Name, CronJob: owner.Name, At: s.now(), Pod: pod.Name, Node: pod.Spec.NodeName}
		if fired.Node == "" {
			cond := podCondition(pod, corev1.PodScheduled)
			if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
				return nil, fmt.Sprintf("pod %s/%s of Job %s: not placed by kube-scheduler yet", pod.Namespace, pod.Name, job.Name), nil
			}
			fired.Unschedulable = cond.Message
		}
		ready = append(ready, fired)
	}
	return ready, "", nil
}

// jobEnded is the Job's Complete or Failed condition, "" while it runs.
func jobEnded(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("%s (%s: %s)", c.Type, c.Reason, c.Message)
		}
	}
	return ""
}

func podCondition(pod *corev1.Pod, kind corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == kind {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// takeFired hands the Jobs ready for the driver over once: the step stops there, and the driver runs them.
func (s *stepper) takeFired() ([]firedJob, error) {
	if s.cronJobs == nil {
		return nil, nil
	}
	ready, _, err := s.firedJobs()
	if err != nil {
		return nil, err
	}
	for _, j := range ready {
		job := &batchv1.Job{}
		if err := s.reader.Get(s.ctx, client.ObjectKey{Namespace: j.Namespace, Name: j.Job}, job); err == nil {
			s.cronJobs.reported[job.UID] = true
		}
	}
	return ready, nil
}
