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
//     one-second wait for a first pod) runs in real time: the windows gather pods that arrive together, which the
//     stepper creates within milliseconds. Karpenter's own options shorten them (shortenedTimers). The clock also
//     notes when a batch is under way (batching): from the timer of its longest window, which Wait starts once a
//     first pod came, to the next one-second wait, which the provisioner starts once it has scheduled the batch.
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
	return c.real.NewTimer(d)
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
