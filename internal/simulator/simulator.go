// Package simulator predicts a Deployment's rollout by running kubedeploy's
// own controllers, not a model of them: the Deployment controller's sync and
// the ReplicaSet controller's sync (slow start, RS-14's victim ranking,
// status, minReadySeconds), each through its NewSyncer entry point, against an in-memory API
// server (an object tracker behind a dryrun.Client, whose write hook stands in
// for the API server, the scheduler, a kubelet and the garbage collector), on
// a fake clock. `kubedeploy rollout plan` prints what it returns.
//
// It sits above both controllers and holds all of the simulated cluster, so
// the controllers' packages (and the kubedeploy-controllers binary) link none
// of it; it links no fake clientset. Simulated syncs touch no process-wide metrics and send no events.
package simulator

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/deployment"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/controller/replicaset"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/runner"
)

// replicaSetRounds bounds the ReplicaSet syncs run, every ReplicaSet once a
// round, until a round writes nothing: a sync that creates or deletes pods
// writes its status on the next one, so two or three rounds suffice.
const replicaSetRounds = 10

var deploymentKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Simulate predicts the rollout kubedeploy's controllers perform for
// from.Deployment (as it is or will be after a change; its status as
// stored) over from.ReplicaSets (the ReplicaSets it owns now, with their
// status) and their pods: pods are created by the ReplicaSet controller,
// become Ready cfg.PodStartup after creation and available minReadySeconds
// later (rolloutstate.PodAvailable on the simulated clock), and stay
// Terminating cfg.PodTermination after deletion. The pods in from.Pods are
// taken as they are, with their nodes, ages and readiness, so RS-14 picks
// among them as it would on the cluster (one not yet Ready turns Ready
// PodStartup after its creation, or at once, unless it fails: failing.go
// says which pods never turn Ready and which templates' new pods fail too);
// a ReplicaSet none of them belongs to gets pods made from its status
// (available ones are available now, ready ones become available after
// minReadySeconds, the others Ready after PodStartup), on one node. A paused Deployment is
// simulated as if resumed (Plan.Paused says so). It never talks to a real
// API server.
//
// It returns an error when from is not what the controller could sync (no
// name, an invalid selector or strategy, a ReplicaSet the Deployment does
// not control) or when a simulated sync fails; a rollout that stops
// progressing (for example pods that never become available) is not an
// error: Plan.Stopped says why, and Plan.Stuck names failing pods.
func Simulate(ctx context.Context, from State, cfg Config) (*Plan, error) {
	if cfg.PodStartup <= 0 {
		cfg.PodStartup = DefaultPodStartup
	}
	if cfg.Horizon <= 0 {
		cfg.Horizon = DefaultHorizon
	}
	if err := validate(from.Deployment); err != nil {
		return nil, err
	}
	s, err := newSimulation(ctx, from, cfg)
	if err != nil {
		return nil, err
	}
	return s.run()
}

