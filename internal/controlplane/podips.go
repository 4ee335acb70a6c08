package controlplane

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// podIPs hands out the simulated pods' IPs from a prefix (podCIDR), in place of the pool behind KWOK v0.8.0's
// PodIPWith template function (overridden through controllers.Config.FuncMap; pod-ready and
// pod-image-pull-backoff call it). KWOK's pool gives two live pods one address in two ways: it starts empty in
// every process and marks a running pod's address used only when a stage plays for that pod, so after `up`
// restarts the new pods get the addresses of the pods already running (seen on v0.8.0: 6 new pods, 6 addresses
// each held twice); and it creates the pool on its first use with a Load and then a Store, so two of its stage
// workers can each create one and hand out the same first addresses. podIPs learns every pod's address from a
// watch that has synced before KWOK starts (podIPs.watch), gives a pod the address it was given before (a stage
// played again), searches for a free address onwards from the last one handed out, and frees an address when
// its pod is deleted. All methods are safe for concurrent use.
type podIPs struct {
	prefix netip.Prefix

	mu    sync.Mutex
	next  netip.Addr // where the search for a free address starts
	owner map[netip.Addr]types.UID
	byPod map[types.UID]netip.Addr
}

// newPodIPs returns an allocator over cidr's addresses but its first and last (network and broadcast). It
// returns an error for a cidr that does not parse or has fewer than 4 addresses.
func newPodIPs(cidr string) (*podIPs, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR: %w", err)
	}
	prefix = prefix.Masked()
	if prefix.Addr().BitLen()-prefix.Bits() < 2 {
		return nil, fmt.Errorf("pod CIDR %s: fewer than 2 usable addresses", cidr)
	}
	return &podIPs{prefix: prefix, next: prefix.Addr().Next(), owner: map[netip.Addr]types.UID{}, byPod: map[types.UID]netip.Addr{}}, nil
}

// usable reports whether a is one of the prefix's addresses a pod may have (not its first or last).
func (p *podIPs) usable(a netip.Addr) bool {
	if !p.prefix.Contains(a) || a == p.prefix.Addr() {
		return false
	}
	return p.prefix.Contains(a.Next()) // the last address's next is outside the prefix
}

// after returns the usable address after a, wrapping from the last to the first.
func (p *podIPs) after(a netip.Addr) netip.Addr {
	if n := a.Next(); p.usable(n) {
		return n
	}
	return p.prefix.Addr().Next()
}

// size returns how many addresses a search tries at most: the prefix's (capped at 2^24 for IPv6 prefixes).
func (p *podIPs) size() int {
	return 1 << min(p.prefix.Addr().BitLen()-p.prefix.Bits(), 24)
}

// podIPWith is the PodIPWith template function (KWOK's signature): nodeIP for a host-network pod, else the
// address pod uid holds, or a free one it now holds. It returns an error when every address is held (KWOK then
// plays the stage again later).
func (p *podIPs) podIPWith(_ string, hostNetwork bool, uid, _, _ string) (string, error) {
	if hostNetwork {
		return nodeIP, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byPod[types.UID(uid)]; ok {
		return a.String(), nil
	}
	for a, tried := p.next, 0; tried < p.size(); a, tried = p.after(a), tried+1 {
		if _, held := p.owner[a]; held {
			continue
		}
		p.hold(a, types.UID(uid))
		p.next = p.after(a)
		return a.String(), nil
	}
	return "", fmt.Errorf("no free pod IP in %s: %d held", p.prefix, len(p.owner))
}

// hold records a as uid's; an empty uid (a pod KWOK rendered without one) holds nothing by name.
func (p *podIPs) hold(a netip.Addr, uid types.UID) {
	p.owner[a] = uid
	if uid != "" {
		p.byPod[uid] = a
	}
}

// observe records pod's address as held by pod (a pod from before this process, or one KWOK just updated). An
// address another live pod already holds stays that pod's.
func (p *podIPs) observe(pod *corev1.Pod) {
	a, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || pod.Spec.HostNetwork || !p.usable(a) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, held := p.owner[a]; held {
		return
	}
	p.hold(a, pod.UID)
}

// release frees the address pod held.
func (p *podIPs) release(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byPod[pod.UID]; ok {
		delete(p.byPod, pod.UID)
		if p.owner[a] == pod.UID {
			delete(p.owner, a)
		}
	}
}

// watch follows every pod through client until ctx ends, recording the addresses pods have and freeing those of
// deleted pods. It returns once the watch has listed every pod (so that no address in use is handed out again),
// ctx's error if ctx ends first, or an error if the list takes longer than timeout. The cache keeps only each pod's name, UID, host-network flag
// and address.
func (p *podIPs) watch(ctx context.Context, client kubernetes.Interface, timeout time.Duration) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slimPod))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { p.onPod(obj, false) },
		DeleteFunc: func(obj any) { p.onPod(obj, true) },
	}); err != nil {
		return fmt.Errorf("pod IP watch: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		if ctx.Err() != nil {
			return ctx.Err() // stopped, not failed
		}
		return fmt.Errorf("pod IP watch: pods not listed within %s", timeout)
	}
	klog.FromContext(ctx).V(2).Info("Pod IPs known", "held", p.held())
	return nil
}

// onPod records or (deleted) frees obj's address; obj is a pod or a tombstone of one.
func (p *podIPs) onPod(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if deleted {
		p.release(pod)
		return
	}
	p.observe(pod)
}

// held returns how many addresses are held.
func (p *podIPs) held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.owner)
}

// slimPod is the watch's transform: a pod cut down to what podIPs reads.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion},
		Spec:       corev1.PodSpec{HostNetwork: pod.Spec.HostNetwork},
		Status:     corev1.PodStatus{PodIP: pod.Status.PodIP},
	}, nil
}
