// Package controlplane owns the embedded Kubernetes control plane that `kubedeploy up` runs in one process:
// embedded etcd, kube-apiserver, kube-controller-manager (its default controllers but deployment and replicaset:
// DefaultKubeControllers, or Config.KubeControllers), kube-scheduler and KWOK (simulated nodes and pod lifecycle),
// plus the certificates, keys and kubeconfigs under the data dir.
//
// It is the only package of kubedeploy that imports k8s.io/kubernetes.
//
// It must never:
//   - start kube-controller-manager's deployment or replicaset controllers (those are kubedeploy's own), except
//     under Config.UpstreamWorkloadControllers, an option only the differential tests (test/differential) set to
//     run the upstream reference implementation; `kubedeploy up` never sets it;
//   - be imported for anything other than running the embedded cluster (tests and `kubedeploy up`);
//   - listen on or contact anything but 127.0.0.1.
//
// Only one ControlPlane may run per process at a time: kube-apiserver, kube-controller-manager and
// kube-scheduler register global metrics, feature gates and configz entries. A ControlPlane may be stopped and a
// new one started in the same process (tests do this), but never two at once. Feature gates are one set per
// process (utilfeature.DefaultFeatureGate, which kube-apiserver reads on every request and the embedded
// kube-controller-manager and kube-scheduler share): each Start resets every gate to its default, then applies
// DefaultFeatureGates (ShardedListAndWatch on) and Config.FeatureGates, so a control plane never inherits the
// gates of an earlier one in the process.
//
// KWOK drives pods through their lifecycle with stages (see stages/*.yaml): a scheduled pod becomes Running and
// Ready after Config.PodStartupDelay; a Ready pod owned by a Job succeeds one Config.PodStartupDelay later; a pod
// with a deletionTimestamp is removed after Config.PodTerminationDelay; a pod any of whose container images has a
// tag starting with "broken" (for example "nginx:broken" or "nginx:broken-2") or the tag "404" (upstream e2e's
// "webserver:404") never becomes Ready and reports ImagePullBackOff, so failed rollouts can be shown without a
// registry; a pod any of whose container images has a tag starting with "crashloop" (for example "nginx:crashloop")
// becomes Ready, then crashes CrashLoopRunTime (5 s) after each start (restartCount up by one, CrashLoopBackOff,
// last state exit code 1, not Ready) and is Ready again one Config.PodStartupDelay later, forever, so a rollout of
// restarting pods can be shown.
package controlplane