// validate returns an error for a Deployment the controller would not roll
// out: no name, a missing, empty or invalid selector, invalid fenceposts.
func validate(d *appsv1.Deployment) error {
	if d == nil || d.Name == "" {
		return errors.New("simulate: the Deployment has no name")
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || d.Spec.Selector == nil || sel.Empty() {
		return fmt.Errorf("simulate: Deployment %s has an invalid or empty selector", d.Name)
	}
	if _, err := rolloutstate.FencepostsOf(d); err != nil {
		return fmt.Errorf("simulate: Deployment %s: %w", d.Name, err)
	}
	return nil
}

// simulation is the state of one Simulate call.
type simulation struct {
	*cluster
	// deployments and replicaSets are the controllers' own syncs (NewSyncer).
	deployments runner.SyncFunc
	replicaSets runner.SyncFunc
	key         cache.ObjectName
	plan        *Plan
	// oldNames are the old ReplicaSets' names in the order first seen
	// (oldest first); steps report sizes in this order.
	oldNames []string
	// templates is what the syncs know of the templates as stored (storedTemplates, IM-8).
	templates *rawtemplate.Store
}

func newSimulation(ctx context.Context, from State, cfg Config) (*simulation, error) {
	d := from.Deployment.DeepCopy()
	plan := &Plan{Deployment: d.Name, Strategy: d.Spec.Strategy.Type, Replicas: rolloutstate.Replicas(d), Paused: d.Spec.Paused}
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
	objs := []runtime.Object{d}
	var seeded []*appsv1.ReplicaSet
	for i, rs := range from.ReplicaSets {
		rs = rs.DeepCopy()
		// A Deployment read from a manifest has no UID: any controller
		// reference is then taken as its own.
		ref := metav1.GetControllerOf(rs)
		if ref == nil || (ref.UID != d.UID && !simulatedUID) {
			return nil, fmt.Errorf("simulate: ReplicaSet %s is not controlled by Deployment %s", rs.Name, d.Name)
		}
		if ref.UID != d.UID {
			rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, deploymentKind)}
		}
		rs.Namespace = d.Namespace
		if rs.UID == "" {
			rs.UID = types.UID("simulated-rs-" + strconv.Itoa(i))
		}
		rs.ResourceVersion = "1"
		objs = append(objs, rs)
		seeded = append(seeded, rs)
	}
	c, err := newCluster(klog.NewContext(ctx, logr.Discard()), cfg, startOf(from), objs...)
	if err != nil {
		return nil, err
	}
	s := &simulation{cluster: c, key: cache.ObjectName{Namespace: d.Namespace, Name: d.Name}, plan: plan}
	if c.placement = newPlacement(d, from.Nodes); c.placement != nil {
		plan.SpreadKey = c.placement.key
		nodes := c.factory.Core().V1().Nodes().Informer().GetIndexer()
		for _, n := range from.Nodes {
			if err := nodes.Add(n.DeepCopy()); err != nil {
				return nil, fmt.Errorf("simulate: %w", err)
			}
		}
	}
	plan.RolloutSteps = rolloutStepsOf(d, seeded)
	for _, rs := range seeded {
		if err := s.seedPods(rs, from.Pods); err != nil {
			return nil, err
		}
	}
	if err := s.newSyncers(from.Stored); err != nil {
		return nil, err
	}
	return s, nil
}

// newSyncers builds both controllers' syncs over the cluster's caches, with the templates as stored of the
// objects the cluster holds (storedTemplates).
func (s *simulation) newSyncers(stored []*unstructured.Unstructured) error {
	var err error
	if s.templates, err = s.storedTemplates(stored); err != nil {
		return err
	}
	recorder := &record.FakeRecorder{} // no channel: events are dropped
	informers := s.factory.Apps().V1()
	deployments, errDeployment := deployment.NewSyncer(deployment.Config{
		Client: s.client, Recorder: recorder, Clock: s.clock, Templates: s.templates,
		Deployments: informers.Deployments(), ReplicaSets: informers.ReplicaSets(), Pods: s.factory.Core().V1().Pods(),
	})
	rsConfig := replicaset.Config{
		Client: s.client, Recorder: recorder, Clock: s.clock, Templates: s.templates,
		ReplicaSets: informers.ReplicaSets(), Pods: s.factory.Core().V1().Pods(),
	}
	if s.placement != nil {
		rsConfig.Nodes = s.factory.Core().V1().Nodes()
	}
	replicaSets, errReplicaSet := replicaset.NewSyncer(rsConfig)
	if err := errors.Join(errDeployment, errReplicaSet); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	s.deployments, s.replicaSets = deployments, replicaSets
	return nil
}

// run is the simulation loop: the kubelet and the ReplicaSet controller act,
// the Deployment controller syncs once; when none of them changes anything,
// time advances to the next pod event.
func (s *simulation) run() (*Plan, error) {
	if err := s.observe(); err != nil {
		return nil, err
	}
	total, available, err := s.totals()
	if err != nil {
		return nil, err
	}
	s.plan.PeakPods, s.plan.MinAvailable = total, available
	for range maxSyncs {
		podsChanged, err := s.settleReplicaSets()
		if err != nil {
			return nil, err
		}
		before, err := s.sizes()
		if err != nil {
			return nil, err
		}
		if _, err := s.deployments(s.ctx, s.key); err != nil {
			return nil, fmt.Errorf("simulate: Deployment sync at %s: %w", s.now, err)
		}
		if err := s.observe(); err != nil {
			return nil, err
		}
		after, err := s.sizes()
		if err != nil {
			return nil, err
		}
		if !before.equal(after) {
			if _, err := s.settleReplicaSets(); err != nil {
				return nil, err
			}
			if err := s.record(after); err != nil {
				return nil, err
			}
			continue
		}
		if stop, err := s.finished(); err != nil || stop {
			return s.plan, err
		}
		if podsChanged {
			continue
		}
		if stop, err := s.wait(); err != nil || stop {
			return s.plan, err
		}
	}
	return s.stop(fmt.Sprintf("not complete after %d simulated syncs", maxSyncs)), nil
}

