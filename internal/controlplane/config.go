package controlplane

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

const (
	// DefaultNodes is the number of KWOK fake nodes used when Config.Nodes is zero.
	DefaultNodes = 3
	// DefaultPodStartupDelay is used when Config.PodStartupDelay is zero.
	DefaultPodStartupDelay = time.Second
	// DefaultPodTerminationDelay is used when Config.PodTerminationDelay is zero.
	DefaultPodTerminationDelay = time.Second
	// NodePodCapacity is the number of pods each fake node accepts (its allocatable and capacity "pods").
	NodePodCapacity = 1000

	// LoopbackQPS and LoopbackBurst are the client rate limits (requests/s, requests) of the embedded
	// kube-scheduler and kube-controller-manager (the latter when Config.ControllerManagerQPS/Burst are zero).
	// Every component talks to kube-apiserver over loopback in one process, so their own defaults (scheduler
	// 50/100, controller-manager 20/30) only throttle the cluster against itself: at 50 QPS the scheduler's pod
	// bindings, not the workload controllers, bounded a 1,000-replica rollout (issue 10). KWOK's clients are
	// unthrottled already.
	LoopbackQPS   = 5000
	LoopbackBurst = 10000

	// DefaultFeatureGates are the kube-apiserver feature gates every control plane sets, in kube-apiserver's
	// --feature-gates syntax; Config.FeatureGates is applied over them. ShardedListAndWatch (alpha in Kubernetes
	// 1.36, KEP-5866) serves metav1.ListOptions.ShardSelector on LIST and WATCH, which `kubedeploy controllers
	// --sharding` needs.
	DefaultFeatureGates = "ShardedListAndWatch=true"
)

// Config configures an embedded control plane. Call Default to fill zero values and Validate before New.
type Config struct {
	// DataDir is required; it holds etcd/, pki/, logs/, kubeconfig and the lock file.
	DataDir string
	// APIPort is the kube-apiserver secure port on 127.0.0.1; 0 picks any free port.
	APIPort int
	// Nodes is the number of KWOK fake nodes (kwok-node-0 … kwok-node-N-1), each with room for NodePodCapacity pods.
	Nodes int
	// Zones is how many topology zones the nodes are spread over (issue 26): with more than 1, node i is
	// labelled topology.kubernetes.io/zone=zone-<a+i mod Zones> and topology.kubernetes.io/region=RegionName;
	// 0 or 1 labels none (one undivided cluster). At most Nodes and MaxZones.
	Zones int
	// PodStartupDelay is how long a scheduled pod waits before it becomes Running and Ready.
	PodStartupDelay time.Duration
	// PodTerminationDelay is how long a pod with a deletionTimestamp waits before it is really removed.
	PodTerminationDelay time.Duration

	// ControllerManagerQPS and ControllerManagerBurst set the embedded kube-controller-manager's client rate limit
	// (--kube-api-qps in requests/s, --kube-api-burst in requests); 0 means LoopbackQPS and LoopbackBurst. The
	// differential suite sets upstream's defaults (20 and 30, CM-6) so its reference controllers run at the same
	// rate as kubedeploy's.
	ControllerManagerQPS   float32
	ControllerManagerBurst int

	// KubeControllers are the kube-controller-manager controllers the cluster runs, by canonical name (as
	// ParseKubeControllers returns them); nil means DefaultKubeControllers(). KCM's deployment and replicaset
	// controllers are refused here: see UpstreamWorkloadControllers.
	KubeControllers []string

	// UpstreamWorkloadControllers is for differential tests only (test/differential): it makes
	// kube-controller-manager also run its own deployment and replicaset controllers, the reference
	// implementation kubedeploy's controllers are compared against. The cluster must then run none of
	// kubedeploy's controllers. `kubedeploy up` never sets it; no non-test code outside this package may.
	UpstreamWorkloadControllers bool

	// FeatureGates are kube-apiserver feature gates in its --feature-gates syntax ("A=true,B=false", gate names as
	// Kubernetes spells them), applied over DefaultFeatureGates: "ShardedListAndWatch=false" turns the default
	// off. Feature gates are process-global: kube-controller-manager and kube-scheduler of the same control plane
	// see the same values, and each Start resets every gate to its default before applying these, so a control
	// plane never inherits the gates of an earlier one in the process.
	FeatureGates string
	// AuditPolicyFile is the path of an audit policy (an audit.k8s.io/v1 Policy), kube-apiserver's
	// --audit-policy-file. It must be given together with AuditLogPath.
	AuditPolicyFile string
	// AuditLogPath is the file kube-apiserver writes the audit events the policy selects to, one JSON object per
	// line, as its --audit-log-path does: relative paths are relative to the working directory; the file
	// (mode 0600) and its directory are created if missing, appended to, and rotated at 100 MB (100 old files
	// kept). "-", which would make kube-apiserver write to standard output, is refused: that is the terminal
	// `kubedeploy up` reports on.
	AuditLogPath string
}

