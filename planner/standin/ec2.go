// Package standin answers, offline, what AWS would: the EC2 calls Karpenter's AWS provider makes to discover instance
// types and launch them, and what the EC2NodeClass controller would resolve. Everything Karpenter computes from these
// answers (allocatable, pods, offerings, prices, overlays, scheduling) is Karpenter's own code. The planner uses it
// with a fake API server; any simulation that runs Karpenter's controllers without AWS can.
package standin

// EC2's two discovery calls (DescribeInstanceTypes, DescribeInstanceTypeOfferings), answered from gpulab's
// instance-type table plus the provider's own ENI-limit data.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/samber/lo"

	sdk "github.com/aws/karpenter-provider-aws/pkg/aws"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"

	"github.com/gpulab/planner/render"
)

// EC2's names for the architectures (ProcessorInfo.SupportedArchitectures); Karpenter maps them back to
// kubernetes.io/arch (aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/labels.go, AWSToKubeArchitectures).
var ec2Architectures = map[string]ec2types.ArchitectureType{
	"amd64": ec2types.ArchitectureTypeX8664,
	"arm64": ec2types.ArchitectureTypeArm64,
}

// EC2 answers the two EC2 calls instance-type discovery makes (pkg/providers/instancetype/instancetype.go,
// UpdateInstanceTypes and UpdateInstanceTypeOfferings). Any other EC2 call panics on the nil interface: the planner
// must not depend on one.
type EC2 struct {
	sdk.EC2API
	infos []ec2types.InstanceTypeInfo
	zones []string
	// Each type's spot price in every zone, where a preview recorded one (SetSpotPrices); none by default.
	spotPrices map[ec2types.InstanceType]float64
	spotAt     time.Time
}

// NewEC2 answers for the instance types of the table, each offered in every one of the zones.
func NewEC2(rows map[string]render.InstanceTypeRow, zones []string) (*EC2, error) {
	names := lo.Keys(rows)
	sort.Strings(names)
	e := &EC2{zones: zones}
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
// (aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go): vCPUs, memory, GPUs, the CPU's
// manufacturer and sustained clock (the instance-cpu-manufacturer and instance-cpu-sustained-clock-speed-mhz labels,
// computeRequirements) from gpulab's table (domain/capacity/instance_types.py, which cites Karpenter's generated
// instance-type reference), and its instance-store NVMe, which an EC2NodeClass with instanceStorePolicy RAID0 makes the node's
// ephemeral storage; network interfaces, IPv4 addresses per interface and hypervisor from the provider's generated VPC
// limits (zz_generated.vpclimits.go, the same data the VPC CNI's max-pods come from). Fields neither source has (EBS
// and network bandwidth, EFA) are left out: they only add labels gpulab's NodePools and overlays never select on.
func instanceTypeInfo(name string, row render.InstanceTypeRow) (ec2types.InstanceTypeInfo, error) {
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
		ProcessorInfo: &ec2types.ProcessorInfo{
			SupportedArchitectures:   []ec2types.ArchitectureType{arch},
			Manufacturer:             aws.String(row.CPUManufacturer),
			SustainedClockSpeedInGhz: aws.Float64(float64(row.CPUClockMHz) / 1000),
		},
		VCpuInfo:   &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(row.VCPUs)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(row.MemoryMiB)},
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

func (e *EC2) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: e.infos}, nil
}

// DescribeSpotPriceHistory answers the pricing provider's spot price update (pkg/providers/pricing/pricing.go
// UpdateSpotPricing) with the prices SetSpotPrices gave, one page, the same price in every zone.
func (e *EC2) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	out := &ec2.DescribeSpotPriceHistoryOutput{}
	for _, info := range e.infos {
		price, ok := e.spotPrices[info.InstanceType]
		if !ok {
			continue
		}
		for _, zone := range e.zones {
			out.SpotPriceHistory = append(out.SpotPriceHistory, ec2types.SpotPrice{
				InstanceType: info.InstanceType, AvailabilityZone: aws.String(zone), ProductDescription: ec2types.RIProductDescriptionLinuxUnix,
				SpotPrice: aws.String(strconv.FormatFloat(price, 'f', -1, 64)), Timestamp: aws.Time(e.spotAt),
			})
		}
	}
	return out, nil
}

// DescribeInstanceTypeOfferings offers every type in every zone of the lab's subnets: EC2's real capacity is what the
// planner does not predict.
func (e *EC2) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
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
