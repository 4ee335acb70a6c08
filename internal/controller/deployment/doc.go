// Package deployment is kubedeploy's Deployment controller (spec sections
// 1–9, 10 (with package ownership) and 11 of docs/spec.md, with the
// improvements IM-1..IM-4 and IM-6..IM-8 and the extensions EX-0..EX-4 of its
// first sections).
//
// It owns the reconciliation of apps/v1 Deployments into ReplicaSets: claiming
// (adopting and releasing) ReplicaSets by ControllerRef, computing the
// pod-template-hash and naming new ReplicaSets, revision bookkeeping, rolling
// and recreate rollouts, proportional scaling, rollback through the
// deprecated rollback annotation, revision-history cleanup, and the
// Deployment status (counts and the Available, Progressing and
// ReplicaFailure conditions).
//
// Shape: event handlers only enqueue keys (handlers.go); one shared worker
// loop (internal/controller/runner) calls syncDeployment, which reads from the
// informer caches, computes a per-sync context once (syncContext: the
// Deployment copy, its fenceposts and partition, new and old ReplicaSets,
// pods by ReplicaSet, now), decides with pure functions (calculateStatus,
// rolloutstate.Fenceposts.MaxTotal, newRSNewReplicas, proportionalSizes,
// isScalingEvent, …; the new ReplicaSet's bounds meet in newReplicaSetSize)
// and performs a few named writes, all in writes.go (create,
// patchReplicaSet, writeStatus, …). After every write it continues from
// the object the API server returned (IM-2). NewSyncer
// returns the same syncDeployment without the queue or the handlers, for
// internal/simulator (`kubedeploy rollout plan`). Rollout metrics are not
// its business: internal/rolloutmetrics derives them from the objects,
// beside the controllers (and without them, in observe mode).
//
// It must never create, delete or patch pods (SD-14): pods belong to the
// ReplicaSet controller. It writes ReplicaSets (create, conditioned JSON
// patches of sizes and annotations, adopt/release patch, delete during
// cleanup) and Deployments (status subresource; a conditioned JSON patch of
// annotations and template for rollback, never a whole object, IM-8).
// Decisions are made on typed objects; where a pod template has fields
// kubedeploy's API does not know, Config.Templates (rawtemplate) supplies
// the template as stored, which the ReplicaSet create (sent through the
// Client seam, CreateReplicaSetUnstructured, so that the recording client of
// the simulator and the shadow check sees it too) and the rollback patch
// carry, and whose fingerprint the pod-template-hash folds in; a Deployment
// with unknown spec fields outside its template is not managed
// (UnsupportedDeploymentField, IM-8). It
// must never import k8s.io/kubernetes, and it
// must never act on a ReplicaSet cache older than its own last write for a
// Deployment (IM-4): such syncs return an error and are retried with backoff.
package deployment
