package deployment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// SimulationConfig says how the simulated cluster under Simulate behaves.
type SimulationConfig struct {
	// PodStartup is the time from a pod's creation to it being Ready; it is
	// available spec.minReadySeconds later. 0 means DefaultPodStartup.
	PodStartup time.Duration
	// PodTermination is how long a deleted pod stays Terminating before it
	// is gone (Recreate waits for that, RC-3). 0 means gone at once.
	PodTermination time.Duration
	// Horizon bounds the simulated time; 0 means DefaultHorizon.
	Horizon time.Duration
}

// Simulation defaults.
const (
	// DefaultPodStartup is `kubedeploy up`'s --pod-startup-delay default.
	DefaultPodStartup = time.Second
	// DefaultHorizon is how much simulated time Simulate runs at most.
	DefaultHorizon = 24 * time.Hour
	// simulationMaxSyncs bounds the syncs of one simulation (a rollout of
	// N replicas needs O(N) syncs at worst, with maxSurge 0/maxUnavailable 1).
	simulationMaxSyncs = 100_000
)

// PlanStep is one write of ReplicaSet sizes the Deployment controller makes
// during a simulated rollout: the sizes after it, in replicas.
type PlanStep struct {
	// Seconds is the simulated time of the step since the change.
	Seconds float64 `json:"seconds"`
	// NewReplicas is the new ReplicaSet's spec.replicas after the step (0
	// while it does not exist yet, see NewReplicaSetExists).
	NewReplicas int32 `json:"newReplicas"`
	// NewReplicaSetExists is false for steps before the new ReplicaSet is
	// created (Recreate scales the old ones down first, RC-1..RC-4).
	NewReplicaSetExists bool `json:"newReplicaSetExists"`
	// OldReplicas are the old ReplicaSets' spec.replicas after the step, in
	// the order of Plan.OldReplicaSets (oldest first).
	OldReplicas []int32 `json:"oldReplicas"`
	// MaxTotal is the sum of every ReplicaSet's spec.replicas: the most pods
	// (not counting terminating ones) the step allows.
	MaxTotal int32 `json:"maxTotal"`
	// MinAvailable is the number of available pods right after the step's
	// deletions: the least availability during the step.
	MinAvailable int32 `json:"minAvailable"`
}

// Plan is the outcome of Simulate.
type Plan struct {
	// Deployment is the simulated Deployment's name.
	Deployment string `json:"deployment"`
	// Strategy is RollingUpdate or Recreate.
	Strategy appsv1.DeploymentStrategyType `json:"strategy"`
	// Replicas is the Deployment's spec.replicas.
	Replicas int32 `json:"replicas"`
	// NewReplicaSet is the new ReplicaSet's name ("" if the simulation ended
	// before it existed).
	NewReplicaSet string `json:"newReplicaSet"`
	// OldReplicaSets are the old ReplicaSets' names, oldest first; every
	// step's OldReplicas follows this order.
	OldReplicaSets []string `json:"oldReplicaSets"`
	// Steps are the size writes in order.
	Steps []PlanStep `json:"steps"`
	// PeakPods is the largest MaxTotal of any step (or of the start).
	PeakPods int32 `json:"peakPods"`
	// MinAvailable is the smallest MinAvailable of any step (or of the start).
	MinAvailable int32 `json:"minAvailable"`
	// EstimatedSeconds is the simulated time until the Deployment was
	// complete (or until the simulation stopped, see Complete).
	EstimatedSeconds float64 `json:"estimatedSeconds"`
	// Complete reports whether the simulated Deployment completed (ST-11).
	Complete bool `json:"complete"`
	// Paused reports that the Deployment is paused: the plan is what
	// resuming it would start; nothing happens while it stays paused (SD-7).
	Paused bool `json:"paused,omitempty"`
	// Partitioned reports that the rollout ends held by its
	// kubedeploy.io/rollout-partition (EX-1) with the new ReplicaSet's last
	// size updated; Stopped then says so.
	Partitioned bool `json:"partitioned,omitempty"`
	// Stopped says why the simulation ended without completing ("" when
	// Complete).
	Stopped string `json:"stopped,omitempty"`
}

