// Package shadow is observe mode's shadow check (issue 25): it runs kubedeploy's own Deployment and ReplicaSet
// syncs on a cluster whose rollouts another controller runs (kube-controller-manager's, on a managed cluster),
// on each Deployment once the live controller is done with it (Settled), through a client that records writes
// and sends none (recordingTransport). Every write kubedeploy would make at such a fixed point is a Divergence:
// what switching to kubedeploy would change. During rollouts, CheckBounds checks the live controller's
// ReplicaSet writes against the rolling-update bounds. Watcher runs the check as the caches change and reports
// each finding once; Checker.Once is `kubedeploy observe --once`.
//
// It writes nothing to the cluster by construction: the transport answers every non-read request itself, and
// refuses one made outside a recorded sync (ErrNoRecording). It links no fake clientset, so the
// kubedeploy-controllers binary, whose observe mode runs it, links none either.
package shadow
