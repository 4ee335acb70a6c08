package simulator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubedeploy/kubedeploy/internal/controller/dryrun"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// simulatedNode is the one node every simulated pod runs on: RS-14's
// per-node rank then ties, as on a one-node cluster.
const simulatedNode = "simulated-node"

// defaultStart is the simulated wall-clock time of the change when no pod
// says what time it is; any fixed time works, plans report times relative
// to it.
var defaultStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// podTimes is when a simulated pod turns Ready and, once deleted, is gone,
// as offsets from the cluster's start; a failing pod never turns Ready
// (failing.go).
type podTimes struct {
	readyAt time.Duration
	fails   bool
	deleted bool
	goneAt  time.Duration
}

// cluster is the in-memory API server (an object tracker, which the
// controllers reach through a dryrun.Client whose OnWrite does what the API
// server and a kubelet would) and the caches the controllers' syncs read,
// which observe fills from it.
type cluster struct {
	ctx context.Context
	cfg Config
	// start is the wall-clock time of the change; now is the simulated time
	// since.
	start time.Time
	now   time.Duration
	clock *clocktesting.FakeClock
	// client is the controllers' client: reads from tracker, writes applied
	// to it by onWrite.
	client *dryrun.Client
	// tracker stores the objects: client-go's plain object tracker (its
	// field-managing variant builds a REST mapper on every write: 20 times
	// slower at 1,000 pods).
	tracker clienttesting.ObjectTracker
	// factory's informers never run (they have no client): observe puts
	// objects in their indexers.
	factory informers.SharedInformerFactory
	pods    map[types.UID]*podTimes
	nextID  int
	// writes counts the writes applied (create, update, patch, delete).
	writes int
	// deleted names the pods deleted since the last takeDeleted.
	deleted []string
	// placement, when not nil, binds new pods across topology domains (EX-4); nil binds them all to
	// simulatedNode.
	placement *placement
	// resized are the ReplicaSets as each spec write (not status) left them,
	// in order, since the last takeResized.
	resized []*appsv1.ReplicaSet
	// failing holds, by ReplicaSet UID, a failing pod of each ReplicaSet
	// whose template fails: every pod started for it fails as that one does
	// (failing.go).
	failing map[types.UID]*v1.Pod
}

func newCluster(ctx context.Context, cfg Config, start time.Time, objs ...runtime.Object) (*cluster, error) {
	c := &cluster{ctx: ctx, cfg: cfg, start: start, clock: clocktesting.NewFakeClock(start), pods: map[types.UID]*podTimes{}, failing: map[types.UID]*v1.Pod{}}
	c.tracker = clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	for _, obj := range objs {
		if err := c.tracker.Add(obj); err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
	}
	c.client = dryrun.New(dryrun.Config{Reader: world{c.tracker}, Current: world{c.tracker}.current, OnWrite: c.onWrite})
	c.factory = informers.NewSharedInformerFactory(nil, 0)
	return c, nil
}

// advance moves the simulated time to now (an offset from start).
func (c *cluster) advance(now time.Duration) {
	c.now = now
	c.clock.SetTime(c.start.Add(now))
}

// onWrite applies a write the controllers made to the tracker, doing what
// the API server and a kubelet would on the way: a created ReplicaSet gets
// its UID (onCreateReplicaSet), a created pod is named and started
// (startPod), a deleted pod terminates (deletePod); a ReplicaSet as a spec
// write leaves it is kept (see takeResized).
func (c *cluster) onWrite(w *dryrun.Write) error {
	c.writes++
	gvr := resourceOf[w.Resource]
	switch w.Verb {
	case dryrun.VerbCreate:
		switch obj := w.Object.(type) {
		case *appsv1.ReplicaSet:
			c.onCreateReplicaSet(obj)
		case *v1.Pod:
			c.startPod(obj, c.now+c.cfg.PodStartup)
		}
		return c.tracker.Create(gvr, w.Object, w.Namespace)
	case dryrun.VerbDelete:
		if w.Resource == dryrun.Pods {
			return c.deletePod(w.Namespace, w.Name)
		}
		return c.tracker.Delete(gvr, w.Namespace, w.Name)
	}
	if err := c.tracker.Update(gvr, w.Object, w.Namespace); err != nil {
		return err
	}
	if rs, ok := w.Object.(*appsv1.ReplicaSet); ok && w.Subresource == "" {
		c.resized = append(c.resized, rs.DeepCopy())
	}
	return nil
}