// NewReplicaSetSizes returns the new ReplicaSet's spec.replicas over the
// plan's steps, from its creation on, without repeats: the sizes the
// controller writes to it, in order (replicas).
func (p *Plan) NewReplicaSetSizes() []int32 {
	return p.sizes(func(s PlanStep) (int32, bool) { return s.NewReplicas, s.NewReplicaSetExists })
}

// OldReplicaSetSizes returns old ReplicaSet i's (in OldReplicaSets' order)
// spec.replicas over the plan's steps, without repeats (replicas). It
// panics when i is out of range.
func (p *Plan) OldReplicaSetSizes(i int) []int32 {
	if i < 0 || i >= len(p.OldReplicaSets) {
		panic(fmt.Sprintf("plan has %d old ReplicaSets, no %d", len(p.OldReplicaSets), i))
	}
	return p.sizes(func(s PlanStep) (int32, bool) { return s.OldReplicas[i], true })
}

func (p *Plan) sizes(of func(PlanStep) (int32, bool)) []int32 {
	var out []int32
	for _, s := range p.Steps {
		if n, ok := of(s); ok && (len(out) == 0 || out[len(out)-1] != n) {
			out = append(out, n)
		}
	}
	return out
}

// Simulate predicts the rollout the Deployment controller performs for d
// (the Deployment as it is or will be after a change; its status as
// stored) over rss (the ReplicaSets it owns now, with their status), by
// running this package's own sync (syncDeployment, the same code the
// controller runs) against an in-memory API server and a simulated
// ReplicaSet controller: pods appear at once when a ReplicaSet grows, become
// Ready cfg.PodStartup after creation and available minReadySeconds later,
// and when a ReplicaSet shrinks the not-ready pods go first, then the
// newest. Existing pods are taken from each ReplicaSet's status (available
// ones are available now, ready ones become available after
// minReadySeconds, the others Ready after PodStartup). A paused d is
// simulated as if resumed (Plan.Paused says so). It never talks to a real
// API server.
//
// It returns an error when d or rss are not what the controller could sync
// (no name, an invalid selector or strategy, a ReplicaSet d does not control)
// or when a simulated sync fails; a rollout that stops progressing (for
// example pods that never become available) is not an error: Plan.Stopped
// says why.
func Simulate(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, cfg SimulationConfig) (*Plan, error) {
	if cfg.PodStartup <= 0 {
		cfg.PodStartup = DefaultPodStartup
	}
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	if d == nil || d.Name == "" {
		return nil, errors.New("simulate: the Deployment has no name")
	}
	if _, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || selectsAll(d.Spec.Selector) {
		return nil, fmt.Errorf("simulate: Deployment %s has an invalid or empty selector", d.Name)
	}
	if _, err := rolloutstate.FencepostsOf(d); err != nil {
		return nil, fmt.Errorf("simulate: Deployment %s: %w", d.Name, err)
	}
	s, err := newSimulation(ctx, d, rss, cfg)
	if err != nil {
		return nil, err
	}
	return s.run()
}

// simPod is a simulated pod: its object plus when it turns Ready, available
// and (once deleted) gone.
type simPod struct {
	pod                  *v1.Pod
	readyAt, availableAt time.Duration
	deleted              bool
	goneAt               time.Duration
}

// simulation is the state of one Simulate call.
type simulation struct {
	ctx   context.Context
	cfg   SimulationConfig
	start time.Time
	now   time.Duration
	clock *clocktesting.FakeClock

	client  *fake.Clientset
	factory informers.SharedInformerFactory
	c       *Controller
	key     cache.ObjectName
	d       *appsv1.Deployment

	pods   map[types.UID][]*simPod
	nextID int
	plan   *Plan
	// oldNames are the old ReplicaSets' names in the order first seen
	// (oldest first); steps report sizes in this order.
	oldNames []string
}

