package standin

// Karpenter's AWS provider over the stand-ins, wired as its operator wires it.

import (
	"context"
	"fmt"
	"sync"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/patrickmn/go-cache"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	awscloudprovider "github.com/aws/karpenter-provider-aws/pkg/cloudprovider"
	"github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/pricing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/nodeoverlay"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/gpulab/planner/render"
)

// AWS is the AWS provider's cloud provider and the providers under it, over the EC2 and launch stand-ins.
type AWS struct {
	EC2           *EC2
	Prices        *pricing.DefaultProvider
	InstanceTypes *instancetype.DefaultProvider // undecorated: the provider's own offerings and prices
	CloudProvider *awscloudprovider.CloudProvider
	Launch        *Launch
	// The offerings the provider leaves out for a while (an insufficient-capacity launch, a spot interruption: the
	// interruption controller marks them, pkg/controllers/interruption/utils.go) and its capacity reservations.
	Unavailable  *awscache.UnavailableOfferings
	Reservations capacityreservation.Provider
	kube         client.Client
	mu           sync.Mutex
	// Each EC2NodeClass's instance types as the provider lists them, undecorated: the price a node is billed at.
	listed map[string][]*cloudprovider.InstanceType
}

// NewAWS builds the provider for the instance types of the table in the zones, with its instance types and offerings
// discovered, as pkg/operator/operator.go (NewOperator) and cmd/controller/main.go build it: without a subnet
// provider (instance types never ask it) and with zonal shift off (the chart's default). The store is the NodeOverlay
// controller's, which the cloud provider applies to the instance types it launches.
func NewAWS(ctx context.Context, kube client.Client, clk clock.Clock, rows map[string]render.InstanceTypeRow, zones []string, region string,
	store *nodeoverlay.InstanceTypeStore, recorder events.Recorder) (*AWS, error) {
	ec2api, err := NewEC2(rows, zones)
	if err != nil {
		return nil, err
	}
	// The pricing provider as it starts: the generated static price list (pkg/providers/pricing/
	// zz_generated.pricing_aws.go; PricesRegion), spot priced as on-demand until a spot price update, which never
	// comes offline.
	prices := pricing.NewDefaultProvider(nil, ec2api, region, false)
	reservations := capacityreservation.NewProvider(ec2api, clk, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.CapacityReservationAvailabilityTTL, awscache.DefaultCleanupInterval))
	placementGroups := placementgroup.NewProvider(ec2api, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.PlacementGroupAvailabilityTTL, awscache.DefaultCleanupInterval))
	unavailable := awscache.NewUnavailableOfferings()
	instanceTypes := instancetype.NewDefaultProvider(
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DiscoveredCapacityCacheTTL, awscache.DefaultCleanupInterval),
		ec2api, nil, prices, reservations, placementGroups, unavailable, instancetype.NewDefaultResolver(region),
		arczonalshift.NewNoopProvider(), kube,
	)
	if err := instanceTypes.UpdateInstanceTypes(ctx); err != nil {
		return nil, err
	}
	if err := instanceTypes.UpdateInstanceTypeOfferings(ctx); err != nil {
		return nil, err
	}
	launch := NewLaunch(clk)
	provider := awscloudprovider.New(instanceTypes, launch, recorder, kube, nil, nil, reservations, placementGroups, store, nil)
	return &AWS{EC2: ec2api, Prices: prices, InstanceTypes: instanceTypes, CloudProvider: provider, Launch: launch,
		Unavailable: unavailable, Reservations: reservations, kube: kube, listed: map[string][]*cloudprovider.InstanceType{}}, nil
}

