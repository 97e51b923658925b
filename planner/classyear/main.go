// Command classyear plays a span of time (a year) over a render's class objects as the cluster reads them, for
// tests/test_class_year.py, which reads its answer as JSON:
//
//   - budgets: for each NodePool and disruption reason, the minutes in which its budgets allow no disruption, found
//     as Karpenter finds them: each budget's schedule parsed as Budget.IsActive parses it (robfig/cron v3
//     ParseStandard of "TZ=UTC <schedule>", sigs.k8s.io/karpenter v1.14.1 pkg/apis/v1/nodepool.go) and active from
//     each firing for its duration. At every minute the caller names (each minute of each class), and at both edges
//     of every window, the answer is Karpenter's own: NodePool.GetAllowedDisruptionsByReason with a clock set to
//     that minute.
//   - fires: every time each CronJob fires, parsed as kube-controller-manager v1.34 parses it (cron.ParseStandard of
//     "TZ=<spec.timeZone> <spec.schedule>", k8s.io/kubernetes pkg/controller/cronjob formatSchedule) and stepped
//     with Next from each firing to the next, as the controller does (mostRecentScheduleTime).
//   - zones: each zone's UTC offset changes in the span, read from the zone files time.LoadLocation finds
//     ($ZONEINFO first, as for the CronJobs above) and from Go's own copy ($GOROOT/lib/time/zoneinfo.zip, the one the
//     time/tzdata package embeds in kube-controller-manager), so that the caller can hold both to its own.
//
// It reads {"from", "to" (RFC 3339), "nodePools": [NodePool], "cronJobs": [{"name", "schedule", "timeZone"}],
// "zones": [name], "minutes": {"<NodePool>": {"<reason>": [unix minute]}}} on stdin. Times out are Unix minutes
// (seconds for fires); a window [a, b) is active from minute a to before minute b.
package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"
	_ "time/tzdata" // as kube-controller-manager imports it, for CronJob time zones

	"github.com/robfig/cron/v3"
	"github.com/samber/lo"
	clock "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Karpenter scales a budget's percentage by the NodePool's node count; gpulab's class budgets are counts ("0").
const nodes = 10

var reasons = []karpv1.DisruptionReason{
	karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonUnderutilized, karpv1.DisruptionReasonEmpty,
}

type request struct {
	From      time.Time                     `json:"from"`
	To        time.Time                     `json:"to"`
	NodePools []karpv1.NodePool             `json:"nodePools"`
	CronJobs  []cronJob                     `json:"cronJobs"`
	Zones     []string                      `json:"zones"`
	Minutes   map[string]map[string][]int64 `json:"minutes"`
}

type cronJob struct {
	Name     string `json:"name"`
	Schedule string `json:"schedule"`
	TimeZone string `json:"timeZone"`
}

type reasonAnswer struct {
	// Active holds the windows in which the budgets allow no disruption for the reason.
	Active [][2]int64 `json:"active"`
	// Allowed holds Karpenter's allowed disruptions at each minute the caller named, in its order.
	Allowed []int `json:"allowed"`
	// EdgeMismatches holds the window edges at which Karpenter's answer disagrees with Active (none, or the reading
	// of Budget.IsActive above is wrong).
	EdgeMismatches []int64 `json:"edgeMismatches"`
}

type change struct {
	At     int64 `json:"at"`
	Offset int   `json:"offset"` // seconds east of UTC from At on
}

type answer struct {
	Go       string                             `json:"go"`
	ZoneInfo string                             `json:"zoneinfo"`
	Budgets  map[string]map[string]reasonAnswer `json:"budgets"`
	Fires    map[string][]int64                 `json:"fires"`
	Zones    map[string]map[string][]change     `json:"zones"`
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail("reading the request: %v", err)
	}
	out := answer{
		Go: runtime.Version(), ZoneInfo: os.Getenv("ZONEINFO"),
		Budgets: map[string]map[string]reasonAnswer{}, Fires: map[string][]int64{}, Zones: map[string]map[string][]change{},
	}
	// Each NodePool and reason on a goroutine of its own: Karpenter parses every budget's schedule at every minute.
	answers := make([][]reasonAnswer, len(req.NodePools))
	var wait sync.WaitGroup
	for i := range req.NodePools {
		answers[i] = make([]reasonAnswer, len(reasons))
		for j, reason := range reasons {
			wait.Go(func() {
				pool := &req.NodePools[i]
				answers[i][j] = budgets(pool, reason, req.From, req.To, req.Minutes[pool.Name][string(reason)])
			})
		}
	}
	wait.Wait()
	for i, pool := range req.NodePools {
		out.Budgets[pool.Name] = map[string]reasonAnswer{}
		for j, reason := range reasons {
			out.Budgets[pool.Name][string(reason)] = answers[i][j]
		}
	}
	for _, job := range req.CronJobs {
		out.Fires[job.Name] = fires(job, req.From, req.To)
	}
	embedded := goZones()
	for _, name := range req.Zones {
		loaded, err := time.LoadLocation(name)
		if err != nil {
			fail("zone %s: %v", name, err)
		}
		own, err := embedded(name)
		if err != nil {
			fail("zone %s in Go's zoneinfo.zip: %v", name, err)
		}
		out.Zones[name] = map[string][]change{
			"loaded": changes(loaded, req.From, req.To), "go": changes(own, req.From, req.To),
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("writing the answer: %v", err)
	}
}