// Default fills zero values: Nodes DefaultNodes (3), both pod delays 1s, the controller-manager's client rate
// limit LoopbackQPS and LoopbackBurst, KubeControllers DefaultKubeControllers(). APIPort 0 stays 0 (any free
// port).
func (c *Config) Default() {
	if c.KubeControllers == nil {
		c.KubeControllers = DefaultKubeControllers()
	}
	c.ControllerManagerQPS = cmp.Or(c.ControllerManagerQPS, LoopbackQPS)
	c.ControllerManagerBurst = cmp.Or(c.ControllerManagerBurst, LoopbackBurst)
	c.Nodes = cmp.Or(c.Nodes, DefaultNodes)
	c.PodStartupDelay = cmp.Or(c.PodStartupDelay, DefaultPodStartupDelay)
	c.PodTerminationDelay = cmp.Or(c.PodTerminationDelay, DefaultPodTerminationDelay)
}

// Validate returns an error naming the first invalid field: an empty data dir, a port outside 0–65535, a
// negative or zero node count, a zone count outside 0–MaxZones or above the node count, a negative delay, QPS or
// burst, a kube controller that must never run (KCM's deployment or replicaset controller, any alias, or "*"),
// feature gates kube-apiserver would refuse (bad syntax, an unknown gate, a locked one), an audit policy file
// that cannot be read or is not a valid policy, or only one of AuditPolicyFile and AuditLogPath, or AuditLogPath
// "-". It reads AuditPolicyFile and writes nothing.
func (c Config) Validate() error {
	if err := checkControllers(c.KubeControllers, false); err != nil {
		return fmt.Errorf("kube controllers: %w", err)
	}
	if err := ValidateFeatureGates(c.FeatureGates); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	if err := checkAudit(c.AuditPolicyFile, c.AuditLogPath); err != nil {
		return err
	}
	switch {
	case c.DataDir == "":
		return errors.New("data dir must not be empty")
	case c.APIPort < 0 || c.APIPort > 65535:
		return fmt.Errorf("api port %d is out of range 0-65535", c.APIPort)
	case c.Nodes < 1:
		return fmt.Errorf("nodes must be at least 1, got %d", c.Nodes)
	case c.Nodes > 1000:
		return fmt.Errorf("nodes must be at most 1000, got %d", c.Nodes)
	case c.Zones < 0 || c.Zones > MaxZones:
		return fmt.Errorf("zones must be between 1 and %d, got %d", MaxZones, c.Zones)
	case c.Zones > c.Nodes:
		return fmt.Errorf("zones (%d) must not exceed nodes (%d): every zone needs a node", c.Zones, c.Nodes)
	case c.PodStartupDelay < 0:
		return fmt.Errorf("pod startup delay must not be negative, got %s", c.PodStartupDelay)
	case c.PodTerminationDelay < 0:
		return fmt.Errorf("pod termination delay must not be negative, got %s", c.PodTerminationDelay)
	case c.ControllerManagerQPS < 0 || c.ControllerManagerBurst < 0:
		return fmt.Errorf("controller manager QPS and burst must not be negative, got %v and %d", c.ControllerManagerQPS, c.ControllerManagerBurst)
	}
	return nil
}
