package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubedeploy/kubedeploy/internal/controller/apiclient"
	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/dryrun"
	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Sources are the informers a Checker reads: observe mode's shared ones (pods slimmed by podcache.Transform,
// as the controllers' own are).
type Sources struct {
	Deployments appsinformers.DeploymentInformer
	ReplicaSets appsinformers.ReplicaSetInformer
	Pods        coreinformers.PodInformer
	// Templates is what the Deployment and ReplicaSet informers (rawtemplate's, Store.Informers) noted of the
	// objects' fields kubedeploy's API does not know (IM-8): the syncs get it as the live controllers do, so
	// that they find the new ReplicaSet and name a created one (pod-template-hash) as the controller does.
	// Nil: every template is taken as typed (a cluster of kubedeploy's own version).
	Templates *rawtemplate.Store
}

// Checker runs kubedeploy's Deployment and ReplicaSet syncs (their NewSyncer entry points, the ones `rollout
// plan`'s simulator runs) on a Deployment as the informer caches show it, through a dryrun.Client whose writes
// are recorded and never sent, and reports the writes they would make as divergences. It checks one
// Deployment at a time.
type Checker struct {
	deployments, replicaSets runner.SyncFunc
	dLister                  appslisters.DeploymentLister
	rsIndexer, podIndexer    cache.Indexer
	clock                    clock.Clock
	// templates is Sources.Templates (nil: templates are typed).
	templates *rawtemplate.Store
	// client is the syncs' client: reads from the API server, writes recorded.
	client *dryrun.Client

	// mu makes checks take turns: live and client's record are the check's in progress.
	mu sync.Mutex
	// live is the Deployment and ReplicaSets the check in progress read from the caches, by
	// resource/namespace/name: what their writes apply to.
	live map[string]runtime.Object
}

// NewChecker builds a Checker over src. restConfig is the observer's: the syncs' reads that bypass the caches
// (the adoption re-checks, AD-3) go to that API server with its credentials, as do src.Templates' JSON reads of
// objects with fields kubedeploy's API does not know (IM-8); nothing else does, since the syncs' client
// (dryrun.Client) has no way to send a write. It adds the controllers' indexes to the
// informers, so call it before they start. A nil clk is the real clock. It returns the controllers'
// configuration errors or the client's.
func NewChecker(restConfig *rest.Config, src Sources, clk clock.WithTicker) (*Checker, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	cfg := rest.CopyConfig(restConfig)
	// No client-side rate limit: the few reads are the adoption re-checks, as before the writes were
	// answered in memory.
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	reads, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	c := &Checker{
		clock: clk, dLister: src.Deployments.Lister(), templates: src.Templates,
		rsIndexer: src.ReplicaSets.Informer().GetIndexer(), podIndexer: src.Pods.Informer().GetIndexer(),
	}
	c.client = dryrun.New(dryrun.Config{Reader: apiclient.New(reads, nil), Current: c.current})
	deployments, errD := deployment.NewSyncer(deployment.Config{
		Client: c.client, Recorder: discardEvents{}, Clock: clk, Templates: src.Templates,
		Deployments: src.Deployments, ReplicaSets: src.ReplicaSets, Pods: src.Pods,
	})
	replicaSets, errRS := replicaset.NewSyncer(replicaset.Config{
		Client: c.client, Recorder: discardEvents{}, Clock: clk, Templates: src.Templates, ReplicaSets: src.ReplicaSets, Pods: src.Pods,
	})
	if err := errors.Join(errD, errRS); err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	c.deployments, c.replicaSets = deployments, replicaSets
	return c, nil
}

// Report is one check of one Deployment.
type Report struct {
	// Deployment is the key checked.
	Deployment cache.ObjectName
	// Settled is whether the Deployment was settled (Settled); NotSettled says why not. Only settled
	// Deployments are synced.
	Settled    bool
	NotSettled string
	// Divergences are the writes kubedeploy would make (none expected), sorted by object and field.
	Divergences []Divergence
	// Fingerprint is the resourceVersions of the Deployment and its ReplicaSets: two reports with the same
	// fingerprint saw the same Deployment and ReplicaSets.
	Fingerprint string
}

// Check checks the Deployment key as the caches show it now: if it is settled, it runs the Deployment
// controller's sync on it and the ReplicaSet controller's on each of its ReplicaSets, all with the writes
// recorded (none sent), and returns them as divergences. A Deployment not in the cache gives an empty,
// unsettled Report. It returns an error when the caches cannot be read or a sync fails.
func (c *Checker) Check(ctx context.Context, key cache.ObjectName) (Report, error) {
	r := Report{Deployment: key}
	d, err := c.dLister.Deployments(key.Namespace).Get(key.Name)
	if err != nil {
		r.NotSettled = "not in the cache"
		return r, nil
	}
	rss, err := ownership.ByController[*appsv1.ReplicaSet](c.rsIndexer, d.UID)
	if err != nil {
		return r, fmt.Errorf("shadow: %w", err)
	}
	slices.SortFunc(rss, func(a, b *appsv1.ReplicaSet) int { return strings.Compare(a.Name, b.Name) })
	r.Fingerprint = fingerprint(d, rss)
	if why := unsettledDeployment(d, rss); why != "" {
		r.NotSettled = why
		return r, nil
	}
	var pods []*v1.Pod
	for _, rs := range rss {
		p, err := ownership.ByController[*v1.Pod](c.podIndexer, rs.UID)
		if err != nil {
			return r, fmt.Errorf("shadow: %w", err)
		}
		pods = append(pods, p...)
	}
	newRS, err := c.newReplicaSet(ctx, d, rss)
	if err != nil {
		r.NotSettled = fmt.Sprintf("its templates as stored are not read yet: %v", err)
		return r, nil
	}
	if r.Settled, r.NotSettled = settled(d, rss, newRS, pods, c.clock.Now()); !r.Settled {
		return r, nil
	}
	r.Divergences, err = c.sync(ctx, d, rss)
	return r, err
}