// takeResized returns the ReplicaSets as the spec writes since it was last
// called left them, in order: the states a ReplicaSet controller that syncs
// after each write sees, which one sync of the Deployment controller (two
// writes when it cleans up unhealthy replicas and then scales down, RU-12)
// runs past.
func (c *cluster) takeResized() []*appsv1.ReplicaSet {
	out := c.resized
	c.resized = nil
	return out
}

// onCreateReplicaSet gives a created ReplicaSet what the API server would:
// a UID, a creation time, a resourceVersion and a generation.
func (c *cluster) onCreateReplicaSet(rs *appsv1.ReplicaSet) {
	c.nextID++
	rs.UID = types.UID("simulated-new-rs-" + strconv.Itoa(c.nextID))
	rs.CreationTimestamp = metav1.NewTime(c.clock.Now())
	rs.ResourceVersion = "1"
	rs.Generation = 1
}

// startPod fills pod as the API server, the scheduler and the kubelet would
// for a pod created now, Ready at readyAt (Ready already when readyAt is not
// after now), or failing for good when its ReplicaSet's template fails
// (failLike).
func (c *cluster) startPod(pod *v1.Pod, readyAt time.Duration) {
	c.nextID++
	if pod.Name == "" {
		pod.Name = pod.GenerateName + "sim" + strconv.Itoa(c.nextID)
	}
	pod.UID = types.UID("simulated-pod-" + strconv.Itoa(c.nextID))
	pod.ResourceVersion = "1"
	if pod.CreationTimestamp.IsZero() {
		pod.CreationTimestamp = metav1.NewTime(c.clock.Now())
	}
	pod.Spec.NodeName = simulatedNode
	if c.placement != nil {
		pod.Spec.NodeName = c.placement.node(pod, c.podsOf(pod.Namespace))
	}
	pod.Status.Phase = v1.PodRunning
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: pod.CreationTimestamp}}
	c.pods[pod.UID] = &podTimes{readyAt: readyAt}
	if ref := metav1.GetControllerOf(pod); ref != nil && c.failing[ref.UID] != nil {
		failLike(pod, c.failing[ref.UID])
		c.pods[pod.UID].fails = true
		return
	}
	if readyAt <= c.now {
		setReady(pod, c.start.Add(readyAt))
	}
}

// podsOf returns the pods stored in namespace ns (the simulated Deployment's), nil when they cannot be read.
func (c *cluster) podsOf(ns string) []*v1.Pod {
	list, err := world{c.tracker}.ListPods(c.ctx, ns, labels.Everything())
	if err != nil {
		return nil
	}
	return rolloutstate.Items(list.Items)
}

// deletePod makes a deleted pod Terminating for PodTermination (gone at
// once without one), as a kubelet honouring a grace period would.
func (c *cluster) deletePod(namespace, name string) error {
	obj, err := c.tracker.Get(podsResource, namespace, name)
	if err != nil {
		return err
	}
	pod := obj.(*v1.Pod).DeepCopy()
	if pod.DeletionTimestamp == nil {
		c.deleted = append(c.deleted, pod.Name)
	}
	times := c.pods[pod.UID]
	if c.cfg.PodTermination <= 0 || times == nil {
		delete(c.pods, pod.UID)
		return c.tracker.Delete(podsResource, namespace, name)
	}
	if pod.DeletionTimestamp == nil {
		now := metav1.NewTime(c.clock.Now())
		pod.DeletionTimestamp = &now
		times.deleted, times.goneAt = true, c.now+c.cfg.PodTermination
	}
	return c.tracker.Update(podsResource, pod, pod.Namespace)
}

// setReady marks pod Ready since at, replacing its Ready and
// ContainersReady conditions.
func setReady(pod *v1.Pod, at time.Time) {
	pod.Status.Conditions = slices.DeleteFunc(pod.Status.Conditions, func(c v1.PodCondition) bool {
		return c.Type == v1.PodReady || c.Type == v1.ContainersReady
	})
	pod.Status.Conditions = append(pod.Status.Conditions,
		v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)},
		v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
}