// finished fills the plan and reports true when the stored Deployment shows
// the rollout complete or held by its partition.
func (s *simulation) finished() (bool, error) {
	st, err := s.state()
	if err != nil {
		return false, err
	}
	if done := st.complete(); done {
		s.plan.Complete = true
		s.plan.EstimatedSeconds = s.now.Seconds()
		return true, nil
	}
	if v, held := st.held(); held {
		s.stopHeld(v)
		return true, nil
	}
	return false, nil
}

// stopHeld stops the plan at v, a held or invalid verdict (EX-1).
func (s *simulation) stopHeld(v rolloutstate.Verdict) {
	s.plan.Partitioned = v.Phase == rolloutstate.PhaseHeld
	s.plan.Verdict = v.Phase
	s.stop(v.Summary)
}

// wait advances the clock to the next pod event; it reports true (with the
// plan stopped) when there is none within the horizon.
func (s *simulation) wait() (bool, error) {
	st, err := s.state()
	if err != nil {
		return false, err
	}
	minReady := map[types.UID]time.Duration{}
	for _, rs := range st.rss {
		minReady[rs.UID] = time.Duration(rs.Spec.MinReadySeconds) * time.Second
	}
	owners := map[types.UID]types.UID{}
	for _, pod := range st.pods {
		if ref := metav1.GetControllerOf(pod); ref != nil {
			owners[pod.UID] = ref.UID
		}
	}
	next, ok := s.nextEvent(minReady, func(pod types.UID) types.UID { return owners[pod] })
	if end, paused := s.stepPauseEnd(st); paused && (!ok || end < next) {
		next, ok = end, true // EX-5: a timed pause step ends
	}
	switch {
	case !ok:
		if v, held := st.held(); held {
			s.stopHeld(v)
			return true, nil
		}
		if stuck := s.stuckOf(st); stuck != nil {
			s.plan.Stuck = stuck
			s.stop(stuck.Summary())
			return true, nil
		}
		s.stop("no pod changes state any more and the controller makes no further step")
		return true, nil
	case next > s.cfg.Horizon:
		s.stop(fmt.Sprintf("not complete within %s of simulated time", s.cfg.Horizon))
		return true, nil
	}
	s.advance(next)
	return false, nil
}

// stepPauseEnd returns when the timed pause step (EX-5) holding the stored Deployment ends, as an offset on the
// simulated clock; ok is false when none holds it.
func (s *simulation) stepPauseEnd(st *state) (time.Duration, bool) {
	steps, invalid := rolloutstate.StepsOf(st.d)
	if invalid != nil || steps == nil || st.newRS == nil {
		return 0, false
	}
	rev, err := strconv.ParseInt(st.newRS.Annotations[rolloutstate.RevisionAnnotation], 10, 64)
	if err != nil {
		return 0, false
	}
	p := rolloutstate.AdvanceSteps(rolloutstate.StepInput{D: st.d, Steps: steps, Revision: rev, NewRS: st.newRS, AllRSs: st.rss, Now: s.clock.Now()})
	if p.Wait != rolloutstate.StepWaitTime {
		return 0, false
	}
	return s.now + p.Remaining, true
}

func (s *simulation) stop(why string) *Plan {
	s.plan.Stopped = why
	s.plan.EstimatedSeconds = s.now.Seconds()
	return s.plan
}

// settleReplicaSets runs the kubelet, then syncs every ReplicaSet (by the
// ReplicaSet controller's own sync) in rounds until a round writes nothing.
// It reports whether any pod or ReplicaSet changed.
func (s *simulation) settleReplicaSets() (bool, error) {
	changed, err := s.kubelet()
	if err != nil {
		return false, err
	}
	if changed {
		if err := s.observe(); err != nil {
			return false, err
		}
	}
	if err := s.replayResized(); err != nil {
		return false, err
	}
	for range replicaSetRounds {
		writes := s.writes
		list, err := world{s.tracker}.ListReplicaSets(s.ctx, s.key.Namespace)
		if err != nil {
			return false, fmt.Errorf("simulate: %w", err)
		}
		for i := range list.Items {
			key := cache.ObjectName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}
			before := s.writes
			if _, err := s.replicaSets(s.ctx, key); err != nil {
				return false, fmt.Errorf("simulate: ReplicaSet %s sync at %s: %w", key, s.now, err)
			}
			if s.writes == before {
				continue // the caches are still exact
			}
			if err := s.observe(); err != nil {
				return false, err
			}
		}
		if s.writes == writes {
			return changed, nil
		}
		changed = true
	}
	return false, fmt.Errorf("simulate: the ReplicaSets still changed after %d rounds of syncs at %s", replicaSetRounds, s.now)
}

