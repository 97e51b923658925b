package main

// When Karpenter's controllers next have something to decide that only the clock brings about: the stepper stops
// the clock there on its way to the driver's time, so that each decision is taken at its time and not at the end
// of a long step. Karpenter decides what happens then; this only says when to look.

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/samber/lo"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/controllers/node/termination"
)

// nextDue is the earliest of these times after now, if any: a NodeClaim's consolidateAfter running out since its
// last pod event (pkg/utils/disruption IsUnderConsolidateAfter), its expireAfter since its creation
// (nodeclaim/expiration), a terminating one's terminationGracePeriod, and the start or end of a disruption budget's
// window (pkg/apis/v1/nodepool.go Budget.IsActive: cron.ParseStandard in UTC, active for its duration), the end
// of a drain's shortest time, the registration timeout of a NodeClaim whose Node has not registered
// (nodeclaim/lifecycle/liveness.go), each step of a node's boot and each pod's start once its image is there
// (boot.go, kubelet.go), a CronJob's next schedule time (cronjobs.go), and a spot warning, its instance's reclaim and
// the end of the offering's mark (spot.go).
func (s *stepper) nextDue(now time.Time) (time.Time, bool, error) {
	due := append(s.boots.next(), s.kubelet.next()...)
	spot, err := s.spot.next(s.ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	due = append(due, spot...)
	pools := &karpv1.NodePoolList{}
	if err := s.reader.List(s.ctx, pools); err != nil {
		return time.Time{}, false, err
	}
	byName := lo.SliceToMap(pools.Items, func(np karpv1.NodePool) (string, karpv1.NodePool) { return np.Name, np })
	claims := &karpv1.NodeClaimList{}
	if err := s.reader.List(s.ctx, claims); err != nil {
		return time.Time{}, false, err
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		created, known := s.journal.created(nc.UID)
		if nc.DeletionTimestamp != nil {
			if deleted, ok := s.journal.deletedAt(nc.UID); ok && nc.Spec.TerminationGracePeriod != nil {
				due = append(due, deleted.Add(nc.Spec.TerminationGracePeriod.Duration))
			}
			// A drain lasts at least MinDrainTime of Karpenter's clock (node/termination/controller.go, awaitDrain).
			if drained := nc.StatusConditions().Get(karpv1.ConditionTypeDrained); drained != nil && drained.IsUnknown() {
				due = append(due, drained.LastTransitionTime.Add(termination.MinDrainTime))
			}
			continue
		}
		if timeout, ok := s.boots.registrationTimeout(); ok {
			if registered := nc.StatusConditions().Get(karpv1.ConditionTypeRegistered); registered != nil && !registered.IsTrue() {
				due = append(due, registered.LastTransitionTime.Add(timeout))
			}
		}
		if known && nc.Spec.ExpireAfter.Duration != nil {
			due = append(due, created.Add(*nc.Spec.ExpireAfter.Duration))
		}
		np, ok := byName[nc.Labels[karpv1.NodePoolLabelKey]]
		initialized := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized)
		if ok && np.Spec.Disruption.ConsolidateAfter.Duration != nil && initialized.IsTrue() {
			last := lo.Ternary(nc.Status.LastPodEventTime.IsZero(), initialized.LastTransitionTime.Time, nc.Status.LastPodEventTime.Time)
			due = append(due, last.Add(*np.Spec.Disruption.ConsolidateAfter.Duration))
		}
	}
	for _, np := range pools.Items {
		for _, budget := range np.Spec.Disruption.Budgets {
			if budget.Schedule == nil || budget.Duration == nil {
				continue
			}
			schedule, err := cron.ParseStandard(fmt.Sprintf("TZ=UTC %s", *budget.Schedule))
			if err != nil {
				return time.Time{}, false, fmt.Errorf("NodePool %s: budget schedule %q: %w", np.Name, *budget.Schedule, err)
			}
			length := budget.Duration.Duration
			// The window under way ends at its start plus its duration; the next one starts at the next hit.
			due = append(due, schedule.Next(now.UTC().Add(-length)).Add(length), schedule.Next(now.UTC()))
		}
	}
	cronJobs, err := s.cronJobsDue(now)
	if err != nil {
		return time.Time{}, false, err
	}
	due = append(due, cronJobs...)
	ahead := lo.Filter(due, func(t time.Time, _ int) bool { return t.After(now) })
	if len(ahead) == 0 {
		return time.Time{}, false, nil
	}
	return lo.MinBy(ahead, func(a, b time.Time) bool { return a.Before(b) }), true, nil
}