// simulationStart is the simulated wall-clock time of the change; any fixed
// time works, the plan reports times relative to it.
var simulationStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func newSimulation(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, cfg SimulationConfig) (*simulation, error) {
	d = d.DeepCopy()
	plan := &Plan{Deployment: d.Name, Strategy: d.Spec.Strategy.Type, Replicas: desiredReplicas(d), Paused: d.Spec.Paused}
	d.Spec.Paused = false
	if d.Namespace == "" {
		d.Namespace = metav1.NamespaceDefault
	}
	simulatedUID := d.UID == ""
	if simulatedUID {
		d.UID = "simulated-deployment"
	}
	// A changed spec is a new generation the controller has not observed.
	d.Generation = max(d.Generation, d.Status.ObservedGeneration) + 1
	d.ResourceVersion = "1"
	s := &simulation{
		ctx:   klog.NewContext(ctx, logr.Discard()),
		cfg:   cfg,
		start: simulationStart,
		clock: clocktesting.NewFakeClock(simulationStart),
		key:   cache.ObjectName{Namespace: d.Namespace, Name: d.Name},
		pods:  map[types.UID][]*simPod{},
		plan:  plan,
	}
	objs := []runtime.Object{d}
	for i, rs := range rss {
		rs = rs.DeepCopy()
		// A Deployment read from a manifest has no UID: any controller
		// reference is then taken as its own.
		ref := metav1.GetControllerOf(rs)
		if ref == nil || (ref.UID != d.UID && !simulatedUID) {
			return nil, fmt.Errorf("simulate: ReplicaSet %s is not controlled by Deployment %s", rs.Name, d.Name)
		}
		if ref.UID != d.UID {
			rs.OwnerReferences = []metav1.OwnerReference{*ownership.NewControllerRef(d, controllerKind)}
		}
		rs.Namespace = d.Namespace
		if rs.UID == "" {
			rs.UID = types.UID("simulated-rs-" + strconv.Itoa(i))
		}
		rs.ResourceVersion = "1"
		objs = append(objs, rs)
		s.seedPods(rs)
	}
	s.client = fake.NewClientset(objs...)
	s.client.PrependReactor("create", "replicasets", s.onCreate)
	s.factory = informers.NewSharedInformerFactory(s.client, 0)
	c, err := New(s.ctx, Config{
		Client:      s.client,
		Deployments: s.factory.Apps().V1().Deployments(),
		ReplicaSets: s.factory.Apps().V1().ReplicaSets(),
		Pods:        s.factory.Core().V1().Pods(),
		Recorder:    &record.FakeRecorder{},
		Clock:       s.clock,
	})
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	s.c = c
	s.d = d
	return s, nil
}

// onCreate gives a created ReplicaSet what the API server would: a UID, a
// creation time and a resourceVersion; the tracker then stores it.
func (s *simulation) onCreate(action clienttesting.Action) (bool, runtime.Object, error) {
	rs, ok := action.(clienttesting.CreateAction).GetObject().(*appsv1.ReplicaSet)
	if !ok {
		return false, nil, nil
	}
	s.nextID++
	rs.UID = types.UID("simulated-new-rs-" + strconv.Itoa(s.nextID))
	rs.CreationTimestamp = metav1.NewTime(s.clock.Now())
	rs.ResourceVersion = "1"
	rs.Generation = 1
	return false, nil, nil
}

// seedPods creates rs's existing pods from its status (see Simulate).
func (s *simulation) seedPods(rs *appsv1.ReplicaSet) {
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	for i := range rs.Status.Replicas {
		p := s.newPod(rs)
		switch {
		case i < rs.Status.AvailableReplicas:
			p.readyAt, p.availableAt = -minReady, 0
		case i < max(rs.Status.ReadyReplicas, rs.Status.AvailableReplicas):
			p.readyAt, p.availableAt = 0, minReady
		}
		s.pods[rs.UID] = append(s.pods[rs.UID], p)
	}
}

// newPod returns a pod of rs created at the current simulated time, Ready
// PodStartup later and available minReadySeconds after that.
func (s *simulation) newPod(rs *appsv1.ReplicaSet) *simPod {
	s.nextID++
	name := rs.Name + "-sim" + strconv.Itoa(s.nextID)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: rs.Namespace, UID: types.UID("simulated-pod-" + strconv.Itoa(s.nextID)),
			Labels:          rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*ownership.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	ready := s.now + s.cfg.PodStartup
	return &simPod{pod: pod, readyAt: ready, availableAt: ready + time.Duration(rs.Spec.MinReadySeconds)*time.Second}
}