// newReplicaSet returns d's new ReplicaSet among rss as the controller finds it, the templates' fields
// kubedeploy's API does not know counted (IM-8): d and rss are resolved first (rawtemplate.Store.Resolve, a JSON
// read of each object whose protobuf had such fields, once), whose error it returns.
func (c *Checker) newReplicaSet(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	objs := []metav1.Object{d}
	for _, rs := range rss {
		objs = append(objs, rs)
	}
	if err := c.templates.Resolve(ctx, objs...); err != nil {
		return nil, err
	}
	return c.templates.NewReplicaSet(d, rss), nil
}

// write is one write a shadow sync made, as divergencesOf reads it.
type write struct {
	// verb is create, update, patch or delete.
	verb string
	// resource is the request's resource (deployments, replicasets, pods) and subresource the subresource
	// ("status" or "").
	resource, subresource string
	namespace, name       string
	// object is the object the write would have left (the created or updated object, the patched one), JSON;
	// nil for a delete.
	object []byte
}

// sync runs the syncs on d and rss, their writes recorded, and returns the divergences of what they wrote.
func (c *Checker) sync(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) ([]Divergence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = map[string]runtime.Object{liveKey(dryrun.Deployments, d.Namespace, d.Name): d.DeepCopy()}
	for _, rs := range rss {
		c.live[liveKey(dryrun.ReplicaSets, rs.Namespace, rs.Name)] = rs.DeepCopy()
	}
	defer func() { c.live = nil }()
	c.client.Take() // what a failed check left
	// The syncs' logs would read as decisions taken; the shadow's findings are logged by its caller.
	sctx := klog.NewContext(ctx, logr.Discard())
	if _, err := c.deployments(sctx, cache.ObjectName{Namespace: d.Namespace, Name: d.Name}); err != nil {
		return nil, fmt.Errorf("shadow: the Deployment controller's sync of %s: %w", klog.KObj(d), err)
	}
	for _, rs := range rss {
		if _, err := c.replicaSets(sctx, cache.ObjectName{Namespace: rs.Namespace, Name: rs.Name}); err != nil {
			return nil, fmt.Errorf("shadow: the ReplicaSet controller's sync of %s: %w", klog.KObj(rs), err)
		}
	}
	writes, err := writesOf(c.client.Take())
	if err != nil {
		return nil, err
	}
	return divergencesOf(writes, func(w write) []byte {
		obj, ok := c.current(w.resource, w.namespace, w.name)
		if !ok {
			return nil
		}
		b, _ := json.Marshal(obj)
		return b
	})
}

// current is the object a write of the check in progress applies to (dryrun.Config.Current): the Deployment
// or a ReplicaSet as the check read them, a pod as the cache has it.
func (c *Checker) current(resource, namespace, name string) (runtime.Object, bool) {
	if obj, ok := c.live[liveKey(resource, namespace, name)]; ok {
		return obj.DeepCopyObject(), true
	}
	if resource != dryrun.Pods {
		return nil, false
	}
	obj, ok, _ := c.podIndexer.GetByKey(namespace + "/" + name)
	if !ok {
		return nil, false
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, false
	}
	return pod.DeepCopy(), true
}

func liveKey(resource, namespace, name string) string { return resource + "/" + namespace + "/" + name }

// writesOf returns ws with their objects as JSON.
func writesOf(ws []dryrun.Write) ([]write, error) {
	out := make([]write, len(ws))
	for i, w := range ws {
		out[i] = write{verb: w.Verb, resource: w.Resource, subresource: w.Subresource, namespace: w.Namespace, name: w.Name}
		if w.Object == nil {
			continue
		}
		b, err := json.Marshal(w.Object)
		if err != nil {
			return nil, fmt.Errorf("shadow: %w", err)
		}
		out[i].object = b
	}
	return out, nil
}

// fingerprint is d's and rss's resourceVersions.
func fingerprint(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) string {
	var b strings.Builder
	b.WriteString(d.ResourceVersion)
	for _, rs := range rss {
		b.WriteString("," + rs.Name + "@" + rs.ResourceVersion)
	}
	return b.String()
}

// discardEvents is the shadow syncs' event recorder: observe mode sends no event.
type discardEvents struct{}

func (discardEvents) Event(runtime.Object, string, string, string)          {}
func (discardEvents) Eventf(runtime.Object, string, string, string, ...any) {}
func (discardEvents) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}
