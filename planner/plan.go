package main

// The scenarios of a lab and what Karpenter decides in each (plan.json; docs/planner.md says how to read it).

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/samber/lo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"

	"github.com/gpulab/planner/karpenter"
	"github.com/gpulab/planner/render"
	"github.com/gpulab/planner/standin"
)

type Plan struct {
	Karpenter string `json:"karpenter"`
	// The stack's region, and the region whose list prices costPerHour is in (standin.PricesRegion).
	Region       string             `json:"region"`
	PricesRegion string             `json:"pricesRegion"`
	Labs         map[string]LabPlan `json:"labs"`
}

type LabPlan struct {
	// The objects Karpenter is given in the lab's cluster, by kind (render.Render.Objects).
	Objects   map[string]int `json:"objects"`
	Scenarios []Scenario     `json:"scenarios"`
}

type Scenario struct {
	Name        string `json:"name"`
	Learners    int    `json:"learners"`
	BufferSeats int32  `json:"bufferSeats"`
	// The lab's smoke workload's pods running on its nodes before the scenario begins (smokeTest).
	SmokePods int `json:"smokePods"`
	// Provisioning passes: 1 for a burst, one per learner for a trickle.
	Passes        int         `json:"passes"`
	NodeClaims    []NodeClaim `json:"nodeClaims"`
	Unschedulable int         `json:"unschedulable"`
	// Of the unschedulable pods, those the solve did not decide (Karpenter's one-minute timeout on a solve).
	Undecided int `json:"undecided"`
	// Why the planner stopped a trickle before every learner arrived (its time bound), null when it did not.
	Stopped     *string `json:"stopped"`
	Reason      *string `json:"reason"`
	CostPerHour float64 `json:"costPerHour"`
}

type NodeClaim struct {
	NodePool            string   `json:"nodePool"`
	InstanceType        string   `json:"instanceType"`
	InstanceTypeOptions []string `json:"instanceTypeOptions"`
	CapacityType        string   `json:"capacityType"`
	Pods                int      `json:"pods"`
	New                 *bool    `json:"new,omitempty"`
}

// planner runs every scenario of every lab, each in a cluster of its own that holds the lab's objects
// (render.Render.ForLab), or every lab's with allLabs.
type planner struct {
	render        *render.Render
	region        string
	allLabs       bool
	trickleBudget int
}

func (p *planner) plan(karpenterVersion string) (*Plan, error) {
	ctx, err := karpenter.ControllerContext(p.render.ControllerEnv)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Karpenter: karpenterVersion, Region: p.region, PricesRegion: standin.PricesRegion(p.region), Labs: map[string]LabPlan{}}
	for _, name := range lo.Keys(p.render.Labs) {
		objects := p.render
		if !p.allLabs {
			objects = p.render.ForLab(name)
		}
		scenarios, err := p.lab(ctx, name, p.render.Labs[name], objects)
		if err != nil {
			return nil, err
		}
		plan.Labs[name] = LabPlan{Objects: objects.ForLab(name).Objects(), Scenarios: scenarios}
	}
	return plan, nil
}

