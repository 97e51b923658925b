package main

// What EC2 would answer, offline. Karpenter's AWS provider asks EC2 for instance types (DescribeInstanceTypes), where
// they are offered (DescribeInstanceTypeOfferings), and launches with CreateFleet. Here the first two are answered
// from gpulab's instance-type table plus the provider's own ENI-limit data, and the launch is a stand-in that takes
// the cheapest offering Karpenter allows. Everything Karpenter computes from these answers (allocatable, pods,
// offerings, prices, overlays, scheduling) is Karpenter's own code.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	sdk "github.com/aws/karpenter-provider-aws/pkg/aws"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	instancefilter "github.com/aws/karpenter-provider-aws/pkg/providers/instance/filter"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// EC2's names for the architectures (ProcessorInfo.SupportedArchitectures); Karpenter maps them back to
// kubernetes.io/arch (aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/labels.go, AWSToKubeArchitectures).
var ec2Architectures = map[string]ec2types.ArchitectureType{
	"amd64": ec2types.ArchitectureTypeX8664,
	"arm64": ec2types.ArchitectureTypeArm64,
}

// ec2StandIn answers the two EC2 calls instance-type discovery makes (pkg/providers/instancetype/instancetype.go,
// UpdateInstanceTypes and UpdateInstanceTypeOfferings). Any other EC2 call panics on the nil interface: the planner
// must not depend on one.
type ec2StandIn struct {
	sdk.EC2API
	infos []ec2types.InstanceTypeInfo
	zones []string
}

func newEC2StandIn(rows map[string]InstanceTypeRow, zones []string) (*ec2StandIn, error) {
	names := lo.Keys(rows)
	sort.Strings(names)
	e := &ec2StandIn{zones: zones}
	for _, name := range names {
		info, err := instanceTypeInfo(name, rows[name])
		if err != nil {
			return nil, err
		}
		e.infos = append(e.infos, info)
	}
	return e, nil
}

// instanceTypeInfo is the DescribeInstanceTypes entry of one type, with the fields NewInstanceType reads
// (aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go): vCPUs, memory and GPUs from gpulab's table
// (config/instance_types.py, which cites Karpenter's generated instance-type reference), and its instance-store NVMe,
// which an EC2NodeClass with instanceStorePolicy RAID0 makes the node's ephemeral storage; network interfaces, IPv4
// addresses per interface and hypervisor from the provider's generated VPC limits (zz_generated.vpclimits.go, the
// same data the VPC CNI's max-pods come from). Fields neither source has (CPU manufacturer and clock, EBS and network
// bandwidth, EFA) are left out: they only add labels gpulab's NodePools and overlays never select on.
func instanceTypeInfo(name string, row InstanceTypeRow) (ec2types.InstanceTypeInfo, error) {
	limits, ok := instancetype.Limits[name]
	if !ok {
		return ec2types.InstanceTypeInfo{}, fmt.Errorf("instance type %s: not in Karpenter's VPC limits "+
			"(aws/karpenter-provider-aws pkg/providers/instancetype/zz_generated.vpclimits.go)", name)
	}
	arch, ok := ec2Architectures[row.Architecture]
	if !ok {
		return ec2types.InstanceTypeInfo{}, fmt.Errorf("instance type %s: unknown architecture %q", name, row.Architecture)
	}
	cards := lo.Map(limits.NetworkCards, func(card instancetype.NetworkCard, _ int) ec2types.NetworkCardInfo {
		return ec2types.NetworkCardInfo{
			NetworkCardIndex:         aws.Int32(int32(card.NetworkCardIndex)),
			MaximumNetworkInterfaces: aws.Int32(int32(card.MaximumNetworkInterfaces)),
		}
	})
	var storage *ec2types.InstanceStorageInfo
	// The table's figure is Karpenter's instance-local-nvme label, which it sets only for NVMe instance storage.
	if row.LocalNVMeGB > 0 {
		storage = &ec2types.InstanceStorageInfo{TotalSizeInGB: aws.Int64(row.LocalNVMeGB), NvmeSupport: ec2types.EphemeralNvmeSupportRequired}
	}
	return ec2types.InstanceTypeInfo{
		InstanceType:          ec2types.InstanceType(name),
		InstanceStorageInfo:   storage,
		BareMetal:             aws.Bool(limits.IsBareMetal),
		Hypervisor:            ec2types.InstanceTypeHypervisor(limits.Hypervisor),
		SupportedUsageClasses: []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot},
		ProcessorInfo:         &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
		VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(row.VCPUs)},
		MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: aws.Int64(row.MemoryMiB)},
		GpuInfo: &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{
			// EC2 names the manufacturer "NVIDIA"; Karpenter counts nvidia.com/gpu only for that name (nvidiaGPUs).
			Name:         aws.String(row.GPU.Model),
			Manufacturer: aws.String("NVIDIA"),
			Count:        aws.Int32(row.GPU.Count),
			MemoryInfo:   &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(int32(row.GPU.MemoryMiB))},
		}}},
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces:  aws.Int32(int32(limits.Interface)),
			Ipv4AddressesPerInterface: aws.Int32(int32(limits.IPv4PerInterface)),
			DefaultNetworkCardIndex:   aws.Int32(int32(limits.DefaultNetworkCardIndex)),
			NetworkCards:              cards,
		},
	}, nil
}

func (e *ec2StandIn) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: e.infos}, nil
}

// DescribeInstanceTypeOfferings offers every type in every zone of the lab's subnets: EC2's real capacity is what the
// planner does not predict.
func (e *ec2StandIn) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	out := &ec2.DescribeInstanceTypeOfferingsOutput{}
	for _, info := range e.infos {
		for _, zone := range e.zones {
			out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{
				InstanceType: info.InstanceType, Location: aws.String(zone), LocationType: ec2types.LocationTypeAvailabilityZone,
			})
		}
	}
	return out, nil
}

// launchStandIn stands in for the provider's instance provider (CreateFleet). Which type EC2 starts is EC2's decision;
// the planner reports the one a lowest-price fleet starts when capacity is there: the cheapest available offering of
// the NodeClaim's options for its capacity type. The capacity type is chosen as the provider chooses it
// (pkg/providers/instance/instance.go, getCapacityType: reserved, then spot, when the NodeClaim allows them and an
// option offers them; else on-demand).
type launchStandIn struct {
	instance.Provider
	launched int
}

func (l *launchStandIn) Create(_ context.Context, _ *awsv1.EC2NodeClass, nodeClaim *karpv1.NodeClaim, _ map[string]string, instanceTypes []*cloudprovider.InstanceType) (*instance.Instance, error) {
	it, offering, err := cheapestLaunch(nodeClaim, instanceTypes)
	if err != nil {
		return nil, err
	}
	l.launched++
	zone := offering.Requirements.Get(corev1.LabelTopologyZone).Any()
	return &instance.Instance{
		ID:           fmt.Sprintf("i-planner%08d", l.launched),
		Type:         ec2types.InstanceType(it.Name),
		Zone:         zone,
		ZoneID:       offering.Requirements.Get(awsv1.LabelTopologyZoneID).Any(),
		CapacityType: offering.CapacityType(),
		State:        ec2types.InstanceStateNameRunning,
		Tenancy:      string(ec2types.TenancyDefault),
	}, nil
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
