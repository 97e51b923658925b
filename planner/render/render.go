// Package render reads a gpulab render directory (render/run.py): resources.json (every resource with the inputs
// the program passes), outputs.json (the stack outputs), charts/*.yaml (what each Helm release installs),
// instance-types.json (gpulab's instance-type table, domain/capacity/instance_types.py, written by planner/plan.py) and
// eks-addons.json (the EKS add-ons' DaemonSets, render/addons.py). The planner reads a render with it, and so can any
// other simulation of a gpulab cluster.
package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/samber/lo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	awsv1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
)

// Pulumi resource types of the objects the planner gives Karpenter (render/run.py writes them as the program passes
// them, with these type tokens).
const (
	nodePoolType     = "kubernetes:karpenter.sh/v1:NodePool"
	nodeClassType    = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
	nodeOverlayType  = "kubernetes:karpenter.sh/v1alpha1:NodeOverlay"
	podTemplateType  = "kubernetes:core/v1:PodTemplate"
	bufferType       = "kubernetes:autoscaling.x-k8s.io/v1beta1:CapacityBuffer"
	deploymentType   = "kubernetes:apps/v1:Deployment"
	discoveryTagType = "aws:ec2/tag:Tag"
	daemonSetType    = "kubernetes:apps/v1:DaemonSet"
	// The program's components that hold one lab's objects, each named after its lab (components/karpenter/
	// gpu_node_pool.py: EC2NodeClass, NodePool, NodeOverlays; class_seats.py: seat PodTemplate, CapacityBuffers).
	gpuNodePoolType = "gpulab:karpenter:GpuNodePool"
	classSeatsType  = "gpulab:karpenter:ClassSeats"
	// The node label that names a lab (components/labels.py LAB_LABEL): a Deployment whose pods select it (the lab's
	// smoke workload, components/nvidia/smoke_test.py) runs on that lab's nodes only.
	LabLabel = "gpulab.dev/lab"
	// The controller Deployment of the karpenter chart and its container (charts/karpenter.yaml).
	karpenterRelease    = "karpenter"
	controllerContainer = "controller"
	// The NVIDIA device plugin's release (charts/nvidia-device-plugin.yaml): its config manager picks each node's
	// profile from the ConfigMap it mounts, by the node label NODE_LABEL names, else DEFAULT_CONFIG (device plugin
	// v0.20.0, cmd/config-manager/main.go).
	devicePluginRelease = "nvidia-device-plugin"
)

// DevicePlugin is what the device plugin's config manager reads: the named profiles of its ConfigMap (each a
// device-plugin config file), the node label that selects one, and the profile a node without that label gets.
type DevicePlugin struct {
	NodeLabel string
	Default   string
	Profiles  map[string]string
	configMap string
}

// GPU is one GPU model of an instance type, as gpulab's table gives it.
type GPU struct {
	Model     string `json:"model"`
	Count     int32  `json:"count"`
	MemoryMiB int64  `json:"memoryMib"`
}

// InstanceTypeRow is one row of domain/capacity/instance_types.py, as planner/plan.py exports it.
type InstanceTypeRow struct {
	Architecture    string `json:"architecture"`
	VCPUs           int32  `json:"vcpus"`
	MemoryMiB       int64  `json:"memoryMib"`
	LocalNVMeGB     int64  `json:"localNvmeGb"`
	CPUManufacturer string `json:"cpuManufacturer"`
	CPUClockMHz     int32  `json:"cpuClockMhz"`
	GPU             GPU    `json:"gpu"`
}

// LabOutput is what the planner reads of a lab's `labs.<lab>` stack output.
type LabOutput struct {
	NodePool       string         `json:"nodePool"`
	SlicesPerGPU   int            `json:"slicesPerGpu"`
	LearnerSeats   int            `json:"learnerSeats"`
	LearnerPodSpec corev1.PodSpec `json:"learnerPodSpec"`
	Classes        []ClassOutput  `json:"classes"`
}

// ClassOutput is one of a lab's classes: the CapacityBuffer that warms it and how many seats it warms.
type ClassOutput struct {
	Buffer    string `json:"buffer"`
	Namespace string `json:"namespace"`
	WarmSeats int32  `json:"warmSeats"`
}