func (p *planner) lab(ctx context.Context, name string, lab render.LabOutput, objects *render.Render) ([]Scenario, error) {
	// Each scenario in a new cluster, which holds the lab's smoke workload running when the lab has one.
	run := func(scenario string, play func(c *cluster, smoke int) (Scenario, error)) (Scenario, error) {
		c, err := newCluster(ctx, objects, p.region)
		if err != nil {
			return Scenario{}, err
		}
		c.trickleBudget = p.trickleBudget
		// The lab's own smoke workload only: among every lab (-all-labs), another lab's runs on that lab's nodes.
		smoke, err := c.smoke(p.render.ForLab(name).Deployments)
		if err != nil {
			return Scenario{}, fmt.Errorf("lab %s, scenario %s, smoke workload: %w", name, scenario, err)
		}
		s, err := play(c, smoke)
		if err != nil {
			return Scenario{}, fmt.Errorf("lab %s, scenario %s: %w", name, scenario, err)
		}
		return s, nil
	}
	var scenarios []Scenario
	for _, s := range []struct {
		name     string
		learners int
	}{{"one", 1}, {"one-gpu", lab.SlicesPerGPU}} {
		scenario, err := run(s.name, func(c *cluster, smoke int) (Scenario, error) {
			return c.learners(name, lab, s.name, s.learners, false, smoke, c.snapshot())
		})
		if err != nil {
			return nil, err
		}
		scenarios = append(scenarios, scenario)
	}
	// The full lab, and one learner more arriving at it: Karpenter should refuse that one for the NodePool's limit.
	var full Scenario
	over, err := run("full", func(c *cluster, smoke int) (Scenario, error) {
		existing := c.snapshot()
		var err error
		if full, err = c.learners(name, lab, "full", lab.LearnerSeats, false, smoke, existing); err != nil {
			return Scenario{}, err
		}
		return c.learners(name, lab, "over", 1, false, smoke, existing)
	})
	if err != nil {
		return nil, err
	}
	trickle, err := run("full-trickle", func(c *cluster, smoke int) (Scenario, error) {
		return c.learners(name, lab, "full-trickle", lab.LearnerSeats, true, smoke, c.snapshot())
	})
	if err != nil {
		return nil, err
	}
	scenarios = append(scenarios, full, trickle, over)
	for i, class := range lab.Classes {
		var buffer Scenario
		arrival, err := run(fmt.Sprintf("class-%d", i), func(c *cluster, smoke int) (Scenario, error) {
			var err error
			if buffer, err = c.buffer(class, fmt.Sprintf("class-%d-buffer", i), smoke); err != nil {
				return Scenario{}, err
			}
			// At the class start the release CronJob puts the buffer back to 0, and the learners arrive.
			if err := c.setBuffer(class.Namespace, class.Buffer, 0); err != nil {
				return Scenario{}, err
			}
			return c.learners(name, lab, fmt.Sprintf("class-%d-arrival", i), int(class.WarmSeats), false, smoke, c.snapshot())
		})
		if err != nil {
			return nil, err
		}
		scenarios = append(scenarios, buffer, arrival)
	}
	return scenarios, nil
}

// smoke runs the lab's smoke workload (its Deployments' replicas, as their ReplicaSets make them) for the scenario to
// begin with: one pass, its pods bound to the nodes it launched. It returns how many pods run.
func (c *cluster) smoke(deployments []*appsv1.Deployment) (int, error) {
	var pods []*corev1.Pod
	for _, d := range deployments {
		made, err := c.addPods(d.Namespace, d.Name, d.Spec.Template.Labels, d.Spec.Template.Spec, 0, int(lo.FromPtr(d.Spec.Replicas)))
		if err != nil {
			return 0, err
		}
		pods = append(pods, made...)
	}
	if len(pods) == 0 {
		return 0, nil
	}
	p, err := c.schedule()
	if err != nil {
		return 0, err
	}
	return len(pods) - len(p.errors), nil
}

