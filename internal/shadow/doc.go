// Package shadow is observe mode's shadow check (issue 25): it runs kubedeploy's own Deployment and ReplicaSet
// syncs on a cluster whose rollouts another controller runs (kube-controller-manager's, on a managed cluster),
// on each Deployment once the live controller is done with it (Settled), through a client that records writes
// and sends none (dryrun.Client, the one the `rollout plan` simulator uses too). Every write kubedeploy would
// make at such a fixed point is a Divergence: what switching to kubedeploy would change. During rollouts, CheckBounds checks the live controller's
// ReplicaSet writes against the rolling-update bounds. Watcher runs the check as the caches change and reports
// each finding once; Checker.Once is `kubedeploy observe --once`.
//
// It writes nothing to the cluster by construction: the syncs get a dryrun.Client, whose reads go to the API
// server through a read-only clientset and whose writes are recorded and answered in the process; no request
// but a read leaves it. It links no fake clientset and no RoundTripper of its own, so the kubedeploy-controllers
// binary, whose observe mode runs it, links none either (TestLinksNoFakes).
package shadow
