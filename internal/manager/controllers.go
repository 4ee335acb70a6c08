package manager

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/analysis"
	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
	"github.com/kubedeploy/kubedeploy/internal/rolloutmetrics"
)

// Controller names accepted in Config.Controllers (as kube-controller-manager's --controllers names them).
const (
	DeploymentController = "deployment"
	ReplicaSetController = "replicaset"
)

// Controller declares one controller the manager can run: everything the manager knows of it, in one value.
// The table of them (controllerTable) is the one source of KnownControllers, ValidateControllers,
// ParseControllers, the documented --controllers default and the RBAC check against deploy/.
type Controller struct {
	// Name is the controller's name as kube-controller-manager's --controllers names it ("deployment"); its
	// client's user agent is UserAgent(Name, version) and its event source EventSource(Name).
	Name string
	// Informers are the resources whose shared informers it reads; its ClusterRole must allow list and watch on
	// each (TestTableRBAC).
	Informers []schema.GroupResource
	// OptionalInformers are informers it runs without when its credentials may not list them (a ClusterRole
	// applied before it needed them).
	OptionalInformers []OptionalInformer
	// RBAC names where in deploy/ its permissions are granted.
	RBAC RBAC
	// Workers returns its number of workers from the configuration (a --concurrent-*-syncs flag, CM-1).
	Workers func(Config) int
	// New builds it from in; it asks in.Informers for the informers it reads. Its error is the controller's own.
	New func(ctx context.Context, in Inputs) (Runnable, error)
	// Companions, if set, attaches what runs over the set's informers only while this controller runs (its
	// metrics) before they start; the set runs run, if not nil, from Start until Stop, and calls stop once
	// the workers have returned. The error is the attachment's.
	Companions func(ctx context.Context, in Inputs) (run func(context.Context), stop func(), err error)
}

// OptionalInformer is an informer a controller can run without.
type OptionalInformer struct {
	Resource schema.GroupResource
	// Readable reports whether client may list Resource; it logs why not, and what to apply, when it may not.
	Readable func(ctx context.Context, client kubernetes.Interface) bool
}

// RBAC locates a controller's permissions: the ClusterRole named ClusterRole in deploy/File.
type RBAC struct {
	File        string
	ClusterRole string
}

// Runnable is a built controller: Run runs workers (a count) until ctx ends and returns once in-flight syncs
// have finished; HasSynced reports whether its informer caches have synced.
type Runnable interface {
	Run(ctx context.Context, workers int)
	HasSynced() bool
}

// Inputs are what a controller is built from: the shared pieces of its set, and its own clients and recorder.
type Inputs struct {
	// Config is the manager's configuration, defaulted and valid.
	Config Config
	// Informers is the set's shared informer factory (pods slimmed by podcache.Transform); Templates the
	// rawtemplate store attached to it (IM-8).
	Informers informers.SharedInformerFactory
	Templates *rawtemplate.Store
	// Client and Dynamic are the controller's own protobuf and JSON clients (one rate limiter), both behind
	// its apiclient.Client (Dynamic sends the IM-8 creates of templates as stored); Recorder records its events
	// as EventSource(Name). The three are nil for Companions.
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	Recorder record.EventRecorder
	// Readable says, for each OptionalInformers resource of the set's controllers, whether it may be watched.
	Readable map[schema.GroupResource]bool
	// Creations is shared by the set's controllers: the ReplicaSet controller registers its pending pod
	// creations there and the Deployment controller reads them (EX-3), whichever is built first.
	Creations *podCreations
}

// podCreations passes a set's ReplicaSet controller's pending creations (replicaset.Controller's
// PendingCreations) to its Deployment controller. Without a ReplicaSet controller in the set it counts none. It
// is set while the set is built and read only by syncs, which start after (ControllerSet.Start), so it needs no
// lock. The zero value is ready.
type podCreations struct {
	pending func(namespace, name string) int
}

// count returns the creations in flight for the ReplicaSet namespace/name, in pods (0 without a reader or
// on a nil p).
func (p *podCreations) count(namespace, name string) int {
	if p == nil || p.pending == nil {
		return 0
	}
	return p.pending(namespace, name)
}

var (
	deploymentsResource = schema.GroupResource{Group: "apps", Resource: "deployments"}
	replicaSetsResource = schema.GroupResource{Group: "apps", Resource: "replicasets"}
	podsResource        = schema.GroupResource{Resource: "pods"}
	nodesResource       = schema.GroupResource{Resource: "nodes"}
)

// controllerTable is every controller this manager can run, sorted by name.
var controllerTable = []Controller{
	{
		Name:       DeploymentController,
		Informers:  []schema.GroupResource{deploymentsResource, replicaSetsResource, podsResource},
		RBAC:       RBAC{File: "10-rbac-deployment.yaml", ClusterRole: "kubedeploy:deployment-controller"},
		Workers:    func(c Config) int { return c.ConcurrentDeploymentSyncs },
		New:        newDeploymentController,
		Companions: deploymentCompanions,
	},
	{
		Name:              ReplicaSetController,
		Informers:         []schema.GroupResource{replicaSetsResource, podsResource},
		OptionalInformers: []OptionalInformer{{Resource: nodesResource, Readable: nodesReadable}},
		RBAC:              replicaSetRBAC,
		Workers:           func(c Config) int { return c.ConcurrentReplicaSetSyncs },
		New:               newReplicaSetController,
	},
}

