// Package expectations owns the two guards that stop a controller from acting
// on an informer cache that does not yet show its own writes:
//
//   - Tracker: create/delete expectations per controller key with
//     UID/key-tracked deletions and a 5 minute TTL (RS-8..RS-11). Expiry is
//     logged once per record and counted in the
//     kubedeploy_expectations_expired_total{controller} metric.
//   - ConsistencyTracker: resourceVersion-based read-your-writes (IM-4,
//     KEP-5647 gate StaleControllerConsistencyReplicaSet, RS-1). It records
//     the resourceVersion returned by the controller's own writes and reports
//     whether the informer stores have observed them, with a cap so that a key
//     can never be wedged forever.
//
// The package keeps only in-memory bookkeeping. It must never talk to the API
// server, read listers, enqueue keys or know about Deployments, ReplicaSets or
// pods beyond the string keys it is handed. Every type takes an injected clock
// and is safe for concurrent use.
package expectations
