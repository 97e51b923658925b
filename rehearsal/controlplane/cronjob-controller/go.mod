// Kubernetes' CronJob controller on the rehearsal's simulated clock (main.go). Built by the control plane's module
// (rehearsal/controlplane/go.mod requires it through a replace of this folder), so that it links the CronJob
// controller of the release the twin runs, with that module's replaces of the k8s.io staging modules; the
// requirements below are the least it needs.
module github.com/gpulab/rehearsal/controlplane/cronjob-controller

go 1.25.0

require (
	k8s.io/api v0.34.12
	k8s.io/apimachinery v0.34.12
	k8s.io/client-go v0.34.12
	k8s.io/klog/v2 v2.130.1
	k8s.io/kubernetes v1.34.12
)