// learners: n of the lab's learners arrive, all in one provisioning pass or, in a trickle, each once the one before it
// is bound, as the learners of a class do (a learner Karpenter could not place waits for the next pass, as a pending
// pod does).
//
// In a trickle, a learner that fits a node that is there never reaches Karpenter in a cluster (kube-scheduler binds it),
// and one that does not is Karpenter's alone to decide. So the learners that the nodes have slices for arrive together
// with the next one (cluster.room): when Karpenter puts all but at most one of them on the nodes there and launches a
// node for that one, each learner got the same answer a pass of its own gives, in one pass per node. When it would
// launch for more than one (CPU or memory ran out before the slices), the learners it placed on the nodes there stay,
// the others had not arrived yet, and the next learner arrives alone.
func (c *cluster) learners(lab string, out render.LabOutput, name string, n int, trickle bool, smoke int, existing []*launched) (Scenario, error) {
	goal := len(c.learnerPods) + n
	var last *pass
	var stopped *string
	passes, alone, work := 0, false, 0
	for len(c.learnerPods) < goal {
		if trickle && work > c.trickleBudget {
			stopped = lo.ToPtr(fmt.Sprintf("stopped after %d of %d learners: each provisioning pass considers every node "+
				"of the lab (Karpenter's Scheduler.calculateExistingNodeClaims), so a trickle takes time in the square of "+
				"its nodes, and this one outgrew the planner's budget of %d nodes considered (-trickle-budget)",
				len(c.learnerPods), goal, c.trickleBudget))
			break
		}
		batch := goal - len(c.learnerPods)
		if trickle {
			batch = lo.Ternary(alone, 1, min(batch, c.room(out.LearnerPodSpec)+1))
		}
		// Numbered on from every learner made, withdrawn ones too: Karpenter orders like pods by UID (queue.go,
		// byCPUAndMemoryDescending), so learner-10 comes before learner-8, and the ones a pass put on the nodes there
		// need not be the first of its batch.
		arrived, err := c.addPods("default", lab+"-learner", map[string]string{"app": "learner"}, out.LearnerPodSpec, c.learnersMade+1, batch)
		if err != nil {
			return Scenario{}, err
		}
		c.learnersMade += batch
		work += len(c.nodes)
		results, err := c.provisioner.Schedule(c.ctx)
		if err != nil {
			return Scenario{}, err
		}
		passes++
		launching := lo.SumBy(results.NewNodeClaims, func(nc *scheduling.NodeClaim) int { return len(nc.Pods) })
		alone = trickle && batch > 1 && launching > 1
		if last, err = c.commit(results, !alone); err != nil {
			return Scenario{}, err
		}
		if alone {
			notYet := lo.Filter(arrived, func(p *corev1.Pod, _ int) bool { _, bound := c.boundTo[p.UID]; return !bound })
			if err := c.withdraw(notYet); err != nil {
				return Scenario{}, err
			}
			arrived = lo.Without(arrived, notYet...)
		}
		c.learnerPods = append(c.learnerPods, arrived...)
	}
	placed := map[*launched]int{}
	for _, p := range c.learnerPods {
		if l, bound := c.boundTo[p.UID]; bound {
			placed[l]++
		}
	}
	s, err := c.scenario(name, len(c.learnerPods), 0, smoke, passes, existing, placed, c.learnerPods, last)
	s.Stopped = stopped
	return s, err
}

// buffer: the class's CapacityBuffer asks for its warm seats on an empty lab, as the warm CronJob does.
func (c *cluster) buffer(class render.ClassOutput, name string, smoke int) (Scenario, error) {
	existing := c.snapshot()
	if err := c.setBuffer(class.Namespace, class.Buffer, class.WarmSeats); err != nil {
		return Scenario{}, err
	}
	virtual := c.virtualPods.GetAll(c.ctx)
	if len(virtual) != int(class.WarmSeats) {
		return Scenario{}, fmt.Errorf("CapacityBuffer %s/%s: Karpenter's buffer controller made %d virtual pods for %d warm seats",
			class.Namespace, class.Buffer, len(virtual), class.WarmSeats)
	}
	p, err := c.schedule()
	if err != nil {
		return Scenario{}, err
	}
	placed := lo.MapValues(p.placed, func(pods []*corev1.Pod, _ *launched) int { return len(pods) })
	return c.scenario(name, 0, class.WarmSeats, smoke, 1, existing, placed, virtual, p)
}

