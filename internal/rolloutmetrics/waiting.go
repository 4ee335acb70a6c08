package rolloutmetrics

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controller/unavailable"
)

// WaitingOn is what a rollout in progress waits for: a bounded set, so
// that it can label metrics.
type WaitingOn string

// What a rollout waits on.
const (
	// Scheduling: the new ReplicaSet's pods are not scheduled yet, or cannot be (Pending, Unschedulable).
	Scheduling WaitingOn = "scheduling"
	// ImagePull: their images are being pulled or cannot be (ContainerCreating, ErrImagePull, ImagePullBackOff,
	// InvalidImageName, ...).
	ImagePull WaitingOn = "image_pull"
	// Startup: their containers start, crash or are not Ready yet (NotReady, CrashLoopBackOff, a non-zero exit,
	// CreateContainerConfigError, ...).
	Startup WaitingOn = "startup"
	// MinReady: they are Ready but not yet for minReadySeconds.
	MinReady WaitingOn = "min_ready_seconds"
	// Termination: old pods are terminating and the new ReplicaSet's pods are all available.
	Termination WaitingOn = "termination"
	// Paused: the Deployment is paused (spec.paused).
	Paused WaitingOn = "paused"
	// Partition: the rollout is held at its partition (EX-1).
	Partition WaitingOn = "partition"
	// RolloutStep: a step of kubedeploy.io/rollout-steps holds the rollout on purpose: a pause step (EX-5), its
	// duration to pass or `kubedeploy rollout promote`, or an analysis (EX-6), its measurements to be taken or,
	// paused for a human, `kubedeploy rollout promote` or `abort` (Progressing reasons RolloutStepPaused,
	// RolloutAnalysisRunning, RolloutAnalysisPaused).
	RolloutStep WaitingOn = "rollout_step"
	// InvalidPolicy: an invalid kubedeploy.io/rollout-partition or kubedeploy.io/rollout-steps value holds the
	// rollout where it is (EX-1, EX-5, rolloutstate.PhaseInvalid) until someone fixes it.
	InvalidPolicy WaitingOn = "invalid_policy"
	// Controller: every pod of the new ReplicaSet is available and none is terminating: the controllers have yet
	// to take the next step or report it.
	Controller WaitingOn = "controller"
)

// waitingOnOf maps a reason unavailable.Of gives to what it makes a rollout wait on.
func waitingOnOf(reason string) WaitingOn {
	switch reason {
	case unavailable.Pending, "Unschedulable", "SchedulingGated":
		return Scheduling
	case unavailable.ContainerCreating, "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
		"RegistryUnavailable", "SignatureValidationFailed":
		return ImagePull
	case unavailable.MinReadySeconds:
		return MinReady
	case unavailable.Terminating:
		return Termination
	}
	return Startup
}

// Wait is what a rollout waits on at one moment, and the reason behind it:
// the reason unavailable.Of gives for the largest group of the new
// ReplicaSet's unavailable pods (ImagePullBackOff, NotReady, ...), or
// Paused, RolloutPartitioned, RolloutStepPaused, RolloutAnalysisRunning, RolloutAnalysisPaused,
// InvalidRolloutPartition, InvalidRolloutSteps, Terminating, or "" for Controller.
type Wait struct {
	On     WaitingOn
	Reason string
}

// waitOf says what d's rollout waits on at now: a pause, then a rollout step (stepReason: a pause step of EX-5 or
// an analysis of EX-6), then a partition (phase Held), then an invalid partition or invalid steps (phase Invalid),
// then the largest group of newPods' unavailable reasons (unavailable.Groups), then old pods terminating, else
// the controllers.
func waitOf(d *appsv1.Deployment, phase rolloutstate.Phase, newPods, oldPods []*v1.Pod, now time.Time) Wait {
	progressing := rolloutstate.Condition(&d.Status, appsv1.DeploymentProgressing)
	switch {
	case d.Spec.Paused:
		return Wait{Paused, "Paused"}
	case progressing != nil && stepReason(progressing.Reason) && phase != rolloutstate.PhaseComplete:
		return Wait{RolloutStep, progressing.Reason}
	case phase == rolloutstate.PhaseHeld:
		return Wait{Partition, rolloutstate.RolloutPartitioned}
	case phase == rolloutstate.PhaseInvalid && rolloutstate.HasRolloutSteps(d):
		return Wait{InvalidPolicy, rolloutstate.InvalidRolloutSteps}
	case phase == rolloutstate.PhaseInvalid:
		return Wait{InvalidPolicy, rolloutstate.InvalidRolloutPartition}
	}
	if groups := unavailable.Groups(newPods, d.Spec.MinReadySeconds, now); len(groups) > 0 {
		return Wait{waitingOnOf(groups[0].Reason), groups[0].Reason}
	}
	for _, p := range oldPods {
		if p.DeletionTimestamp != nil {
			return Wait{Termination, unavailable.Terminating}
		}
	}
	return Wait{Controller, ""}
}

// stepReason reports whether a Progressing reason says a rollout step holds the rollout on purpose: a pause step
// (EX-5, RolloutStepPaused), an analysis measuring (EX-6, RolloutAnalysisRunning) or one paused for a human
// (RolloutAnalysisPaused). None of them is a stuck rollout: KubedeployRolloutStuck leaves rollout_step out.
func stepReason(reason string) bool {
	switch reason {
	case rolloutstate.RolloutStepPaused, rolloutstate.RolloutAnalysisRunning, rolloutstate.RolloutAnalysisPaused:
		return true
	}
	return false
}
