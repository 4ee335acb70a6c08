package controlplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

// upstreamWorkloadControllers are KCM's own deployment and replicaset controllers (their v1.36 names in
// cmd/kube-controller-manager/names). kubedeploy replaces them; only Config.UpstreamWorkloadControllers, a
// differential-test option, starts them.
var upstreamWorkloadControllers = []string{"deployment-controller", "replicaset-controller"}

// leftOutOfDefault are the controllers kube-controller-manager runs by default that the embedded cluster leaves out
// of DefaultKubeControllers, each with the reason (cloud-provider controllers are left out as a class). A user may
// still name them in --kube-controllers.
var leftOutOfDefault = map[string]string{
	"node-ipam-controller": "KWOK gives simulated pods their IPs; node IPAM would need --allocate-node-cidrs and a cluster CIDR",
	"storage-version-migrator-controller": "its API, storagemigration.k8s.io, is not served by the embedded kube-apiserver " +
		"(off by default), and kube-controller-manager skips the controller without it",
}

// requiredKubeControllers cannot be left out of the embedded cluster, each with the reason: without them `up`
// breaks in ways a user would not connect with the flag.
var requiredKubeControllers = map[string]string{
	"garbage-collector-controller": "kubedeploy relies on it to delete a Deployment's ReplicaSets and a ReplicaSet's pods",
	"serviceaccount-controller":    "it creates every namespace's default ServiceAccount, without which no pod is admitted",
}

// DefaultKubeControllers returns, sorted, the kube-controller-manager controllers the embedded cluster runs when
// Config.KubeControllers is nil: KCM's own default set (every controller not disabled by default whose feature gates
// are on) without its deployment and replicaset controllers (kubedeploy's), its cloud-provider controllers (there is
// no cloud) and leftOutOfDefault. It reads the process's default feature gates.
func DefaultKubeControllers() []string {
	var out []string
	for name, d := range kcmapp.NewControllerDescriptors() {
		switch {
		case d.IsDisabledByDefault(), d.IsCloudProviderController(), !featureGatesOn(d.GetRequiredFeatureGates()),
			slices.Contains(upstreamWorkloadControllers, name), leftOutOfDefault[name] != "":
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// featureGatesOn reports whether every gate is enabled in the process's default feature gate.
func featureGatesOn(gates []featuregate.Feature) bool {
	for _, g := range gates {
		if !utilfeature.DefaultFeatureGate.Enabled(g) {
			return false
		}
	}
	return true
}

// ParseKubeControllers resolves spec, a comma-separated list in kube-controller-manager's --controllers syntax,
// into the sorted canonical names the embedded cluster runs: "*" is DefaultKubeControllers(), "name" adds a
// controller (one of KCM's disabled-by-default ones too), "-name" removes one; KCM's aliases ("job" for
// "job-controller") are accepted. Spaces around items are ignored. It returns an error for an unknown name, a name
// both added and removed, KCM's deployment or replicaset controller (kubedeploy's own, whatever alias), a
// cloud-provider controller or one whose feature gate is off (either would do nothing), and a list that leaves out
// a controller in requiredKubeControllers.
func ParseKubeControllers(spec string) ([]string, error) {
	descriptors := kcmapp.NewControllerDescriptors()
	aliases := kcmapp.ControllerAliases()
	enabled, added, removed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if item == "*" {
			for _, c := range DefaultKubeControllers() {
				enabled[c] = true
			}
			continue
		}
		name, remove := strings.CutPrefix(item, "-")
		canonical, err := canonicalController(name, descriptors, aliases)
		if err != nil {
			return nil, err
		}
		if remove {
			removed[canonical] = true
			continue
		}
		if err := addable(canonical, descriptors[canonical]); err != nil {
			return nil, err
		}
		added[canonical] = true
	}
	for c := range added {
		if removed[c] {
			return nil, fmt.Errorf("kube controller %q is both added and removed", c)
		}
		enabled[c] = true
	}
	for c := range removed {
		delete(enabled, c)
	}
	for _, c := range slices.Sorted(maps.Keys(requiredKubeControllers)) {
		if !enabled[c] {
			return nil, fmt.Errorf("kube controller %q cannot be left out: %s", c, requiredKubeControllers[c])
		}
	}
	return slices.Sorted(maps.Keys(enabled)), nil
}

// canonicalController returns name's canonical KCM controller name (name itself or the controller it is an alias
// of), or an error listing the known names.
func canonicalController(name string, descriptors map[string]*kcmapp.ControllerDescriptor, aliases map[string]string) (string, error) {
	if _, ok := descriptors[name]; ok {
		return name, nil
	}
	if c, ok := aliases[name]; ok {
		return c, nil
	}
	return "", fmt.Errorf("unknown kube controller %q; known: %s", name, strings.Join(slices.Sorted(maps.Keys(descriptors)), ", "))
}

// addable returns an error if the embedded cluster cannot run controller name (canonical, described by d).
func addable(name string, d *kcmapp.ControllerDescriptor) error {
	switch {
	case slices.Contains(upstreamWorkloadControllers, name):
		return fmt.Errorf("kube controller %q is never run by the embedded kube-controller-manager: kubedeploy's own controller replaces it (see --controllers)", name)
	case d.IsCloudProviderController():
		return fmt.Errorf("kube controller %q needs a cloud provider, and the embedded cluster has none", name)
	case !featureGatesOn(d.GetRequiredFeatureGates()):
		return fmt.Errorf("kube controller %q needs feature gates %v, which are off", name, d.GetRequiredFeatureGates())
	}
	return nil
}