// run is the simulation loop: the simulated ReplicaSet controller acts,
// the Deployment controller syncs once; when neither changes anything,
// time advances to the next pod event.
func (s *simulation) run() (*Plan, error) {
	if err := s.observe(); err != nil {
		return nil, err
	}
	s.plan.PeakPods, s.plan.MinAvailable = s.totals()
	for range simulationMaxSyncs {
		podsChanged, err := s.reconcileReplicaSets()
		if err != nil {
			return nil, err
		}
		before, err := s.sizes()
		if err != nil {
			return nil, err
		}
		if _, err := s.c.syncDeployment(s.ctx, s.key); err != nil {
			return nil, fmt.Errorf("simulate: sync at %s: %w", s.now, err)
		}
		if err := s.observe(); err != nil {
			return nil, err
		}
		after, err := s.sizes()
		if err != nil {
			return nil, err
		}
		if !before.equal(after) {
			if _, err := s.reconcileReplicaSets(); err != nil {
				return nil, err
			}
			s.record(after)
			continue
		}
		if done, err := s.complete(); err != nil || done {
			s.plan.Complete = done
			s.plan.EstimatedSeconds = s.now.Seconds()
			return s.plan, err
		}
		if held, err := s.held(); err != nil || held != "" {
			s.plan.Partitioned = held != ""
			return s.stop(held), err
		}
		if podsChanged {
			continue
		}
		next, ok := s.nextEvent()
		if !ok {
			return s.stop("no pod changes state any more and the controller makes no further step"), nil
		}
		if next > s.cfg.Horizon {
			return s.stop(fmt.Sprintf("not complete within %s of simulated time", s.cfg.Horizon)), nil
		}
		s.now = next
		s.clock.SetTime(s.start.Add(next))
	}
	return s.stop(fmt.Sprintf("not complete after %d simulated syncs", simulationMaxSyncs)), nil
}

func (s *simulation) stop(why string) *Plan {
	s.plan.Stopped = why
	s.plan.EstimatedSeconds = s.now.Seconds()
	return s.plan
}

// replicaSetSizes are the spec.replicas of the new and the old ReplicaSets.
type replicaSetSizes struct {
	newName string
	newSize int32
	old     map[string]int32
}

func (a replicaSetSizes) equal(b replicaSetSizes) bool {
	return a.newName == b.newName && a.newSize == b.newSize && maps.Equal(a.old, b.old)
}

// sizes reads the current ReplicaSets from the in-memory API server.
func (s *simulation) sizes() (replicaSetSizes, error) {
	rss, d, err := s.current()
	if err != nil {
		return replicaSetSizes{}, err
	}
	out := replicaSetSizes{old: map[string]int32{}}
	newRS := findNewReplicaSet(nil, d, rss)
	for _, rs := range rss {
		if newRS != nil && rs.UID == newRS.UID {
			out.newName, out.newSize = rs.Name, specReplicas(rs)
			continue
		}
		out.old[rs.Name] = specReplicas(rs)
	}
	return out, nil
}

// current returns the stored ReplicaSets d controls (oldest first) and d.
func (s *simulation) current() ([]*appsv1.ReplicaSet, *appsv1.Deployment, error) {
	d, err := s.client.AppsV1().Deployments(s.key.Namespace).Get(s.ctx, s.key.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("simulate: %w", err)
	}
	list, err := s.client.AppsV1().ReplicaSets(s.key.Namespace).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("simulate: %w", err)
	}
	rss := rolloutstate.ControlledReplicaSets(list, d.UID)
	sortOldestFirst(rss)
	return rss, d, nil
}