// budgets answers for one NodePool and reason: the windows its budgets allow none in, Karpenter's answer at the
// minutes asked for, and at the windows' edges.
func budgets(pool *karpv1.NodePool, reason karpv1.DisruptionReason, from, to time.Time, asked []int64) reasonAnswer {
	var windows [][2]int64
	for _, budget := range pool.Spec.Disruption.Budgets {
		if budget.Reasons != nil && !lo.Contains(budget.Reasons, reason) {
			continue
		}
		// What the budget allows while it is active: a budget that allows some never holds the class.
		if allowed := allowedWhenActive(budget); allowed != 0 {
			continue
		}
		if budget.Schedule == nil {
			windows = append(windows, [2]int64{minute(from), minute(to)})
			continue
		}
		schedule, err := cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", *budget.Schedule))
		if err != nil {
			fail("NodePool %s: schedule %q: %v", pool.Name, *budget.Schedule, err)
		}
		length := lo.FromPtr(budget.Duration).Duration
		for fire := schedule.Next(from.Add(-length)); fire.Before(to); fire = schedule.Next(fire) {
			windows = append(windows, [2]int64{minute(fire), minute(fire.Add(length))})
		}
	}
	merged := merge(windows)
	result := reasonAnswer{Active: merged, Allowed: []int{}, EdgeMismatches: []int64{}}
	for _, at := range asked {
		result.Allowed = append(result.Allowed, karpenter(pool, reason, at))
	}
	for _, window := range merged {
		for _, at := range []int64{window[0] - 1, window[0], window[1] - 1, window[1]} {
			if (karpenter(pool, reason, at) == 0) != inside(merged, at) {
				result.EdgeMismatches = append(result.EdgeMismatches, at)
			}
		}
	}
	return result
}

func allowedWhenActive(budget karpv1.Budget) int {
	always := budget
	always.Schedule, always.Duration = nil, nil
	allowed, err := always.GetAllowedDisruptions(clock.NewFakeClock(time.Unix(0, 0)), nodes)
	if err != nil {
		fail("budget %+v: %v", budget, err)
	}
	return allowed
}

// karpenter is Karpenter's own answer: the disruptions the NodePool allows for the reason at that minute.
func karpenter(pool *karpv1.NodePool, reason karpv1.DisruptionReason, at int64) int {
	allowed, err := pool.GetAllowedDisruptionsByReason(clock.NewFakeClock(time.Unix(at*60, 0).UTC()), nodes, reason)
	if err != nil {
		fail("NodePool %s at minute %d: %v", pool.Name, at, err)
	}
	return allowed
}

func merge(windows [][2]int64) [][2]int64 {
	sort.Slice(windows, func(i, j int) bool { return windows[i][0] < windows[j][0] })
	var merged [][2]int64
	for _, window := range windows {
		if last := len(merged) - 1; last >= 0 && window[0] <= merged[last][1] {
			merged[last][1] = max(merged[last][1], window[1])
			continue
		}
		merged = append(merged, window)
	}
	return lo.Ternary(merged == nil, [][2]int64{}, merged)
}

func inside(windows [][2]int64, at int64) bool {
	i := sort.Search(len(windows), func(i int) bool { return windows[i][1] > at })
	return i < len(windows) && windows[i][0] <= at
}

// fires is every firing of the CronJob in [from, to), as kube-controller-manager finds them.
func fires(job cronJob, from, to time.Time) []int64 {
	schedule, err := cron.ParseStandard(fmt.Sprintf("TZ=%s %s", job.TimeZone, job.Schedule))
	if err != nil {
		fail("CronJob %s: %v", job.Name, err)
	}
	found := []int64{}
	for fire := schedule.Next(from.Add(-time.Second)); fire.Before(to); fire = schedule.Next(fire) {
		found = append(found, fire.Unix())
	}
	return found
}

// goZones loads zones from Go's own copy of the tz database, the zip the time/tzdata package embeds.
func goZones() func(string) (*time.Location, error) {
	archive, err := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		fail("Go's zoneinfo.zip: %v", err)
	}
	return func(name string) (*time.Location, error) {
		file, err := archive.Open(name)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		data, err := io.ReadAll(file)
		if err != nil {
			return nil, err
		}
		return time.LoadLocationFromTZData(name, data)
	}
}

// changes lists the zone's offset at from and each change of it before to, to the minute: read every hour, then
// narrowed minute by minute (every change of the tz database falls on a whole minute).
func changes(zone *time.Location, from, to time.Time) []change {
	offset := func(at time.Time) int { _, seconds := at.In(zone).Zone(); return seconds }
	found := []change{{At: minute(from), Offset: offset(from)}}
	for at := from; at.Before(to); at = at.Add(time.Hour) {
		if offset(at.Add(time.Hour)) == offset(at) {
			continue
		}
		for step := at.Add(time.Minute); ; step = step.Add(time.Minute) {
			if offset(step) != offset(at) {
				found = append(found, change{At: minute(step), Offset: offset(step)})
				break
			}
		}
	}
	return found
}

func minute(at time.Time) int64 { return at.Unix() / 60 }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "classyear: "+format+"\n", args...)
	os.Exit(1)
}