// Price is what a launched node costs an hour: its offering's price as the AWS provider lists it (the pricing
// provider's), not through the NodeOverlay decorator, where a price overlay would replace it with a number of the
// stack's own.
func (a *AWS) Price(ctx context.Context, nodeClaim *karpv1.NodeClaim) (float64, error) {
	nodeClassName := nodeClaim.Spec.NodeClassRef.Name
	a.mu.Lock()
	its, ok := a.listed[nodeClassName]
	a.mu.Unlock()
	if !ok {
		nodeClass := &awsv1.EC2NodeClass{}
		if err := a.kube.Get(ctx, types.NamespacedName{Name: nodeClassName}, nodeClass); err != nil {
			return 0, err
		}
		var err error
		if its, err = a.InstanceTypes.List(ctx, nodeClass); err != nil {
			return 0, err
		}
		a.mu.Lock()
		a.listed[nodeClassName] = its
		a.mu.Unlock()
	}
	instanceType := nodeClaim.Labels[corev1.LabelInstanceTypeStable]
	it, ok := lo.Find(its, func(it *cloudprovider.InstanceType) bool { return it.Name == instanceType })
	if !ok {
		return 0, fmt.Errorf("launched instance type %s is not among EC2NodeClass %s's", instanceType, nodeClassName)
	}
	price, ok := it.OfferingPrice(nodeClaim.Labels[corev1.LabelTopologyZone], nodeClaim.Labels[karpv1.CapacityTypeLabelKey])
	if !ok {
		return 0, fmt.Errorf("no price for %s", instanceType)
	}
	return price, nil
}

// SetSpotPrices gives each instance type in spot its price (USD an hour), as a preview recorded it from EC2's spot
// price history, and runs the pricing provider's spot price update, as its controller does every few minutes in a
// cluster: Karpenter's offerings then carry these prices, so its launch choice and the node's bill both see them.
// Once updated, the provider has no spot offering for a type without a price (pricing.go SpotPrice): a type not
// given keeps its on-demand price, as before the update.
func (a *AWS) SetSpotPrices(ctx context.Context, prices map[string]float64, at time.Time) error {
	a.EC2.spotPrices, a.EC2.spotAt = map[ec2types.InstanceType]float64{}, at
	for _, name := range a.Prices.InstanceTypes() {
		if onDemand, ok := a.Prices.OnDemandPrice(name); ok {
			a.EC2.spotPrices[name] = onDemand
		}
	}
	for name, price := range prices {
		a.EC2.spotPrices[ec2types.InstanceType(name)] = price
	}
	return a.Prices.UpdateSpotPricing(ctx)
}

// PricesRegion is the region whose prices the pricing provider starts with for a cluster in region: its own where the
// generated lists have it (v1.14.1: us-east-1, cn-north-1, us-gov-east-1 and us-gov-west-1), else us-east-1
// (pricing.go, Reset). In a cluster the pricing API's answers replace them, with the region's own.
func PricesRegion(region string) string {
	for _, list := range []map[string]map[ec2types.InstanceType]float64{
		pricing.InitialOnDemandPricesAWS, pricing.InitialOnDemandPricesUSGov, pricing.InitialOnDemandPricesCN,
	} {
		if _, ok := list[region]; ok {
			return region
		}
	}
	return "us-east-1"
}

// Zone names the zone of a subnet: offline only the subnet IDs are known, so each is taken to be its own zone.
func Zone(subnet string) string { return subnet + "-zone" }

// ResolveNodeClass gives an EC2NodeClass the status its controller would resolve from AWS (subnets, security groups,
// AMIs, instance profile), assumed to resolve: one zone per private subnet; AMI, group and profile names are
// stand-ins.
func ResolveNodeClass(nc *awsv1.EC2NodeClass, subnets []string) {
	nc.Status.Subnets = lo.Map(subnets, func(s string, _ int) awsv1.Subnet {
		return awsv1.Subnet{ID: s, Zone: Zone(s), ZoneID: Zone(s) + "-id"}
	})
	nc.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-planner"}}
	nc.Status.InstanceProfile = nc.Name + "-planner-profile"
	nc.Status.AMIs = lo.Map([]string{karpv1.ArchitectureAmd64, karpv1.ArchitectureArm64}, func(arch string, _ int) awsv1.AMI {
		return awsv1.AMI{ID: "ami-planner-" + arch, Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
		}}
	})
	conditions := nc.StatusConditions()
	for _, t := range []string{awsv1.ConditionTypeAMIsReady, awsv1.ConditionTypeSubnetsReady, awsv1.ConditionTypeSecurityGroupsReady,
		awsv1.ConditionTypeInstanceProfileReady, awsv1.ConditionTypeValidationSucceeded, awsv1.ConditionTypePlacementGroupReady,
		awsv1.ConditionTypeCapacityReservationsReady} {
		conditions.SetTrue(t)
	}
}
