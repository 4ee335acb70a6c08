package simulator

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Config says how the simulated cluster under Simulate behaves.
type Config struct {
	// PodStartup is the time from a pod's creation to it being Ready; it is
	// available spec.minReadySeconds later. 0 means DefaultPodStartup. It is
	// also the time a pod of the cluster is given to turn Ready: one Running
	// and not Ready for longer never turns Ready (failing.go).
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
	// maxSyncs bounds the Deployment syncs of one simulation (a rollout of
	// N replicas needs O(N) syncs at worst, with maxSurge 0/maxUnavailable 1).
	maxSyncs = 100_000
)

// Step is one write of ReplicaSet sizes the Deployment controller makes
// during a simulated rollout: the sizes after it, in replicas.
type Step struct {
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
	// DeletedPods names the pods the ReplicaSet controller deleted after the
	// step's size write (RS-14's victims), sorted; simulated pods have
	// simulated names.
	DeletedPods []string `json:"deletedPods,omitempty"`
	// Spread is the live pods per topology domain of Plan.SpreadKey after the step (EX-4), every node's domain
	// listed; nil without a spread.
	Spread map[string]int `json:"spread,omitempty"`
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
	// SpreadKey is the node label key of the Deployment's kubedeploy.io/scale-down-spread (its first key for
	// "template") when State.Nodes were given: each Step's Spread is over it. "" otherwise.
	SpreadKey string `json:"spreadKey,omitempty"`
	// Steps are the size writes in order.
	Steps []Step `json:"steps"`
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
	// Complete): for a held or invalid verdict, rolloutstate.Verdict's
	// Summary; for failing pods, Stuck.Summary.
	Stopped string `json:"stopped,omitempty"`
	// Stuck, when the rollout will not complete without a change because
	// pods fail (failing.go: an image that cannot be pulled, a crash loop, a
	// pod never Ready), names them and says when the progress deadline
	// passes and what EX-2 then does; nil otherwise.
	Stuck *Stuck `json:"stuck,omitempty"`
	// Verdict is rolloutstate.PhaseHeld or PhaseInvalid when the simulation
	// stopped there (EX-1, EX-5), "" otherwise.
	Verdict rolloutstate.Phase `json:"verdict,omitempty"`
	// RolloutSteps are the Deployment's kubedeploy.io/rollout-steps (EX-5) with the pods each allows, when they
	// are valid and apply to this rollout (there are old pods to keep); nil otherwise. The Steps above are the
	// size writes they lead to: a timed pause is waited out on the simulated clock, an untimed one ends the plan
	// held (Stopped).
	RolloutSteps []RolloutStep `json:"rolloutSteps,omitempty"`
}

// RolloutStep is one step of kubedeploy.io/rollout-steps in a Plan.
type RolloutStep struct {
	// Step describes it: "setWeight 20", "pause 12s", "pause until promoted".
	Step string `json:"step"`
	// Pods is the most pods on the new template while it runs (rolloutstate.StepPods of the setWeight in
	// force), in replicas.
	Pods int32 `json:"pods"`
	// WaitsFor is what ends it: "pods" (its pods updated and available), "pause" (its duration) or "promotion"
	// (`kubedeploy rollout promote`).
	WaitsFor rolloutstate.StepWait `json:"waitsFor"`
}

// rolloutStepsOf returns d's rollout steps for a Plan (Plan.RolloutSteps): nil unless they are valid and
// rss, d's ReplicaSets before the change, have pods to keep.
func rolloutStepsOf(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []RolloutStep {
	steps, invalid := rolloutstate.StepsOf(d)
	if invalid != nil || steps == nil || !rolloutstate.StepsApply(d, 0, nil, rss) {
		return nil
	}
	out := make([]RolloutStep, len(steps))
	for i, s := range steps {
		out[i] = RolloutStep{Step: s.String(), Pods: rolloutstate.StepPods(steps.WeightAt(i), rolloutstate.Replicas(d)), WaitsFor: s.WaitsFor()}
	}
	return out
}

// NewReplicaSetSizes returns the new ReplicaSet's spec.replicas over the
// plan's steps, from its creation on, without repeats: the sizes the
// controller writes to it, in order (replicas).
func (p *Plan) NewReplicaSetSizes() []int32 {
	return p.sizes(func(s Step) (int32, bool) { return s.NewReplicas, s.NewReplicaSetExists })
}

// OldReplicaSetSizes returns old ReplicaSet i's (in OldReplicaSets' order)
// spec.replicas over the plan's steps, without repeats (replicas). It
// panics when i is out of range.
func (p *Plan) OldReplicaSetSizes(i int) []int32 {
	if i < 0 || i >= len(p.OldReplicaSets) {
		panic(fmt.Sprintf("plan has %d old ReplicaSets, no %d", len(p.OldReplicaSets), i))
	}
	return p.sizes(func(s Step) (int32, bool) { return s.OldReplicas[i], true })
}

func (p *Plan) sizes(of func(Step) (int32, bool)) []int32 {
	var out []int32
	for _, s := range p.Steps {
		if n, ok := of(s); ok && (len(out) == 0 || out[len(out)-1] != n) {
			out = append(out, n)
		}
	}
	return out
}
