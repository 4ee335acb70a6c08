// Package rolloutmetrics follows every Deployment's rollouts from the
// objects alone (Deployments, their ReplicaSets and pods, as an informer
// cache holds them) and exports what they did and what they wait on
// (issue 25): rollouts ended by outcome and their durations, and for each
// rollout in progress how long it has run and how long it waited on what
// (scheduling, image pulls, startup and readiness, minReadySeconds,
// termination of old pods, a pause, a partition, a rollout step); and for
// the analyses of rollout steps (EX-6), from the record the Deployment
// controller keeps on the Deployment, each metric's measurements by phase,
// its last value, and the analysis runs that hold a rollout (measuring, or
// waiting for a human).
//
// A rollout starts when a ReplicaSet becomes a Deployment's new one
// (rolloutstate.NewReplicaSet) and ends at its first of: complete (ST-9,
// rolloutstate.PhaseComplete), failed (ProgressDeadlineExceeded, ST-13, with
// no automatic rollback to come), rolled back (another, older ReplicaSet
// became the new one: `kubectl rollout undo`, EX-2) or superseded (a newer
// template's ReplicaSet did). Scaling a complete Deployment starts no
// rollout.
//
// It judges nothing itself: the phase and the new ReplicaSet come from
// rolloutstate, why a pod is not available from unavailable, the packages
// the controllers and `rollout watch` use. It never writes to the API
// server, so it runs the same beside kubedeploy's controllers and in
// observe mode, on a cluster whose controllers are upstream's.
package rolloutmetrics
