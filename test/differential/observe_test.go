package differential

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Annotation keys the suite compares (spec 1.1).
const (
	revisionAnnotation        = "deployment.kubernetes.io/revision"
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	desiredAnnotation         = "deployment.kubernetes.io/desired-replicas"
	maxAnnotation             = "deployment.kubernetes.io/max-replicas"
	rollbackAnnotation        = "deprecated.deployment.rollback.to"
	combinedPrefix            = "(combined from similar events): "
)

// phase is what the ReplicaSet watch saw between two marks of one scenario.
type phase struct {
	name string
	// sizes maps a ReplicaSet label (see rsLabel) to its spec.replicas values in order, duplicates collapsed,
	// starting with its value when the phase began (0 for a ReplicaSet created during the phase).
	sizes map[string][]int32
	// maxTotal is the largest Σ spec.replicas and minAvailable the smallest Σ status.availableReplicas over the
	// Deployment's ReplicaSets at any change seen in the phase.
	maxTotal, minAvailable int32
	// overlap is set when two ReplicaSets had pods (spec or status replicas > 0) at the same time.
	overlap bool
	// progressing is the Deployment's Progressing condition (reason and message; normalized by result) in the
	// order the Deployment watch saw it, repeats collapsed, starting with the one when the phase began (zero for no
	// condition).
	progressing []condState
}

// eventKey is one Deployment event as compared: emitter, type, reason and the message with ReplicaSet names
// normalized; names, timestamps and counts aside.
type eventKey struct {
	Source, Type, Reason, Message string
}

func (e eventKey) String() string {
	return fmt.Sprintf("%s %s %s %q", e.Source, e.Type, e.Reason, e.Message)
}

// recorder watches one Deployment, its ReplicaSets and its events in one namespace of one cluster.
type recorder struct {
	deployment string
	stop       chan struct{}
	events     cache.Store

	mu          sync.Mutex
	rsInformer  cache.SharedIndexInformer
	deployments cache.Store
	labels      map[string]string // ReplicaSet name → label
	phases      []*phase
	occurrences []eventKey // every event occurrence, in arrival order (a count increase is an occurrence)
	counts      map[string]int32
}

// newRecorder starts watching namespace ns of client for Deployment name; call it before creating the
// Deployment. The first phase is named first.
func newRecorder(ctx context.Context, client kubernetes.Interface, ns, name, first string) (*recorder, error) {
	r := &recorder{deployment: name, stop: make(chan struct{}), labels: map[string]string{}, counts: map[string]int32{}}
	r.phases = []*phase{newPhase(first)}
	rsLW := cache.NewListWatchFromClient(client.AppsV1().RESTClient(), "replicasets", ns, fields.Everything())
	r.rsInformer = cache.NewSharedIndexInformer(rsLW, &appsv1.ReplicaSet{}, 0, cache.Indexers{})
	onRS := func(any) { r.observeReplicaSets() }
	if _, err := r.rsInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onRS, UpdateFunc: func(_, o any) { onRS(o) }, DeleteFunc: onRS,
	}); err != nil {
		return nil, err
	}
	dLW := cache.NewListWatchFromClient(client.AppsV1().RESTClient(), "deployments", ns, fields.OneTermEqualSelector("metadata.name", name))
	dInformer := cache.NewSharedIndexInformer(dLW, &appsv1.Deployment{}, 0, cache.Indexers{})
	if _, err := dInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: r.observeDeployment, UpdateFunc: func(_, o any) { r.observeDeployment(o) },
	}); err != nil {
		return nil, err
	}
	r.deployments = dInformer.GetStore()
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.kind", "Deployment"),
		fields.OneTermEqualSelector("involvedObject.name", name))
	evLW := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "events", ns, sel)
	evInformer := cache.NewSharedIndexInformer(evLW, &v1.Event{}, 0, cache.Indexers{})
	if _, err := evInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: r.observeEvent, UpdateFunc: func(_, o any) { r.observeEvent(o) },
	}); err != nil {
		return nil, err
	}
	r.events = evInformer.GetStore()
	go r.rsInformer.Run(r.stop)
	go evInformer.Run(r.stop)
	go dInformer.Run(r.stop)
	if !cache.WaitForCacheSync(ctx.Done(), r.rsInformer.HasSynced, evInformer.HasSynced, dInformer.HasSynced) {
		close(r.stop)
		return nil, fmt.Errorf("informers in %s did not sync", ns)
	}
	return r, nil
}