// scenario reports what Karpenter decided for the pods asked: the lab's nodes with the pods placed on each, the pods it
// could not place and why, the cost. Every pod asked is placed, refused, or undecided (the solve stopped at its
// timeout): a pod counted twice or not at all fails the scenario.
func (c *cluster) scenario(name string, learners int, bufferSeats int32, smoke, passes int, existing []*launched,
	placed map[*launched]int, asked []*corev1.Pod, last *pass) (Scenario, error) {
	s := Scenario{Name: name, Learners: learners, BufferSeats: bufferSeats, SmokePods: smoke, Passes: passes, NodeClaims: []NodeClaim{}}
	wasThere := lo.SliceToMap(existing, func(l *launched) (*launched, bool) { return l, true })
	total := 0
	for _, l := range c.nodes {
		var isNew *bool
		if len(existing) > 0 {
			isNew = lo.ToPtr(!wasThere[l])
		}
		s.NodeClaims = append(s.NodeClaims, l.report(placed[l], isNew))
		total += placed[l]
	}
	sort.SliceStable(s.NodeClaims, func(i, j int) bool {
		a, b := s.NodeClaims[i], s.NodeClaims[j]
		if a.NodePool != b.NodePool {
			return a.NodePool < b.NodePool
		}
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		return a.Pods > b.Pods
	})
	// The pods not placed, in the order they were made: Karpenter's reason for the first of them.
	isPlaced := func(p *corev1.Pod) bool { _, bound := c.boundTo[p.UID]; return bound }
	if bufferSeats > 0 { // virtual pods are never bound: the pass placed them
		inPass := lo.Keyify(last.placedUIDs())
		isPlaced = func(p *corev1.Pod) bool { _, ok := inPass[p.UID]; return ok }
	}
	notPlaced := lo.Reject(asked, func(p *corev1.Pod, _ int) bool { return isPlaced(p) })
	sort.SliceStable(notPlaced, func(i, j int) bool { return podIndex(notPlaced[i]) < podIndex(notPlaced[j]) })
	refused := lo.Filter(notPlaced, func(p *corev1.Pod, _ int) bool { _, ok := last.errors[p.UID]; return ok })
	s.Unschedulable, s.Undecided = len(notPlaced), len(notPlaced)-len(refused)
	if total+s.Unschedulable != len(asked) {
		return Scenario{}, fmt.Errorf("karpenter placed %d and left %d unplaced of the %d pods asked", total, s.Unschedulable, len(asked))
	}
	if len(refused) > 0 {
		// Karpenter joins its reasons for each NodePool in map order: sorted, the same plan reads the same.
		reasons := strings.Split(last.errors[refused[0].UID].Error(), "; ")
		sort.Strings(reasons)
		s.Reason = lo.ToPtr(strings.Join(reasons, "; "))
	} else if s.Undecided > 0 {
		s.Reason = lo.ToPtr(fmt.Sprintf("not decided: Karpenter's solve stopped at its timeout with %d pods left", s.Undecided))
	}
	cost := lo.SumBy(c.nodes, func(l *launched) float64 { return l.price })
	s.CostPerHour = math.Round(cost*1e6) / 1e6 // the price list's precision
	return s, nil
}

func (l *launched) report(pods int, isNew *bool) NodeClaim {
	return NodeClaim{
		NodePool:            l.nodeClaim.Labels[karpv1.NodePoolLabelKey],
		InstanceType:        l.nodeClaim.Labels[corev1.LabelInstanceTypeStable],
		InstanceTypeOptions: l.options,
		CapacityType:        l.nodeClaim.Labels[karpv1.CapacityTypeLabelKey],
		Pods:                pods,
		New:                 isNew,
	}
}

func (p *pass) placedUIDs() []types.UID {
	return lo.FlatMap(lo.Values(p.placed), func(pods []*corev1.Pod, _ int) []types.UID {
		return lo.Map(pods, func(p *corev1.Pod, _ int) types.UID { return p.UID })
	})
}

// podIndex is the number at the end of a learner's or a buffer copy's name (<lab>-learner-<i>, capacity-buffer-<name>-<i>).
func podIndex(p *corev1.Pod) int {
	i, _ := strconv.Atoi(p.Name[strings.LastIndex(p.Name, "-")+1:])
	return i
}
