package manager

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// UserAgent returns the user agent, and so the default field manager, of the
// named controller's client: "kubedeploy-<name>-controller/<version>".
func UserAgent(controller, version string) string {
	return fmt.Sprintf("kubedeploy-%s-controller/%s", controller, version)
}

// EventSource returns the event source component of the named controller, as upstream names it (CM-8).
func EventSource(controller string) string { return controller + "-controller" }

// restConfigFor is the named controller's client configuration: its user
// agent (so its field manager), the configured QPS and burst. In sharded
// mode the user agent ends with the replica's identity in parentheses (the
// field manager, the user agent up to its first "/", is unchanged), so that
// an audit log tells the replicas apart.
func (c Config) restConfigFor(controller string) *rest.Config {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.UserAgent = UserAgent(controller, c.Version)
	if c.Sharding.Enabled {
		cfg.UserAgent += " (" + c.LeaderElection.Identity + ")"
	}
	cfg.QPS = c.QPS
	cfg.Burst = c.Burst
	if c.shard != nil {
		c.shard.applyShard(cfg, controller, c.QPS, c.Burst)
	}
	return cfg
}

// clientFor builds the named controller's client, which speaks protobuf.
func (c Config) clientFor(controller string) (kubernetes.Interface, error) {
	client, _, _, err := c.clientsFor(controller, false)
	return client, err
}

// clientsFor builds the named controller's protobuf client and, when
// withDynamic, its JSON client (IM-8: rawtemplate's JSON reads of the
// Deployments and ReplicaSets whose stored form has fields kubedeploy's API
// does not know, for the shared informers and observe mode; for a
// controller, the creates of ReplicaSets and pods from such a template as
// stored, which apiclient.New(client, dynamic) sends), and returns the
// protobuf client's configuration too. All share one rate limiter, so that
// QPS and Burst limit the controller as a whole.
func (c Config) clientsFor(controller string, withDynamic bool) (kubernetes.Interface, dynamic.Interface, *rest.Config, error) {
	cfg := c.restConfigFor(controller)
	if withDynamic && cfg.RateLimiter == nil && cfg.QPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var dyn dynamic.Interface
	if withDynamic {
		var err error
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, nil, nil, fmt.Errorf("building the JSON client for the %s controller: %w", controller, err)
		}
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("building client for the %s controller: %w", controller, err)
	}
	return cs, dyn, cfg, nil
}