// kubelet makes the pods whose time came Ready, removes the Terminating
// ones whose termination ended and those whose ReplicaSet is gone (the
// garbage collector's work), and reports whether it changed any.
func (c *cluster) kubelet() (bool, error) {
	pods, rsUIDs, err := c.podsAndOwners()
	if err != nil {
		return false, err
	}
	changed := false
	for _, pod := range pods {
		times := c.pods[pod.UID]
		ref := metav1.GetControllerOf(pod)
		switch {
		case times == nil:
		case ref == nil || !rsUIDs[ref.UID] || (times.deleted && times.goneAt <= c.now):
			delete(c.pods, pod.UID)
			err = c.tracker.Delete(podsResource, pod.Namespace, pod.Name)
		case !times.deleted && !times.fails && times.readyAt <= c.now && !podReady(pod):
			pod = pod.DeepCopy()
			setReady(pod, c.start.Add(times.readyAt))
			err = c.tracker.Update(podsResource, pod, pod.Namespace)
		default:
			continue
		}
		if err != nil {
			return false, fmt.Errorf("simulate: %w", err)
		}
		changed = true
	}
	return changed, nil
}

// podsAndOwners lists the stored pods and the UIDs of the stored ReplicaSets.
func (c *cluster) podsAndOwners() ([]*v1.Pod, map[types.UID]bool, error) {
	w := world{c.tracker}
	podList, err := w.ListPods(c.ctx, "", labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("simulate: %w", err)
	}
	rsList, err := w.ListReplicaSets(c.ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("simulate: %w", err)
	}
	owners := make(map[types.UID]bool, len(rsList.Items))
	for i := range rsList.Items {
		owners[rsList.Items[i].UID] = true
	}
	return rolloutstate.Items(podList.Items), owners, nil
}

// nextEvent returns the earliest future time a pod turns Ready or
// available (minReady after Ready, by its ReplicaSet's minReadySeconds) or
// is gone; failing pods do neither until deleted.
func (c *cluster) nextEvent(minReady map[types.UID]time.Duration, owner func(types.UID) types.UID) (time.Duration, bool) {
	var next time.Duration
	found := false
	consider := func(t time.Duration) {
		if t > c.now && (!found || t < next) {
			next, found = t, true
		}
	}
	for uid, times := range c.pods {
		if times.deleted {
			consider(times.goneAt)
			continue
		}
		if times.fails {
			continue
		}
		consider(times.readyAt)
		consider(times.readyAt + minReady[owner(uid)])
	}
	return next, found
}

// observe copies the stored Deployments, ReplicaSets and pods into the
// informer caches the syncs read, as informers would, and clears the
// client's record of writes (which would otherwise grow with every sync).
func (c *cluster) observe() error {
	w := world{c.tracker}
	ds, err := w.listDeployments("")
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	rss, err := w.ListReplicaSets(c.ctx, "")
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	pods, err := w.ListPods(c.ctx, "", labels.Everything())
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	replace := func(inf cache.Indexer, n int, item func(int) any) error {
		objs := make([]any, n)
		for i := range objs {
			objs[i] = item(i)
		}
		return inf.Replace(objs, "")
	}
	err = errors.Join(
		replace(c.factory.Apps().V1().Deployments().Informer().GetIndexer(), len(ds.Items), func(i int) any { return &ds.Items[i] }),
		replace(c.factory.Apps().V1().ReplicaSets().Informer().GetIndexer(), len(rss.Items), func(i int) any { return &rss.Items[i] }),
		replace(c.factory.Core().V1().Pods().Informer().GetIndexer(), len(pods.Items), func(i int) any { return &pods.Items[i] }),
	)
	c.client.Take()
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	return nil
}

// takeDeleted returns the names of the pods deleted since it was last
// called, sorted (the ReplicaSet controller deletes in parallel).
func (c *cluster) takeDeleted() []string {
	out := c.deleted
	c.deleted = nil
	slices.Sort(out)
	return out
}

// podReady reports whether pod is Ready (rolloutstate.PodReadySince).
func podReady(pod *v1.Pod) bool {
	_, ready := rolloutstate.PodReadySince(pod)
	return ready
}
