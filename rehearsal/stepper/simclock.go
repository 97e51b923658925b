package main

// The rehearsal's clock: simulated time that the stepper sets, for every clock.Clock Karpenter's controllers take.

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// readYourWritesSleep replaces the one-second Sleep Karpenter's NodeClaim lifecycle and expiration controllers take
// after a write (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/nodeclaim/lifecycle/controller.go and
// nodeclaim/expiration/controller.go: "ensure that we are able to read our own writes"): it waits for the API
// server's watch, in real time, and the twin answers on loopback.
const readYourWritesSleep = 100 * time.Millisecond

// simClock is k8s.io/utils/clock/testing's FakeClock as Karpenter's controllers use it, set only by the stepper, with
// three differences that follow from what Karpenter v1.14.1 does with each call (every call of a timer on a
// clock.Clock in its pkg/, found with grep):
//   - After (disruption validation's wait before it acts, pkg/controllers/disruption/validation.go) waits in simulated
//     time, and the clock records when each such wait ends, so that the stepper can move the clock to it.
//   - NewTimer (only the provisioner's batcher, pkg/controllers/provisioning/batcher.go: the batch windows and its
//     one-second wait for a first pod) runs in real time: the windows gather pods that arrive together. Karpenter's
//     own options shorten them (shortenedTimers). The windows run only while the stepper runs a step (gatedTimer):
//     the pods of one simulated moment are one batch however slowly the driver makes them. The clock also notes
//     when a batch is under way (batching): from the timer of its longest window, which Wait starts once a first
//     pod came, to the next one-second wait, which the provisioner starts once it has scheduled the batch.
//   - Sleep waits readYourWritesSleep in real time: FakeClock's Sleep would move the simulated clock itself.
type simClock struct {
	*clocktesting.FakeClock
	real clock.RealClock
	mu   sync.Mutex
	ends []time.Time // the ends of the simulated waits (After), some perhaps past
	// Every time the clock has shown, to the second (the precision of an object's timestamps): a timestamp not among
	// them was not taken from this clock.
	shown    map[int64]bool
	batching bool
	// Whether the stepper is running a step, and the batch windows waiting for it to (gatedTimer).
	stepping bool
	held     []func()
}

func newSimClock(start time.Time) *simClock {
	return &simClock{FakeClock: clocktesting.NewFakeClock(start), shown: map[int64]bool{start.Unix(): true}}
}

// SetTime moves the clock (only the stepper does).
func (c *simClock) SetTime(t time.Time) {
	c.mu.Lock()
	c.shown[t.Unix()] = true
	c.mu.Unlock()
	c.FakeClock.SetTime(t)
}

// hasShown says whether the clock has shown t, to the second.
func (c *simClock) hasShown(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shown[t.Unix()]
}

func (c *simClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.ends = append(c.ends, c.Now().Add(d))
	c.mu.Unlock()
	return c.FakeClock.After(d)
}

func (c *simClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	switch d {
	case rehearsalBatchMax:
		c.batching = true
	case firstPodWait:
		c.batching = false
	}
	c.mu.Unlock()
	if d == rehearsalBatchMax || d == rehearsalBatchIdle {
		t := &gatedTimer{clock: c, c: make(chan time.Time, 1)}
		t.Reset(d)
		return t
	}
	return c.real.NewTimer(d)
}

// step says whether the stepper is running a step: from the driver's line until the answer. Between steps the driver
// acts at the clock's time (makes a moment's learner pods, runs a Job's command), as slowly as the machine lets it;
// a batch window that ran meanwhile could close between two of those pods. Under load the driver made the pods of one
// moment up to 400 ms apart, twice the idle window: Karpenter's provisioner then took the first alone and launched
// a small node for it, where one batch of them all takes one node that holds them all (prod at 0.5 spot warnings per
// node-hour, 8 learners moved at 18:57:45: two g5.xlarge in one run of four, one g5.12xlarge in the others; the
// provisioner's "found provisionable pod(s)" lines). So the windows count only while a step runs.
func (c *simClock) step(running bool) {
	c.mu.Lock()
	c.stepping = running
	held := c.held
	if running {
		c.held = nil
	} else {
		held = nil
	}
	c.mu.Unlock()
	for _, start := range held {
		start()
	}
}

// whenStepping runs start now if a step is running, else once one does.
func (c *simClock) whenStepping(start func()) {
	c.mu.Lock()
	if !c.stepping {
		c.held = append(c.held, start)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	start()
}

// gatedTimer is a timer of the wall clock that counts only while the stepper runs a step (simClock.step). As a
// timer of Go 1.23 and later, once stopped or reset it delivers no value from before.
type gatedTimer struct {
	clock   *simClock
	c       chan time.Time
	mu      sync.Mutex
	armed   bool // set and not yet fired
	running *time.Timer
	set     int // the number of the latest Reset, so that a start or a fire of an earlier one does nothing
}

func (t *gatedTimer) C() <-chan time.Time { return t.c }

// Stop says whether the timer was set and had not delivered its value (a value delivered but not received is taken
// back).
func (t *gatedTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.armed
	t.armed = false
	t.set++
	if t.running != nil {
		t.running.Stop()
		t.running = nil
	}
	select {
	case <-t.c:
		was = true
	default:
	}
	return was
}

func (t *gatedTimer) Reset(d time.Duration) bool {
	was := t.Stop()
	t.mu.Lock()
	t.armed = true
	set := t.set
	t.mu.Unlock()
	t.clock.whenStepping(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.set == set && t.armed {
			t.running = time.AfterFunc(d, func() { t.fire(set) })
		}
	})
	return was
}

func (t *gatedTimer) fire(set int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.set != set || !t.armed {
		return
	}
	t.armed, t.running = false, nil
	select {
	case t.c <- time.Now():
	default:
	}
}

// firstPodWait is how long the batcher waits for a first pod before the provisioner starts over (batcher.go Wait,
// NewTimer(time.Second)).
const firstPodWait = time.Second

// isBatching says whether the provisioner is gathering or scheduling a batch.
func (c *simClock) isBatching() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.batching
}

func (c *simClock) Sleep(time.Duration) { time.Sleep(readYourWritesSleep) }

// nextEnd is the earliest end of a simulated wait still ahead of the clock.
func (c *simClock) nextEnd() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	ahead := c.ends[:0]
	for _, end := range c.ends {
		if end.After(now) {
			ahead = append(ahead, end)
		}
	}
	c.ends = ahead
	if len(ahead) == 0 {
		return time.Time{}, false
	}
	sort.Slice(ahead, func(i, j int) bool { return ahead[i].Before(ahead[j]) })
	return ahead[0], true
}
