package informerunion

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps"
	appsv1informers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	appsv1listers "k8s.io/client-go/listers/apps/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Kind names a resource whose informer a Factory makes a union of.
type Kind string

// The kinds a Factory makes unions of: the namespaced resources a shard bucket splits.
const (
	Deployments Kind = "deployments"
	ReplicaSets Kind = "replicasets"
	Pods        Kind = "pods"
)

// Factory is an informers.SharedInformerFactory whose Deployment, ReplicaSet and pod informers (through
// Apps().V1(), Core().V1() and InformerFor) are union Informers, made when first asked for; every other informer,
// Start, Shutdown and WaitForCacheSync are its base factory's (cluster-scoped resources such as nodes). The
// unions are never started: their members are run by their owner. Build it with NewFactory.
type Factory struct {
	informers.SharedInformerFactory

	mu     sync.Mutex
	unions map[Kind]*Informer
}

// NewFactory returns a Factory over base.
func NewFactory(base informers.SharedInformerFactory) *Factory {
	return &Factory{SharedInformerFactory: base, unions: map[Kind]*Informer{}}
}

// Union returns the union informer of kind, making it (with no member) the first time.
func (f *Factory) Union(kind Kind) *Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, ok := f.unions[kind]; ok {
		return u
	}
	u := New(nil)
	f.unions[kind] = u
	return u
}

// Unions returns the union informers asked for so far, by kind: those each new member group needs.
func (f *Factory) Unions() map[Kind]*Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Kind]*Informer, len(f.unions))
	for k, u := range f.unions {
		out[k] = u
	}
	return out
}

// InformerFor returns the union of obj's kind for a Deployment, ReplicaSet or pod (newFunc unused), the base
// factory's informer otherwise.
func (f *Factory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	switch obj.(type) {
	case *appsv1.Deployment:
		return f.Union(Deployments)
	case *appsv1.ReplicaSet:
		return f.Union(ReplicaSets)
	case *v1.Pod:
		return f.Union(Pods)
	}
	return f.SharedInformerFactory.InformerFor(obj, newFunc)
}

// Apps returns the base factory's apps group but for Deployments and ReplicaSets of V1.
func (f *Factory) Apps() appsinformers.Interface {
	return appsGroup{Interface: f.SharedInformerFactory.Apps(), f: f}
}

// Core returns the base factory's core group but for pods of V1.
func (f *Factory) Core() coreinformers.Interface {
	return coreGroup{Interface: f.SharedInformerFactory.Core(), f: f}
}

type appsGroup struct {
	appsinformers.Interface
	f *Factory
}

func (g appsGroup) V1() appsv1informers.Interface { return appsV1{Interface: g.Interface.V1(), f: g.f} }

type appsV1 struct {
	appsv1informers.Interface
	f *Factory
}

func (a appsV1) Deployments() appsv1informers.DeploymentInformer {
	return deploymentInformer{a.f.Union(Deployments)}
}

func (a appsV1) ReplicaSets() appsv1informers.ReplicaSetInformer {
	return replicaSetInformer{a.f.Union(ReplicaSets)}
}

type coreGroup struct {
	coreinformers.Interface
	f *Factory
}

func (g coreGroup) V1() corev1informers.Interface { return coreV1{Interface: g.Interface.V1(), f: g.f} }

type coreV1 struct {
	corev1informers.Interface
	f *Factory
}

func (c coreV1) Pods() corev1informers.PodInformer { return podInformer{c.f.Union(Pods)} }

type deploymentInformer struct{ u *Informer }

func (d deploymentInformer) Informer() cache.SharedIndexInformer { return d.u }
func (d deploymentInformer) Lister() appsv1listers.DeploymentLister {
	return appsv1listers.NewDeploymentLister(d.u.GetIndexer())
}

type replicaSetInformer struct{ u *Informer }

func (r replicaSetInformer) Informer() cache.SharedIndexInformer { return r.u }
func (r replicaSetInformer) Lister() appsv1listers.ReplicaSetLister {
	return appsv1listers.NewReplicaSetLister(r.u.GetIndexer())
}

type podInformer struct{ u *Informer }

func (p podInformer) Informer() cache.SharedIndexInformer { return p.u }
func (p podInformer) Lister() corev1listers.PodLister {
	return corev1listers.NewPodLister(p.u.GetIndexer())
}

var (
	_ cache.SharedIndexInformer       = (*Informer)(nil)
	_ cache.Indexer                   = (*indexer)(nil)
	_ informers.SharedInformerFactory = (*Factory)(nil)
)
