package main

// The scenarios of a lab and what Karpenter decides in each (plan.json; docs/planner.md says how to read it).

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
)

type Plan struct {
	Karpenter string             `json:"karpenter"`
	Labs      map[string]LabPlan `json:"labs"`
}

type LabPlan struct {
	Scenarios []Scenario `json:"scenarios"`
}

type Scenario struct {
	Name          string      `json:"name"`
	Learners      int         `json:"learners"`
	BufferSeats   int32       `json:"bufferSeats"`
	NodeClaims    []NodeClaim `json:"nodeClaims"`
	Unschedulable int         `json:"unschedulable"`
	Reason        *string     `json:"reason"`
	CostPerHour   float64     `json:"costPerHour"`
}

type NodeClaim struct {
	NodePool            string   `json:"nodePool"`
	InstanceType        string   `json:"instanceType"`
	InstanceTypeOptions []string `json:"instanceTypeOptions"`
	CapacityType        string   `json:"capacityType"`
	Pods                int      `json:"pods"`
	New                 *bool    `json:"new,omitempty"`
}

// planner runs every scenario of every lab, each in a cluster of its own that holds the lab's objects (Render.forLab),
// or every lab's with allLabs.
type planner struct {
	render  *Render
	region  string
	allLabs bool
}

func (p *planner) plan(karpenterVersion string) (*Plan, error) {
	ctx, err := controllerContext(p.render.ControllerEnv)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Karpenter: karpenterVersion, Labs: map[string]LabPlan{}}
	for _, name := range lo.Keys(p.render.Labs) {
		lab := p.render.Labs[name]
		objects := p.render
		if !p.allLabs {
			objects = p.render.forLab(name)
		}
		var scenarios []Scenario
		for _, s := range []struct {
			name     string
			learners int
		}{{"one", 1}, {"one-gpu", lab.SlicesPerGPU}, {"full", lab.LearnerSeats}, {"over", lab.LearnerSeats + 1}} {
			c, err := newCluster(ctx, objects, p.region)
			if err != nil {
				return nil, err
			}
			scenario, err := c.learners(name, lab, s.name, s.learners, nil)
			if err != nil {
				return nil, fmt.Errorf("lab %s, scenario %s: %w", name, s.name, err)
			}
			scenarios = append(scenarios, scenario)
		}
		for i, class := range lab.Classes {
			c, err := newCluster(ctx, objects, p.region)
			if err != nil {
				return nil, err
			}
			buffer, warm, err := c.buffer(class, fmt.Sprintf("class-%d-buffer", i))
			if err != nil {
				return nil, fmt.Errorf("lab %s, class %d buffer: %w", name, i, err)
			}
			// At the class start the release CronJob puts the buffer back to 0, and the learners arrive.
			if err := c.setBuffer(class.Namespace, class.Buffer, 0); err != nil {
				return nil, err
			}
			arrival, err := c.learners(name, lab, fmt.Sprintf("class-%d-arrival", i), int(class.WarmSeats), warm)
			if err != nil {
				return nil, fmt.Errorf("lab %s, class %d arrival: %w", name, i, err)
			}
			scenarios = append(scenarios, buffer, arrival)
		}
		plan.Labs[name] = LabPlan{Scenarios: scenarios}
	}
	return plan, nil
}

// learners: n of the lab's learners arrive at once, on a cluster with the given nodes (nil: none).
func (c *cluster) learners(lab string, out LabOutput, name string, n int, existing []*launched) (Scenario, error) {
	pods, err := c.addLearners(lab, out.LearnerPodSpec, 1, n)
	if err != nil {
		return Scenario{}, err
	}
	results, created, err := c.schedule()
	if err != nil {
		return Scenario{}, err
	}
	podsOn := map[string]int{}
	for _, en := range results.ExistingNodes {
		if en.NodeClaim != nil {
			podsOn[en.NodeClaim.Name] = len(en.Pods)
		}
	}
	var nodes []NodeClaim
	for _, l := range existing {
		nodes = append(nodes, l.report(podsOn[l.nodeClaim.Name], lo.ToPtr(false)))
	}
	for i, l := range created {
		var isNew *bool
		if existing != nil {
			isNew = lo.ToPtr(true)
		}
		nodes = append(nodes, l.report(len(results.NewNodeClaims[i].Pods), isNew))
	}
	return scenario(name, n, 0, nodes, append(existing, created...), pods, results), nil
}

// buffer: the class's CapacityBuffer asks for its warm seats on an empty lab, as the warm CronJob does.
func (c *cluster) buffer(class ClassOutput, name string) (Scenario, []*launched, error) {
	if err := c.setBuffer(class.Namespace, class.Buffer, class.WarmSeats); err != nil {
		return Scenario{}, nil, err
	}
	results, created, err := c.schedule()
	if err != nil {
		return Scenario{}, nil, err
	}
	nodes := lo.Map(created, func(l *launched, i int) NodeClaim { return l.report(len(results.NewNodeClaims[i].Pods), nil) })
	virtual := lo.Keys(results.PodErrors)
	for _, nc := range results.NewNodeClaims {
		virtual = append(virtual, nc.Pods...)
	}
	return scenario(name, 0, class.WarmSeats, nodes, created, virtual, results), created, nil
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

func scenario(name string, learners int, bufferSeats int32, nodes []NodeClaim, billed []*launched, pods []*corev1.Pod, results scheduling.Results) Scenario {
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if a.NodePool != b.NodePool {
			return a.NodePool < b.NodePool
		}
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		return a.Pods > b.Pods
	})
	s := Scenario{Name: name, Learners: learners, BufferSeats: bufferSeats, NodeClaims: nodes}
	// Karpenter's reason for the first pod it could not place, in the order the pods were made.
	// The provisioner schedules the pods it lists, not these objects: match them by UID.
	errs := lo.MapKeys(results.PodErrors, func(_ error, p *corev1.Pod) types.UID { return p.UID })
	failed := lo.Filter(pods, func(p *corev1.Pod, _ int) bool { _, ok := errs[p.UID]; return ok })
	sort.SliceStable(failed, func(i, j int) bool { return podIndex(failed[i]) < podIndex(failed[j]) })
	s.Unschedulable = len(failed)
	if len(failed) > 0 {
		// Karpenter joins its reasons for each NodePool in map order: sorted, the same plan reads the same.
		reasons := strings.Split(errs[failed[0].UID].Error(), "; ")
		sort.Strings(reasons)
		s.Reason = lo.ToPtr(strings.Join(reasons, "; "))
	}
	cost := lo.SumBy(billed, func(l *launched) float64 { return l.price })
	s.CostPerHour = math.Round(cost*1e6) / 1e6 // the price list's precision
	if s.NodeClaims == nil {
		s.NodeClaims = []NodeClaim{}
	}
	return s
}

// podIndex is the number at the end of a learner's or a buffer copy's name (<lab>-learner-<i>, capacity-buffer-<name>-<i>).
func podIndex(p *corev1.Pod) int {
	i, _ := strconv.Atoi(p.Name[strings.LastIndex(p.Name, "-")+1:])
	return i
}