func newPhase(name string) *phase {
	return &phase{name: name, sizes: map[string][]int32{}, minAvailable: 1<<31 - 1}
}

// close stops the informers.
func (r *recorder) close() { close(r.stop) }

// rsLabel names a ReplicaSet by what distinguishes it in these scenarios, its template's first image, so the
// two clusters' ReplicaSets can be matched whatever their names.
func rsLabel(rs *appsv1.ReplicaSet) string {
	if len(rs.Spec.Template.Spec.Containers) == 0 {
		return "rs(?)"
	}
	return "rs(" + rs.Spec.Template.Spec.Containers[0].Image + ")"
}

// owned returns the Deployment's ReplicaSets from the informer, oldest first.
func (r *recorder) owned() []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, obj := range r.rsInformer.GetStore().List() {
		rs := obj.(*appsv1.ReplicaSet)
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.Kind == "Deployment" && ref.Name == r.deployment {
			out = append(out, rs)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp) })
	return out
}

// observeReplicaSets records the current sizes into the current phase.
func (r *recorder) observeReplicaSets() {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.phases[len(r.phases)-1]
	var total, avail int32
	withPods := 0
	for _, rs := range r.owned() {
		label := rsLabel(rs)
		r.labels[rs.Name] = label
		spec := replicas(rs)
		seq, ok := p.sizes[label]
		if !ok {
			seq = []int32{0}
		}
		if seq[len(seq)-1] != spec {
			seq = append(seq, spec)
		}
		p.sizes[label] = seq
		total += spec
		avail += rs.Status.AvailableReplicas
		if spec > 0 || rs.Status.Replicas > 0 {
			withPods++
		}
	}
	p.maxTotal = max(p.maxTotal, total)
	p.minAvailable = min(p.minAvailable, avail)
	p.overlap = p.overlap || withPods > 1
}

// mark ends the current phase and starts one named name, whose sequences start at the current sizes.
func (r *recorder) mark(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := newPhase(name)
	var total, avail int32
	for _, rs := range r.owned() {
		p.sizes[rsLabel(rs)] = []int32{replicas(rs)}
		total += replicas(rs)
		avail += rs.Status.AvailableReplicas
	}
	p.maxTotal, p.minAvailable = total, avail
	p.progressing = []condState{r.progressingCondition()}
	r.phases = append(r.phases, p)
}

// observeDeployment records the Deployment's Progressing condition into the current phase when it changed.
func (r *recorder) observeDeployment(obj any) {
	if _, ok := obj.(*appsv1.Deployment); !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.phases[len(r.phases)-1]
	if c := r.progressingCondition(); len(p.progressing) == 0 || p.progressing[len(p.progressing)-1] != c {
		p.progressing = append(p.progressing, c)
	}
}

// progressingCondition returns the watched Deployment's Progressing condition, message not yet normalized (zero
// without the Deployment or the condition).
func (r *recorder) progressingCondition() condState {
	objs := r.deployments.List() // the watch selects the one Deployment by name
	if len(objs) == 0 {
		return condState{}
	}
	for _, c := range objs[0].(*appsv1.Deployment).Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return condState{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		}
	}
	return condState{}
}

// observeEvent records each new occurrence of a Deployment event (a new event or a count increase).
func (r *recorder) observeEvent(obj any) {
	ev, ok := obj.(*v1.Event)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	count := max(ev.Count, 1)
	for range count - r.counts[string(ev.UID)] {
		r.occurrences = append(r.occurrences, eventKey{Source: ev.Source.Component, Type: ev.Type, Reason: ev.Reason, Message: ev.Message})
	}
	r.counts[string(ev.UID)] = max(count, r.counts[string(ev.UID)])
}

// normalize replaces every known ReplicaSet name in s by its label and drops the event correlator's
// "(combined from similar events)" prefix (same client-go correlator on both sides; it depends only on how many
// similar events came before).
func (r *recorder) normalize(s string) string {
	s = strings.TrimPrefix(s, combinedPrefix)
	names := make([]string, 0, len(r.labels))
	for n := range r.labels {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		s = strings.ReplaceAll(s, n, r.labels[n])
	}
	return s
}