// replayResized syncs each ReplicaSet the Deployment controller wrote since
// the last replay as that write left it, in order, all but the last write
// of each (the rounds that follow sync the stored one): the ReplicaSet
// controller acts on every size it sees, so its victims for a later size
// are chosen with the earlier victims already Terminating, as on a cluster.
func (s *simulation) replayResized() error {
	resized := s.takeResized()
	idx := s.factory.Apps().V1().ReplicaSets().Informer().GetIndexer()
	for i, rs := range resized {
		if !slices.ContainsFunc(resized[i+1:], func(later *appsv1.ReplicaSet) bool { return later.UID == rs.UID }) {
			continue
		}
		stored, ok, err := idx.GetByKey(rs.Namespace + "/" + rs.Name)
		if err != nil || !ok {
			continue // deleted since (history cleanup)
		}
		rs = rs.DeepCopy()
		rs.Status = stored.(*appsv1.ReplicaSet).Status
		if err := idx.Update(rs); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		key := cache.ObjectName{Namespace: rs.Namespace, Name: rs.Name}
		if _, err := s.replicaSets(s.ctx, key); err != nil {
			return fmt.Errorf("simulate: ReplicaSet %s sync at %s: %w", key, s.now, err)
		}
		if err := s.observe(); err != nil {
			return err
		}
	}
	return nil
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

// sizes reads the current ReplicaSets' sizes.
func (s *simulation) sizes() (replicaSetSizes, error) {
	st, err := s.state()
	if err != nil {
		return replicaSetSizes{}, err
	}
	out := replicaSetSizes{old: map[string]int32{}}
	if st.newRS != nil {
		out.newName, out.newSize = st.newRS.Name, rolloutstate.ReplicaSetReplicas(st.newRS)
	}
	for _, rs := range st.oldRSs {
		out.old[rs.Name] = rolloutstate.ReplicaSetReplicas(rs)
	}
	return out, nil
}

// record appends the step whose sizes are after.
func (s *simulation) record(after replicaSetSizes) error {
	p := s.plan
	if after.newName != "" {
		p.NewReplicaSet = after.newName
	}
	st, err := s.state()
	if err != nil {
		return err
	}
	for _, rs := range st.oldRSs {
		if !slices.Contains(s.oldNames, rs.Name) {
			s.oldNames = append(s.oldNames, rs.Name)
		}
	}
	p.OldReplicaSets = slices.Clone(s.oldNames)
	oldSizes := make([]int32, len(s.oldNames))
	for i, name := range s.oldNames {
		oldSizes[i] = after.old[name] // 0 once deleted (history cleanup)
	}
	total, available := st.totals(s.clock.Now())
	p.Steps = append(p.Steps, Step{
		Seconds: s.now.Seconds(), NewReplicas: after.newSize, NewReplicaSetExists: after.newName != "",
		OldReplicas: oldSizes, MaxTotal: total, MinAvailable: available, DeletedPods: s.takeDeleted(),
	})
	if s.placement != nil {
		p.Steps[len(p.Steps)-1].Spread = s.placement.spread(st.pods)
	}
	p.PeakPods = max(p.PeakPods, total)
	p.MinAvailable = min(p.MinAvailable, available)
	return nil
}

// totals returns the sum of spec.replicas and the available pods now.
func (s *simulation) totals() (total, available int32, err error) {
	st, err := s.state()
	if err != nil {
		return 0, 0, err
	}
	total, available = st.totals(s.clock.Now())
	return total, available, nil
}

// state reads the stored Deployment, the ReplicaSets it controls and their
// pods.
func (s *simulation) state() (*state, error) {
	w := world{s.tracker}
	d, err := w.GetDeployment(s.ctx, s.key.Namespace, s.key.Name)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	list, err := w.ListReplicaSets(s.ctx, s.key.Namespace)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	pods, err := w.ListPods(s.ctx, s.key.Namespace, labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	st := &state{d: d, rss: rolloutstate.ControlledReplicaSets(list, d.UID)}
	st.newRS = s.templates.NewReplicaSet(d, st.rss)
	st.oldRSs = rolloutstate.OldReplicaSets(st.rss, st.newRS)
	st.pods = rolloutstate.Items(pods.Items)
	return st, nil
}
