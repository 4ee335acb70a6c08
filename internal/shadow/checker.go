package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
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
	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// Sources are the informers a Checker reads: observe mode's shared ones (pods slimmed by podcache.Transform,
// as the controllers' own are).
type Sources struct {
	Deployments appsinformers.DeploymentInformer
	ReplicaSets appsinformers.ReplicaSetInformer
	Pods        coreinformers.PodInformer
}

// Checker runs kubedeploy's Deployment and ReplicaSet syncs (their NewSyncer entry points, the ones `rollout
// plan`'s simulator runs) on a Deployment as the informer caches show it, through a client whose writes are
// recorded and never sent (recordingTransport), and reports the writes they would make as divergences.
type Checker struct {
	deployments, replicaSets runner.SyncFunc
	dLister                  appslisters.DeploymentLister
	rsIndexer, podIndexer    cache.Indexer
	clock                    clock.Clock
}

// NewChecker builds a Checker over src. restConfig is the observer's: the syncs' reads that bypass the caches
// (the adoption re-checks, AD-3) go to that API server with its credentials; nothing else does. It adds the
// controllers' indexes to the informers, so call it before they start. A nil clk is the real clock. It
// returns the controllers' configuration errors or the client's.
func NewChecker(restConfig *rest.Config, src Sources, clk clock.WithTicker) (*Checker, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	cfg := rest.CopyConfig(restConfig)
	// JSON, so that recordingTransport can read the bodies; no client-side rate limit, since the writes are
	// answered in memory (a shadow ReplicaSet sync may "create" hundreds of pods).
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return recordingTransport{next: rt} })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	deployments, errD := deployment.NewSyncer(deployment.Config{
		Client: apiclient.New(client), Recorder: discardEvents{}, Clock: clk,
		Deployments: src.Deployments, ReplicaSets: src.ReplicaSets, Pods: src.Pods,
	})
	replicaSets, errRS := replicaset.NewSyncer(replicaset.Config{
		Client: apiclient.New(client), Recorder: discardEvents{}, Clock: clk, ReplicaSets: src.ReplicaSets, Pods: src.Pods,
	})
	if err := errors.Join(errD, errRS); err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	return &Checker{
		deployments: deployments, replicaSets: replicaSets, clock: clk,
		dLister:   src.Deployments.Lister(),
		rsIndexer: src.ReplicaSets.Informer().GetIndexer(), podIndexer: src.Pods.Informer().GetIndexer(),
	}, nil
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
	if r.Settled, r.NotSettled = Settled(d, rss, pods, c.clock.Now()); !r.Settled {
		return r, nil
	}
	r.Divergences, err = c.sync(ctx, d, rss)
	return r, err
}

// sync runs the syncs on d and rss with a recording and returns the divergences of what they wrote.
func (c *Checker) sync(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) ([]Divergence, error) {
	live := map[string][]byte{}
	remember := func(resource string, obj any) error {
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("shadow: %w", err)
		}
		m := obj.(interface {
			GetNamespace() string
			GetName() string
		})
		live[resource+"/"+m.GetNamespace()+"/"+m.GetName()] = b
		return nil
	}
	if err := remember("deployments", d); err != nil {
		return nil, err
	}
	for _, rs := range rss {
		if err := remember("replicasets", rs); err != nil {
			return nil, err
		}
	}
	rec := &recording{current: func(resource, namespace, name string) ([]byte, any, bool) {
		if b, ok := live[resource+"/"+namespace+"/"+name]; ok {
			return b, dataStructFor(resource), true
		}
		if resource == "pods" {
			if obj, ok, _ := c.podIndexer.GetByKey(namespace + "/" + name); ok {
				b, err := json.Marshal(obj)
				return b, dataStructFor(resource), err == nil
			}
		}
		return nil, nil, false
	}}
	// The syncs' logs would read as decisions taken; the shadow's findings are logged by its caller.
	sctx := withRecording(klog.NewContext(ctx, logr.Discard()), rec)
	if _, err := c.deployments(sctx, cache.ObjectName{Namespace: d.Namespace, Name: d.Name}); err != nil {
		return nil, fmt.Errorf("shadow: the Deployment controller's sync of %s: %w", klog.KObj(d), err)
	}
	for _, rs := range rss {
		if _, err := c.replicaSets(sctx, cache.ObjectName{Namespace: rs.Namespace, Name: rs.Name}); err != nil {
			return nil, fmt.Errorf("shadow: the ReplicaSet controller's sync of %s: %w", klog.KObj(rs), err)
		}
	}
	return divergencesOf(rec.taken(), func(w write) []byte {
		if w.resource == "pods" {
			b, _, _ := rec.current(w.resource, w.namespace, w.name)
			return b
		}
		return live[w.resource+"/"+w.namespace+"/"+w.name]
	})
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
