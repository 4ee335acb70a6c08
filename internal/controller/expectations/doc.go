// Package expectations owns the two guards that stop a controller from acting
// on an informer cache that does not yet show its own writes:
//
//   - Tracker: create/delete expectations per controller key with
//     UID/key-tracked deletions and a 5 minute TTL (RS-8..RS-11). Expiry is
//     logged once per record and counted in the
//     kubedeploy_expectations_expired_total{controller} metric.
//   - ReadYourWrites: the read-your-writes guard of both controllers (IM-4;
//     KEP-5647 gate StaleControllerConsistencyReplicaSet, RS-1, for the
//     ReplicaSet controller). It records the resourceVersions returned by the
//     controller's own creates, updates and patches and the UIDs of its
//     deletes, and tells a sync whether the informer caches show them
//     (Fresh), not yet (Behind: wait), or still not after a cap (Stale: read
//     from the API server instead). The expectations TTL never overrides it.
//
// The package keeps only in-memory bookkeeping. It must never talk to the API
// server, read listers, enqueue keys or know about Deployments, ReplicaSets or
// pods beyond the string keys it is handed. Every type takes an injected clock
// and is safe for concurrent use.
package expectations