// record appends the step whose sizes are after.
func (s *simulation) record(after replicaSetSizes) {
	p := s.plan
	if after.newName != "" {
		p.NewReplicaSet = after.newName
	}
	rss, _, _ := s.current()
	for _, rs := range rss {
		if rs.Name != after.newName && !slices.Contains(s.oldNames, rs.Name) {
			s.oldNames = append(s.oldNames, rs.Name)
		}
	}
	p.OldReplicaSets = slices.Clone(s.oldNames)
	oldSizes := make([]int32, len(s.oldNames))
	for i, name := range s.oldNames {
		oldSizes[i] = after.old[name] // 0 once deleted (history cleanup)
	}
	total, available := s.totals()
	p.Steps = append(p.Steps, PlanStep{
		Seconds: s.now.Seconds(), NewReplicas: after.newSize, NewReplicaSetExists: after.newName != "",
		OldReplicas: oldSizes, MaxTotal: total, MinAvailable: available,
	})
	p.PeakPods = max(p.PeakPods, total)
	p.MinAvailable = min(p.MinAvailable, available)
}

// totals returns the sum of spec.replicas and the available pods now.
func (s *simulation) totals() (total, available int32) {
	rss, _, _ := s.current()
	for _, rs := range rss {
		total += specReplicas(rs)
		for _, p := range s.pods[rs.UID] {
			if !p.deleted && p.availableAt <= s.now {
				available++
			}
		}
	}
	return total, available
}

// complete reports whether the stored Deployment status says the rollout is
// complete (ST-11) for the current generation, with no old pods left.
func (s *simulation) complete() (bool, error) {
	rss, d, err := s.current()
	if err != nil {
		return false, err
	}
	if d.Status.ObservedGeneration < d.Generation || !rolloutstate.Complete(d, &d.Status) {
		return false, nil
	}
	newRS := findNewReplicaSet(nil, d, rss)
	for _, rs := range rss {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		if specReplicas(rs) > 0 || slices.ContainsFunc(s.pods[rs.UID], func(p *simPod) bool { return !p.deleted }) {
			return false, nil
		}
	}
	return true, nil
}

// held returns, when the stored Deployment status shows the rollout held by
// its partition (EX-1), why the simulation stops there; "" otherwise.
func (s *simulation) held() (string, error) {
	rss, d, err := s.current()
	if err != nil {
		return "", err
	}
	newRS := findNewReplicaSet(nil, d, rss)
	limit, _ := newReplicaSetLimit(d, newRS, rss)
	if d.Status.ObservedGeneration < d.Generation || !heldAtPartition(d, &d.Status, newRS, limit) {
		return "", nil
	}
	return fmt.Sprintf("held by %s: %d of %d pods updated", RolloutPartitionAnnotation, limit, desiredReplicas(d)), nil
}

// reconcileReplicaSets is the simulated ReplicaSet controller: it removes
// pods whose termination ended, makes every ReplicaSet's pod count its
// spec.replicas and writes each changed status. It reports whether any pod
// or status changed.
func (s *simulation) reconcileReplicaSets() (bool, error) {
	rss, _, err := s.current()
	if err != nil {
		return false, err
	}
	changed := false
	for _, rs := range rss {
		pods := slices.DeleteFunc(s.pods[rs.UID], func(p *simPod) bool {
			gone := p.deleted && p.goneAt <= s.now
			changed = changed || gone
			return gone
		})
		active := slices.DeleteFunc(slices.Clone(pods), func(p *simPod) bool { return p.deleted })
		want := int(specReplicas(rs))
		for range want - len(active) {
			p := s.newPod(rs)
			pods = append(pods, p)
			active = append(active, p)
			changed = true
		}
		if extra := len(active) - want; extra > 0 {
			// Not-ready pods first, then not-available ones, then the newest (RS-14, roughly).
			slices.SortStableFunc(active, func(a, b *simPod) int {
				ar, br := a.readyAt <= s.now, b.readyAt <= s.now
				if ar != br {
					if !ar {
						return -1
					}
					return 1
				}
				aa, ba := a.availableAt <= s.now, b.availableAt <= s.now
				if aa != ba {
					if !aa {
						return -1
					}
					return 1
				}
				return -compareNames(a.pod.Name, b.pod.Name)
			})
			for _, p := range active[:extra] {
				p.deleted, p.goneAt = true, s.now+s.cfg.PodTermination
				now := metav1.NewTime(s.clock.Now())
				p.pod.DeletionTimestamp = &now
			}
			changed = true
			pods = slices.DeleteFunc(pods, func(p *simPod) bool { return p.deleted && p.goneAt <= s.now })
		}
		s.pods[rs.UID] = pods
		if err := s.writeStatus(rs, pods); err != nil {
			return false, err
		}
	}
	return changed, s.observe()
}