// Render is everything the planner reads of one render directory.
type Render struct {
	NodePools     []*karpv1.NodePool
	NodeClasses   []*awsv1.EC2NodeClass
	Overlays      []*v1alpha1.NodeOverlay
	PodTemplates  []*corev1.PodTemplate
	Buffers       []*autoscalingv1beta1.CapacityBuffer
	Deployments   []*appsv1.Deployment // the stack's own Deployments of a lab's nodes: its smoke workload
	DaemonSets    []*appsv1.DaemonSet
	ControllerEnv []corev1.EnvVar
	Subnets       []string
	Labs          map[string]LabOutput
	InstanceTypes map[string]InstanceTypeRow
	// The device plugin as the charts install it; nil when the render has no device plugin release.
	DevicePlugin *DevicePlugin
	// The lab whose component holds an object (by pointer); objects of no lab's component are in every lab's cluster.
	owners map[any]string
}

type resource struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Parent *string         `json:"parent"`
	Inputs json.RawMessage `json:"inputs"`
}

// lab is the lab whose component holds the resource, "" for none: its parent is "<type>::<lab>".
func (res resource) lab() string {
	if res.Parent == nil {
		return ""
	}
	component, name, _ := strings.Cut(*res.Parent, "::")
	if component == gpuNodePoolType || component == classSeatsType {
		return name
	}
	return ""
}

