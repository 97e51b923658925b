// netpol answers, for each connection it is asked about, whether Kubernetes NetworkPolicies allow it, by the policy
// engine of github.com/mattfenwick/cyclonus (pkg/matcher: BuildNetworkPolicies, Policy.IsTrafficAllowed), the
// simulator that kubernetes-sigs/network-policy-api carries on as cmd/policy-assistant. gpulab's tests feed it the
// rendered policies and pods (tests/support/reachability.py); nothing of gpulab's decides here.
//
// Input (stdin, JSON): {"policies": [NetworkPolicy...], "probes": [{"source": peer, "destination": peer, "port": n,
// "portName": "name or empty", "protocol": "TCP|UDP|SCTP"}]}, a peer being {"ip": "..."} outside the cluster or
// {"ip", "namespace", "namespaceLabels", "podLabels"} for a pod. Output (stdout, JSON): one {"ingress", "egress",
// "allowed"} per probe, in order.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

type peer struct {
	IP              string            `json:"ip"`
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	PodLabels       map[string]string `json:"podLabels"`
}

type probe struct {
	Source      peer        `json:"source"`
	Destination peer        `json:"destination"`
	Port        int         `json:"port"`
	PortName    string      `json:"portName"`
	Protocol    v1.Protocol `json:"protocol"`
}

type input struct {
	Policies []*networkingv1.NetworkPolicy `json:"policies"`
	Probes   []probe                       `json:"probes"`
}

type answer struct {
	Ingress bool `json:"ingress"`
	Egress  bool `json:"egress"`
	Allowed bool `json:"allowed"`
}

func trafficPeer(p peer) *matcher.TrafficPeer {
	if p.Namespace == "" {
		return &matcher.TrafficPeer{IP: p.IP}
	}
	return &matcher.TrafficPeer{IP: p.IP, Internal: &matcher.InternalPeer{
		Namespace: p.Namespace, NamespaceLabels: p.NamespaceLabels, PodLabels: p.PodLabels,
	}}
}

func main() {
	var in input
	decoder := json.NewDecoder(os.Stdin)
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "netpol: reading the input: %v\n", err)
		os.Exit(2)
	}
	policy := matcher.BuildNetworkPolicies(true, in.Policies)
	answers := make([]answer, 0, len(in.Probes))
	for _, p := range in.Probes {
		result := policy.IsTrafficAllowed(&matcher.Traffic{
			Source:           trafficPeer(p.Source),
			Destination:      trafficPeer(p.Destination),
			ResolvedPort:     p.Port,
			ResolvedPortName: p.PortName,
			Protocol:         p.Protocol,
		})
		answers = append(answers, answer{
			Ingress: result.Ingress.IsAllowed(),
			Egress:  result.Egress.IsAllowed(),
			Allowed: result.IsAllowed(),
		})
	}
	if err := json.NewEncoder(os.Stdout).Encode(answers); err != nil {
		fmt.Fprintf(os.Stderr, "netpol: writing the answers: %v\n", err)
		os.Exit(1)
	}
}