// compareNames orders simulated pod names by creation: a longer sequence
// number is newer.
func compareNames(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// writeStatus writes rs's status from its pods, as the ReplicaSet
// controller would (RS-5), when it changed.
func (s *simulation) writeStatus(rs *appsv1.ReplicaSet, pods []*simPod) error {
	var status appsv1.ReplicaSetStatus
	var terminating int32
	for _, p := range pods {
		if p.deleted {
			terminating++
			continue
		}
		status.Replicas++
		if p.readyAt <= s.now {
			status.ReadyReplicas++
		}
		if p.availableAt <= s.now {
			status.AvailableReplicas++
		}
	}
	status.FullyLabeledReplicas = status.Replicas
	status.ObservedGeneration = rs.Generation
	status.TerminatingReplicas = &terminating
	if equality.Semantic.DeepEqual(rs.Status, status) {
		return nil
	}
	rs = rs.DeepCopy()
	rs.Status = status
	if _, err := s.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(s.ctx, rs, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	return nil
}

// nextEvent returns the earliest future time a pod turns Ready or
// available or is gone.
func (s *simulation) nextEvent() (time.Duration, bool) {
	var next time.Duration
	found := false
	consider := func(t time.Duration) {
		if t > s.now && (!found || t < next) {
			next, found = t, true
		}
	}
	for _, pods := range s.pods {
		for _, p := range pods {
			if p.deleted {
				consider(p.goneAt)
				continue
			}
			consider(p.readyAt)
			consider(p.availableAt)
		}
	}
	return next, found
}

// observe copies the in-memory API server's Deployment, ReplicaSets and the
// simulated pods into the controller's informer caches, as informers would.
func (s *simulation) observe() error {
	dIdx := s.factory.Apps().V1().Deployments().Informer().GetIndexer()
	rsIdx := s.factory.Apps().V1().ReplicaSets().Informer().GetIndexer()
	podIdx := s.factory.Core().V1().Pods().Informer().GetIndexer()
	rss, d, err := s.current()
	if err != nil {
		return err
	}
	if err := dIdx.Update(d); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	objs := make([]any, 0, len(rss))
	for _, rs := range rss {
		objs = append(objs, rs)
	}
	if err := rsIdx.Replace(objs, ""); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	var pods []any
	for _, ps := range s.pods {
		for _, p := range ps {
			pods = append(pods, p.pod)
		}
	}
	if err := podIdx.Replace(pods, ""); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	return nil
}

// SteadyReplicaSet returns the ReplicaSet the controller would have made for
// d's current template (RV-9: name, labels, selector, annotations) once d's
// rollout completed: spec.replicas = d's replicas, every pod available, at
// the revision in d's revision annotation (1 if none). Plans made from
// manifests alone (no cluster) start from it. It returns an error when d's
// rollingUpdate rolloutstate.Fenceposts are invalid.
func SteadyReplicaSet(d *appsv1.Deployment) (*appsv1.ReplicaSet, error) {
	f, err := rolloutstate.FencepostsOf(d)
	if err != nil {
		return nil, fmt.Errorf("Deployment %s: %w", d.Name, err)
	}
	revision := int64(1)
	if r, err := strconv.ParseInt(d.Annotations[RevisionAnnotation], 10, 64); err == nil && r > 0 {
		revision = r
	}
	size := desiredReplicas(d)
	rs := newReplicaSet(d, f, revision, size, "")
	rs.CreationTimestamp = metav1.NewTime(simulationStart.Add(-time.Hour))
	rs.Generation = 1
	rs.Status = appsv1.ReplicaSetStatus{
		Replicas: size, FullyLabeledReplicas: size, ReadyReplicas: size, AvailableReplicas: size, ObservedGeneration: 1,
	}
	return rs, nil
}