// Read reads the render in dir.
func Read(dir string) (*Render, error) {
	r := &Render{owners: map[any]string{}}
	var resources []resource
	if err := readJSON(filepath.Join(dir, "resources.json"), &resources); err != nil {
		return nil, err
	}
	for _, res := range resources {
		var err error
		switch res.Type {
		case nodePoolType:
			r.NodePools, err = appendObject(r, r.NodePools, res)
		case nodeClassType:
			r.NodeClasses, err = appendObject(r, r.NodeClasses, res)
		case nodeOverlayType:
			r.Overlays, err = appendObject(r, r.Overlays, res)
		case podTemplateType:
			r.PodTemplates, err = appendObject(r, r.PodTemplates, res)
		case bufferType:
			r.Buffers, err = appendObject(r, r.Buffers, res)
		case deploymentType:
			err = r.addDeployment(res)
		case daemonSetType:
			// The program's own DaemonSets (gpulab:metrics' dcgm-exporter): Karpenter reserves their requests on the
			// nodes they land on, as it does the charts'.
			r.DaemonSets, err = appendObject(r, r.DaemonSets, res)
		case discoveryTagType:
			// The private subnets are the ones the stack tags for Karpenter's discovery (components/discovery_tags.py).
			var tag struct {
				ResourceID string `json:"resourceId"`
			}
			err = json.Unmarshal(res.Inputs, &tag)
			if strings.HasPrefix(tag.ResourceID, "subnet-") {
				r.Subnets = append(r.Subnets, tag.ResourceID)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("resources.json: %s %s: %w", res.Type, res.Name, err)
		}
	}
	sort.Strings(r.Subnets)
	var outputs struct {
		Labs map[string]LabOutput `json:"labs"`
	}
	if err := readJSON(filepath.Join(dir, "outputs.json"), &outputs); err != nil {
		return nil, err
	}
	r.Labs = outputs.Labs
	if err := readJSON(filepath.Join(dir, "instance-types.json"), &r.InstanceTypes); err != nil {
		return nil, err
	}
	if err := r.readCharts(filepath.Join(dir, "charts")); err != nil {
		return nil, err
	}
	// The EKS add-ons' DaemonSets (render/addons.py): not Helm releases of the stack, but they run on the lab's nodes
	// too, and Karpenter reserves their requests on every node it launches as it does the charts'.
	var addons []*appsv1.DaemonSet
	if err := readJSON(filepath.Join(dir, "eks-addons.json"), &addons); err != nil {
		return nil, err
	}
	r.DaemonSets = append(r.DaemonSets, addons...)
	return r, nil
}

func readJSON(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func appendObject[T any](r *Render, list []*T, res resource) ([]*T, error) {
	obj := new(T)
	if err := json.Unmarshal(res.Inputs, obj); err != nil {
		return list, err
	}
	if lab := res.lab(); lab != "" {
		r.owners[obj] = lab
	}
	return append(list, obj), nil
}

// addDeployment keeps a Deployment whose pods select one lab's nodes, as that lab's: its pods take the lab's slices.
// Others (the stack's controllers) run on the system nodes, which Karpenter does not provision.
func (r *Render) addDeployment(res resource) error {
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(res.Inputs, d); err != nil {
		return err
	}
	if lab, ok := d.Spec.Template.Spec.NodeSelector[LabLabel]; ok {
		r.owners[d] = lab
		r.Deployments = append(r.Deployments, d)
	}
	return nil
}

// ForLab is the render as one lab's scenarios need it: the lab's own objects and those of no lab (the DaemonSets,
// the controller's settings). Another lab's NodePool cannot take this lab's pods (each lab's pods select its nodes by
// the gpulab.dev/lab label, components/learner_pod.py), and its overlays, buffers and templates concern its own
// NodePool, so leaving them out changes none of Karpenter's decisions; with them, each lab's cluster would hold every
// lab and the plan would take time in the square of the labs (tests/test_planner.py runs both ways and compares, and
// counts each lab cluster's objects against the lab's components in resources.json).
func (r *Render) ForLab(lab string) *Render {
	sub := *r
	sub.NodePools = ownedBy(r, lab, r.NodePools)
	sub.NodeClasses = ownedBy(r, lab, r.NodeClasses)
	sub.Overlays = ownedBy(r, lab, r.Overlays)
	sub.PodTemplates = ownedBy(r, lab, r.PodTemplates)
	sub.Buffers = ownedBy(r, lab, r.Buffers)
	sub.Deployments = ownedBy(r, lab, r.Deployments)
	return &sub
}

func ownedBy[T any](r *Render, lab string, objects []*T) []*T {
	return lo.Filter(objects, func(o *T, _ int) bool { owner := r.owners[o]; return owner == "" || owner == lab })
}

// Objects counts the render's objects that Karpenter is given, by kind: for ForLab's render, what one lab's
// cluster holds.
func (r *Render) Objects() map[string]int {
	return map[string]int{
		"NodePool": len(r.NodePools), "EC2NodeClass": len(r.NodeClasses), "NodeOverlay": len(r.Overlays),
		"PodTemplate": len(r.PodTemplates), "CapacityBuffer": len(r.Buffers), "Deployment": len(r.Deployments),
		"DaemonSet": len(r.DaemonSets),
	}
}

// readCharts takes the DaemonSets of every release (Karpenter decides which land on a lab's nodes) and the env of the
// Karpenter controller (its settings: feature gates, VM memory overhead, reserved ENIs ...).
func (r *Render) readCharts(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: no charts rendered; the planner needs the DaemonSets and the Karpenter controller's "+
			"settings that the charts install (render with helm and without --no-charts)", dir)
	}
	configMaps := map[string]map[string]string{}
	for _, file := range files {
		release := strings.TrimSuffix(filepath.Base(file), ".yaml")
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		decoder := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := decoder.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			switch meta.Kind {
			case "DaemonSet":
				ds := &appsv1.DaemonSet{}
				if err := yaml.Unmarshal(doc, ds); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				r.DaemonSets = append(r.DaemonSets, ds)
				if release == devicePluginRelease {
					r.readDevicePlugin(ds)
				}
			case "ConfigMap":
				if release != devicePluginRelease {
					continue
				}
				cm := &corev1.ConfigMap{}
				if err := yaml.Unmarshal(doc, cm); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				configMaps[cm.Name] = cm.Data
			case "Deployment":
				if release != karpenterRelease {
					continue
				}
				deployment := &appsv1.Deployment{}
				if err := yaml.Unmarshal(doc, deployment); err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				for _, c := range deployment.Spec.Template.Spec.Containers {
					if c.Name == controllerContainer {
						r.ControllerEnv = c.Env
					}
				}
			}
		}
	}
	if r.ControllerEnv == nil {
		return fmt.Errorf("%s: no Karpenter controller container in %s.yaml", dir, karpenterRelease)
	}
	if r.DevicePlugin != nil {
		profiles, ok := configMaps[r.DevicePlugin.configMap]
		if !ok {
			return fmt.Errorf("%s: the device plugin mounts ConfigMap %q, which %s.yaml does not hold", dir,
				r.DevicePlugin.configMap, devicePluginRelease)
		}
		r.DevicePlugin.Profiles = profiles
	}
	return nil
}

// readDevicePlugin takes the config manager's settings from a device plugin DaemonSet: the env of its containers
// (NODE_LABEL, DEFAULT_CONFIG) and the ConfigMap its volumes mount.
func (r *Render) readDevicePlugin(ds *appsv1.DaemonSet) {
	pod := ds.Spec.Template.Spec
	plugin := &DevicePlugin{}
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		for _, e := range c.Env {
			switch e.Name {
			case "NODE_LABEL":
				plugin.NodeLabel = e.Value
			case "DEFAULT_CONFIG":
				plugin.Default = e.Value
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil {
			plugin.configMap = v.ConfigMap.Name
		}
	}
	if plugin.configMap != "" {
		r.DevicePlugin = plugin
	}
}