// result returns the phases and the normalized event occurrences seen so far.
func (r *recorder) result() ([]phase, []eventKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	phases := make([]phase, len(r.phases))
	for i, p := range r.phases {
		phases[i] = *p
		phases[i].progressing = slices.Clone(p.progressing)
		for j := range phases[i].progressing {
			phases[i].progressing[j].Message = r.normalize(p.progressing[j].Message)
		}
	}
	events := make([]eventKey, len(r.occurrences))
	for i, e := range r.occurrences {
		e.Message = r.normalize(e.Message)
		events[i] = e
	}
	return phases, events
}

// waitEvents waits, at most limit, until the Deployment events caught up with what the ReplicaSet watch saw and
// then went quiet for quiet. Event recording is asynchronous (and a fresh cluster's first events can take more
// than a second), so it first waits for one ScalingReplicaSet occurrence per size change seen (RU-15, RV-13: every
// size change the controller makes emits one) and for at least minOther other occurrences. It never fails: a
// missing event then shows up as a difference.
func (r *recorder) waitEvents(ctx context.Context, minOther int, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		scaling, other, changes := r.eventProgress()
		if n := scaling + other; n != last {
			last, since = n, time.Now()
		}
		if scaling >= changes && other >= minOther && time.Since(since) >= quiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventProgress returns the ScalingReplicaSet and other event occurrences seen and the number of size changes
// the ReplicaSet watch recorded over all phases.
func (r *recorder) eventProgress() (scaling, other, changes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.occurrences {
		if e.Reason == "ScalingReplicaSet" {
			scaling++
		} else {
			other++
		}
	}
	for _, p := range r.phases {
		for _, seq := range p.sizes {
			changes += len(seq) - 1
		}
	}
	return scaling, other, changes
}

func replicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// rsState is a settled ReplicaSet as compared.
type rsState struct {
	Name                                    string // the real name: the pod-template-hash must match too (spec 1.3, 1.4)
	Spec, StatusReplicas, Available         int32
	Revision, History, Desired, MaxReplicas string
}

// condState is a Deployment condition as compared: timestamps aside, message normalized.
type condState struct {
	Type, Status, Reason, Message string
}

// snapshot is a settled Deployment and its ReplicaSets as compared.
type snapshot struct {
	Generation, ObservedGeneration                   int64
	Revision                                         string
	Replicas, Updated, Ready, Available, Unavailable int32
	CollisionCount                                   int32
	Conditions                                       []condState
	ReplicaSets                                      map[string]rsState
}

// snapshot reads the Deployment and its ReplicaSets from the API.
func (r *recorder) snapshot(ctx context.Context, client kubernetes.Interface, ns string) (snapshot, error) {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, r.deployment, metav1.GetOptions{})
	if err != nil {
		return snapshot{}, err
	}
	list, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return snapshot{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := snapshot{
		Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
		Revision: d.Annotations[revisionAnnotation],
		Replicas: d.Status.Replicas, Updated: d.Status.UpdatedReplicas, Ready: d.Status.ReadyReplicas,
		Available: d.Status.AvailableReplicas, Unavailable: d.Status.UnavailableReplicas,
		ReplicaSets: map[string]rsState{},
	}
	if d.Status.CollisionCount != nil {
		s.CollisionCount = *d.Status.CollisionCount
	}
	for i := range list.Items {
		rs := &list.Items[i]
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID {
			continue
		}
		r.labels[rs.Name] = rsLabel(rs)
		s.ReplicaSets[rsLabel(rs)] = rsState{Name: rs.Name, Spec: replicas(rs), StatusReplicas: rs.Status.Replicas,
			Available: rs.Status.AvailableReplicas, Revision: rs.Annotations[revisionAnnotation],
			History: rs.Annotations[revisionHistoryAnnotation], Desired: rs.Annotations[desiredAnnotation],
			MaxReplicas: rs.Annotations[maxAnnotation]}
	}
	for _, c := range d.Status.Conditions {
		s.Conditions = append(s.Conditions, condState{Type: string(c.Type), Status: string(c.Status),
			Reason: c.Reason, Message: r.normalize(c.Message)})
	}
	sort.Slice(s.Conditions, func(i, j int) bool { return s.Conditions[i].Type < s.Conditions[j].Type })
	return s, nil
}
