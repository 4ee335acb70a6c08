package controlplane

import (
	"slices"
	"strings"
	"testing"
)

// TestDefaultKubeControllers pins the embedded cluster's default kube-controller-manager set (issue 22): KCM
// v1.36's own default set less its deployment and replicaset controllers, its cloud-provider controllers, node IPAM
// and the storage version migrator. A KCM upgrade that adds, renames or gates a controller fails here, so the change is reviewed.
func TestDefaultKubeControllers(t *testing.T) {
	want := []string{
		"certificatesigningrequest-approving-controller", "certificatesigningrequest-cleaner-controller",
		"certificatesigningrequest-signing-controller", "clusterrole-aggregation-controller", "cronjob-controller",
		"daemonset-controller", "device-taint-eviction-controller", "disruption-controller", "endpoints-controller",
		"endpointslice-controller", "endpointslice-mirroring-controller", "ephemeral-volume-controller",
		"garbage-collector-controller", "horizontal-pod-autoscaler-controller", "job-controller",
		"legacy-serviceaccount-token-cleaner-controller", "namespace-controller", "node-lifecycle-controller",
		"persistentvolume-attach-detach-controller", "persistentvolume-binder-controller",
		"persistentvolume-expander-controller", "persistentvolume-protection-controller",
		"persistentvolumeclaim-protection-controller", "pod-garbage-collector-controller",
		"replicationcontroller-controller", "resourceclaim-controller", "resourcequota-controller",
		"root-ca-certificate-publisher-controller", "service-cidr-controller", "serviceaccount-controller",
		"serviceaccount-token-controller", "statefulset-controller",
		"taint-eviction-controller", "ttl-after-finished-controller", "ttl-controller",
		"validatingadmissionpolicy-status-controller", "volumeattributesclass-protection-controller",
	}
	got := DefaultKubeControllers()
	if !slices.Equal(got, want) {
		t.Errorf("DefaultKubeControllers() =\n%v\nwant\n%v", got, want)
	}
	if err := checkControllers(got, false); err != nil {
		t.Errorf("checkControllers refuses the default set: %v", err)
	}
	for c := range requiredKubeControllers {
		if !slices.Contains(got, c) {
			t.Errorf("default set lacks required %q", c)
		}
	}
}

// TestParseKubeControllers: `up --kube-controllers` takes KCM's --controllers syntax against the default set, with
// aliases, and refuses what the embedded cluster cannot or must not run (issue 22).
func TestParseKubeControllers(t *testing.T) {
	def := DefaultKubeControllers()
	without := func(names ...string) []string {
		return slices.DeleteFunc(slices.Clone(def), func(c string) bool { return slices.Contains(names, c) })
	}
	tests := []struct {
		name    string
		spec    string
		want    []string
		wantErr string
	}{
		{name: "star is the default set", spec: "*", want: def},
		{name: "trim by canonical name", spec: "*,-job-controller,-cronjob-controller", want: without("job-controller", "cronjob-controller")},
		{name: "trim by alias, spaces ignored", spec: " * , -job , -horizontalpodautoscaling ", want: without("job-controller", "horizontal-pod-autoscaler-controller")},
		{name: "explicit minimal list", spec: "garbagecollector,serviceaccount,namespace",
			want: []string{"garbage-collector-controller", "namespace-controller", "serviceaccount-controller"}},
		{name: "disabled-by-default controller may be added", spec: "*,bootstrap-signer-controller", want: sortedWith(def, "bootstrap-signer-controller")},
		{name: "left-out controller may be added", spec: "*,nodeipam", want: sortedWith(def, "node-ipam-controller")},
		{name: "removing kubedeploy's own is a no-op", spec: "*,-deployment,-replicaset-controller", want: def},
		{name: "deployment refused", spec: "*,deployment", wantErr: `"deployment-controller" is never run`},
		{name: "replicaset refused by canonical name", spec: "garbagecollector,serviceaccount,replicaset-controller", wantErr: `"replicaset-controller" is never run`},
		{name: "unknown name", spec: "*,jobs", wantErr: `unknown kube controller "jobs"; known: `},
		{name: "cloud provider controller", spec: "*,service-lb-controller", wantErr: "needs a cloud provider"},
		{name: "both added and removed", spec: "*,job,-job-controller", wantErr: `"job-controller" is both added and removed`},
		{name: "garbage collector required", spec: "*,-garbagecollector", wantErr: `"garbage-collector-controller" cannot be left out`},
		{name: "empty leaves out required ones", spec: "", wantErr: "cannot be left out"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKubeControllers(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseKubeControllers(%q) = %v, %v; want error containing %q", tc.spec, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseKubeControllers(%q): %v", tc.spec, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ParseKubeControllers(%q) =\n%v\nwant\n%v", tc.spec, got, tc.want)
			}
		})
	}
}

// TestConfigRefusesUpstreamWorkloadInKubeControllers: Config.KubeControllers can never carry KCM's workload
// controllers; only the differential option starts them.
func TestConfigRefusesUpstreamWorkloadInKubeControllers(t *testing.T) {
	cfg := Config{DataDir: "/d", KubeControllers: []string{"garbage-collector-controller", "deployment-controller"}}
	cfg.Default()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"deployment-controller"`) {
		t.Fatalf("Validate() = %v, want refusal of deployment-controller", err)
	}
}

func sortedWith(list []string, extra string) []string {
	out := append(slices.Clone(list), extra)
	slices.Sort(out)
	return out
}
