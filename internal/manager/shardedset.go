package manager

import (
	"context"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/podcache"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/informerunion"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// shardedSet is a sharded replica's one ControllerSet (SH-9) and what its buckets' informers are built from:
// the controllers, the template store and the companions read union informers (informerunion.Factory; nodes
// from a plain factory), whose members are the buckets' own informers (bucketInformers).
type shardedSet struct {
	set        *ControllerSet
	unions     *informerunion.Factory
	infClient  kubernetes.Interface
	infConfig  *rest.Config
	templates  *rawtemplate.Store
	resync     time.Duration
	serverSide bool
}

// newShardedSet builds cfg's controllers (cfg.shard set) over union informers with no member; nothing runs
// before the set's Start. serverSide says whether the API server filters lists and watches by shard. The
// error is a client's, the template store's or a controller's.
func newShardedSet(ctx context.Context, cfg Config, serverSide bool) (*shardedSet, error) {
	infClient, infDynamic, infConfig, err := cfg.clientsFor("shared-informers", true)
	if err != nil {
		return nil, err
	}
	s := &shardedSet{infClient: infClient, infConfig: infConfig, resync: resyncPeriod(), serverSide: serverSide,
		templates: rawtemplate.NewStore(klog.FromContext(ctx), infDynamic)}
	base := informers.NewSharedInformerFactoryWithOptions(infClient, s.resync, informers.WithTransform(podcache.Transform))
	s.unions = informerunion.NewFactory(base)
	in := Inputs{Config: cfg, Informers: s.unions, Templates: s.templates, Creations: &podCreations{}}
	if s.set, err = newControllerSetOver(ctx, infClient, in); err != nil {
		return nil, err
	}
	return s, nil
}

// newBucketInformers builds, without starting them, bucket c's informers, as members of the set's unions: a
// factory of the bucket's own (newInformerFactory: pods slimmed, checked Deployments and ReplicaSets), listing
// and watching only its namespaces (SH-4: filtered client-side, and server-side when serverSide), running under
// ctx once started. The error is the factory's or a union's; nothing is left behind then.
func (s *shardedSet) newBucketInformers(ctx context.Context, c shard.Claim) (bucketParts, error) {
	scope := shard.Scope{Ranges: []shard.Range{c.Range}, ServerSide: s.serverSide}
	factory, err := newInformerFactory(s.infClient, s.infConfig, s.templates, s.resync, scope.ListWatch)
	if err != nil {
		return nil, err
	}
	b := &bucketInformers{bucket: c.Bucket, contains: c.Range.Contains, factory: factory, templates: s.templates,
		unions: s.unions.Unions(), members: map[informerunion.Kind]cache.SharedIndexInformer{}}
	for kind, u := range b.unions {
		inf := memberOf(factory, kind)
		if err := u.Add(c.Bucket, c.Range.Contains, inf); err != nil {
			b.leaveUnions()
			factory.Shutdown()
			return nil, err
		}
		b.members[kind] = inf
	}
	b.ctx, b.cancel = context.WithCancel(ctx)
	return b, nil
}

// memberOf returns factory's informer of kind.
func memberOf(factory informers.SharedInformerFactory, kind informerunion.Kind) cache.SharedIndexInformer {
	switch kind {
	case informerunion.Deployments:
		return factory.Apps().V1().Deployments().Informer()
	case informerunion.ReplicaSets:
		return factory.Apps().V1().ReplicaSets().Informer()
	default:
		return factory.Core().V1().Pods().Informer()
	}
}

// bucketInformers are one bucket's informers (bucketParts): a factory of their own, each a member of the
// set's union of its kind.
type bucketInformers struct {
	bucket    int
	contains  func(namespace string) bool
	factory   informers.SharedInformerFactory
	templates *rawtemplate.Store
	unions    map[informerunion.Kind]*informerunion.Informer
	members   map[informerunion.Kind]cache.SharedIndexInformer
	ctx       context.Context
	cancel    context.CancelFunc
}

// Start starts the bucket's informers.
func (b *bucketInformers) Start() { b.factory.Start(b.ctx.Done()) }

// HasSynced reports whether every informer of the bucket has synced and every handler of its union has been
// given its objects.
func (b *bucketInformers) HasSynced() bool {
	for _, u := range b.unions {
		if !u.MemberSynced(b.bucket) {
			return false
		}
	}
	return true
}

// Stop stops the bucket's informers, then takes them out of the unions (their objects reach the unions'
// handlers as deletes: the rollout metrics forget them) and forgets what the template store noted of their
// Deployments and ReplicaSets.
func (b *bucketInformers) Stop() {
	b.cancel()
	b.factory.Shutdown()
	b.leaveUnions()
	for _, kind := range []informerunion.Kind{informerunion.Deployments, informerunion.ReplicaSets} {
		if inf, ok := b.members[kind]; ok {
			for _, obj := range inf.GetStore().List() {
				b.templates.Forget(obj)
			}
		}
	}
}

// leaveUnions removes the bucket's members from the unions.
func (b *bucketInformers) leaveUnions() {
	for _, u := range b.unions {
		u.Remove(b.bucket)
	}
}

// Steady counts the steady pods of the bucket's namespaces in its caches, and those namespaces
// (shard.Running.Steady, SH-8: steadyCounts); a kind the controllers do not read counts as empty.
func (b *bucketInformers) Steady() (pods, namespaces int) {
	indexer := func(kind informerunion.Kind) cache.Indexer {
		if inf, ok := b.members[kind]; ok {
			return inf.GetIndexer()
		}
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	ix := steadyIndexers{deployments: indexer(informerunion.Deployments), replicaSets: indexer(informerunion.ReplicaSets), pods: indexer(informerunion.Pods)}
	return steadyCounts(ix, b.contains)
}

// Pods counts the bucket's cached pods and the namespaces they are in (0 without a pod informer).
func (b *bucketInformers) Pods() (pods, namespaces int) {
	inf, ok := b.members[informerunion.Pods]
	if !ok {
		return 0, 0
	}
	idx := inf.GetIndexer()
	for _, ns := range idx.ListIndexFuncValues(cache.NamespaceIndex) {
		if objs, err := idx.ByIndex(cache.NamespaceIndex, ns); err == nil && len(objs) > 0 {
			pods += len(objs)
			namespaces++
		}
	}
	return pods, namespaces
}
