package standin

// CreateFleet, answered as a lowest-price fleet would answer it where capacity is there.

import (
	"context"
	"fmt"
	"strings"
	"sync"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	instancefilter "github.com/aws/karpenter-provider-aws/pkg/providers/instance/filter"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// Launch stands in for the provider's instance provider (CreateFleet). Which type EC2 starts is EC2's decision; the
// stand-in starts the one a lowest-price fleet starts when capacity is there: the cheapest available offering of the
// NodeClaim's options for its capacity type, at the prices the cloud provider hands it (with a price NodeOverlay,
// the overlay's price, which the provider then sends EC2 as each override's priority: pkg/providers/instance/
// instance.go). The capacity type is chosen as the provider chooses it (instance.go, getCapacityType: reserved, then
// spot, when the NodeClaim allows them and an option offers them; else on-demand).
//
// It keeps the instances it started until they are deleted, as EC2 lists them (Get, List, Delete: what the
// controllers that run after a launch ask), each with the tags, AMI, subnet and security groups of its launch, so
// that the provider's drift checks compare them with the EC2NodeClass's status as it would an instance's.
type Launch struct {
	instance.Provider
	clock     clock.PassiveClock
	mu        sync.Mutex
	launched  int
	instances map[string]*instance.Instance
}

// NewLaunch starts instances at the clock's time (their LaunchTime, which the provider makes the NodeClaim's
// creation time in List and Get, as garbage collection reads it).
func NewLaunch(clk clock.PassiveClock) *Launch {
	return &Launch{clock: clk, instances: map[string]*instance.Instance{}}
}

func (l *Launch) Create(_ context.Context, nodeClass *awsv1.EC2NodeClass, nodeClaim *karpv1.NodeClaim, tags map[string]string, instanceTypes []*cloudprovider.InstanceType) (*instance.Instance, error) {
	it, offering, err := cheapestLaunch(nodeClaim, instanceTypes)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.launched++
	zone := offering.Requirements.Get(corev1.LabelTopologyZone).Any()
	arch := it.Requirements.Get(corev1.LabelArchStable).Any()
	i := &instance.Instance{
		ID:           fmt.Sprintf("i-planner%08d", l.launched),
		LaunchTime:   l.clock.Now(),
		Type:         ec2types.InstanceType(it.Name),
		Zone:         zone,
		ZoneID:       offering.Requirements.Get(awsv1.LabelTopologyZoneID).Any(),
		CapacityType: offering.CapacityType(),
		State:        ec2types.InstanceStateNameRunning,
		Tenancy:      string(ec2types.TenancyDefault),
		Tags:         tags,
		ImageID: lo.FindOrElse(nodeClass.Status.AMIs, awsv1.AMI{}, func(ami awsv1.AMI) bool {
			return lo.ContainsBy(ami.Requirements, func(r corev1.NodeSelectorRequirement) bool { return lo.Contains(r.Values, arch) })
		}).ID,
		SecurityGroupIDs: lo.Map(nodeClass.Status.SecurityGroups, func(g awsv1.SecurityGroup, _ int) string { return g.ID }),
		SubnetID:         lo.FindOrElse(nodeClass.Status.Subnets, awsv1.Subnet{}, func(s awsv1.Subnet) bool { return s.Zone == zone }).ID,
	}
	l.instances[i.ID] = i
	return i, nil
}

// Get answers as EC2 does for a running instance; a terminated one is not found, as the provider's Get makes it.
func (l *Launch) Get(_ context.Context, id string, _ ...instance.Options) (*instance.Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.instances[id]
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	return i, nil
}

func (l *Launch) List(context.Context) ([]*instance.Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lo.Values(l.instances), nil
}

// Delete terminates the instance; once terminated it is not found, which ends the NodeClaim's termination.
func (l *Launch) Delete(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.instances[id]; !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	delete(l.instances, id)
	return nil
}

// CreateTags adds tags to a running instance, as the provider's tagging controller asks EC2.
func (l *Launch) CreateTags(_ context.Context, id string, tags map[string]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.instances[id]
	if !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
	}
	i.Tags = lo.Assign(i.Tags, tags)
	return nil
}

// cheapestLaunch is the instance type and offering a launch of this NodeClaim starts (see launchStandIn): the options
// the provider's own launch filters keep (pkg/providers/instance/instance.go, filterInstanceTypes, the same filters in
// the same order; its truncation to the cheapest options cannot change the cheapest), then the cheapest available
// offering of the chosen capacity type.
func cheapestLaunch(nodeClaim *karpv1.NodeClaim, instanceTypes []*cloudprovider.InstanceType) (*cloudprovider.InstanceType, *cloudprovider.Offering, error) {
	requirements := scheduling.NewNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	for _, filter := range []instancefilter.Filter{
		instancefilter.CompatibleAvailableFilter(requirements, nodeClaim.Spec.Resources.Requests),
		instancefilter.CapacityReservationTypeFilter(requirements),
		instancefilter.CapacityBlockFilter(requirements),
		instancefilter.ReservedOfferingFilter(requirements),
		instancefilter.ExoticInstanceTypeFilter(requirements),
		instancefilter.SpotOfferingFilter(requirements),
	} {
		if instanceTypes, _ = filter.FilterReject(instanceTypes); len(instanceTypes) == 0 {
			return nil, nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("all requested instance types were unavailable during launch"))
		}
	}
	capacityType := karpv1.CapacityTypeOnDemand
	for _, ct := range []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeSpot} {
		if !requirements.Get(karpv1.CapacityTypeLabelKey).Has(ct) {
			continue
		}
		withType := scheduling.NewRequirements(requirements.Values()...)
		withType[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, ct)
		if lo.SomeBy(instanceTypes, func(it *cloudprovider.InstanceType) bool {
			return len(it.Offerings.Available().Compatible(withType)) != 0
		}) {
			capacityType = ct
			break
		}
	}
	requirements[karpv1.CapacityTypeLabelKey] = scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityType)
	var best *cloudprovider.InstanceType
	var bestOffering *cloudprovider.Offering
	for _, it := range instanceTypes {
		offerings := it.Offerings.Available().Compatible(requirements)
		if len(offerings) == 0 {
			continue
		}
		if cheapest := offerings.Cheapest(); bestOffering == nil || cheapest.Price < bestOffering.Price {
			best, bestOffering = it, cheapest
		}
	}
	if best == nil {
		names := lo.Map(instanceTypes, func(it *cloudprovider.InstanceType, _ int) string { return it.Name })
		return nil, nil, fmt.Errorf("no available %s offering among %s", capacityType, strings.Join(names, ", "))
	}
	return best, bestOffering, nil
}