var replicaSetRBAC = RBAC{File: "10-rbac-replicaset.yaml", ClusterRole: "kubedeploy:replicaset-controller"}

// KnownControllers lists every controller this manager can run, sorted: the names of controllerTable.
var KnownControllers = tableNames()

func tableNames() []string {
	names := make([]string, 0, len(controllerTable))
	for _, c := range controllerTable {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names
}

// lookupController returns the table's entry for name, or false.
func lookupController(name string) (Controller, bool) {
	i := slices.IndexFunc(controllerTable, func(c Controller) bool { return c.Name == name })
	if i < 0 {
		return Controller{}, false
	}
	return controllerTable[i], true
}

// ValidateControllers returns an error for an unknown or repeated controller name.
func ValidateControllers(names []string) error {
	seen := map[string]bool{}
	for _, name := range names {
		if _, ok := lookupController(name); !ok {
			return fmt.Errorf("unknown controller %q (known: %s)", name, strings.Join(KnownControllers, ", "))
		}
		if seen[name] {
			return fmt.Errorf("controller %q is listed twice", name)
		}
		seen[name] = true
	}
	return nil
}

// ParseControllers turns a --controllers value ("deployment,replicaset", "*",
// or "" for none) into a sorted list of names. "*" means every known controller.
func ParseControllers(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
		case "*":
			out = append(out, KnownControllers...)
		default:
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// newDeploymentController builds the Deployment controller over in's informers.
func newDeploymentController(ctx context.Context, in Inputs) (Runnable, error) {
	return deployment.New(ctx, deployment.Config{
		Client:       apiclient.New(in.Client, in.Dynamic),
		Templates:    in.Templates,
		Deployments:  in.Informers.Apps().V1().Deployments(),
		ReplicaSets:  in.Informers.Apps().V1().ReplicaSets(),
		Pods:         in.Informers.Core().V1().Pods(),
		Recorder:     in.Recorder,
		Observer:     syncObserver{},
		MaxCacheWait: in.Config.MaxCacheWait,
		Slots:        in.Config.slotsFor(DeploymentController, in.Config.ConcurrentDeploymentSyncs),
		Scope:        in.Config.scopeFor(),

		StatusSyncWindow: max(0, in.Config.StatusSyncWindow),
		PendingCreations: in.Creations.count,
		Analyzer:         analysis.NewSource(in.Client, in.Config.Prometheus),
	})
}

// deploymentCompanions are the metrics that read the Deployment controller's caches while it runs:
// kubedeploy_deployment_unavailable_pods (issue 11), kubedeploy_deployment_unsupported_fields (IM-8) and the
// rollout metrics (issue 25). The error is the rollout feeder's.
func deploymentCompanions(ctx context.Context, in Inputs) (run func(context.Context), stop func(), err error) {
	stopUnavailable := rolloutmetrics.UseUnavailablePods(in.Informers, klog.FromContext(ctx))
	stopUnsupported := unsupportedFields.use(in.Templates)
	feeder, stopRollouts, err := rolloutmetrics.FeedFromInformers(ctx, in.Informers)
	if err != nil {
		stopUnsupported()
		stopUnavailable()
		return nil, nil, err
	}
	return feeder.Run, func() { stopRollouts(); stopUnsupported(); stopUnavailable() }, nil
}

// newReplicaSetController builds the ReplicaSet controller over in's informers, with the node informer (EX-4)
// only where nodes may be listed.
func newReplicaSetController(ctx context.Context, in Inputs) (Runnable, error) {
	rsCfg := replicaset.Config{
		Client:              apiclient.New(in.Client, in.Dynamic),
		Templates:           in.Templates,
		ReplicaSets:         in.Informers.Apps().V1().ReplicaSets(),
		Pods:                in.Informers.Core().V1().Pods(),
		Recorder:            in.Recorder,
		Observer:            syncObserver{},
		ExpectationsTimeout: in.Config.ExpectationsTimeout,
		MaxCacheWait:        in.Config.MaxCacheWait,
		StatusSyncWindow:    max(0, in.Config.StatusSyncWindow),
		Slots:               in.Config.slotsFor(ReplicaSetController, in.Config.ConcurrentReplicaSetSyncs),
		Scope:               in.Config.scopeFor(),
	}
	if in.Readable[nodesResource] {
		rsCfg.Nodes = in.Informers.Core().V1().Nodes()
	}
	rs, err := replicaset.New(ctx, rsCfg)
	if err != nil {
		return nil, err
	}
	if in.Creations != nil {
		in.Creations.pending = rs.PendingCreations
	}
	return rs, nil
}

// nodesReadable reports whether client may list nodes, which the ReplicaSet
// controller watches for EX-4 (kubedeploy.io/scale-down-spread). A cluster
// whose kubedeploy RBAC predates it answers 403: the controller then runs
// without the node informer (annotated ReplicaSets scale down by RS-14's
// ranking alone) and the error says what to apply, rather than waiting
// forever for a cache that cannot fill. Any other error is taken as
// transient (the informer retries), so it reports true.
func nodesReadable(ctx context.Context, client kubernetes.Interface) bool {
	_, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Error(err, "Cannot list nodes: kubedeploy.io/scale-down-spread (EX-4) is off; apply deploy/"+replicaSetRBAC.File+" to turn it on")
		return false
	}
	return true
}
