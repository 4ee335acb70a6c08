// Package shard is kubedeploy's sharded mode (`kubedeploy controllers --sharding`, spec SH-1…SH-8): several
// active replicas, each owning buckets of the namespace hash space (64-bit FNV-1a of metadata.namespace, as
// k8s.io/apimachinery/pkg/sharding and the API server's shardRange compute it) and running the controllers only
// for the namespaces of the buckets it owns.
//
// It owns:
//   - the ring (ring.go): the buckets' bounds, their steady pods (measure.go: a rollout's surge left out, SH-8),
//     who owns each, the members and the moves by cause, kept in one ConfigMap that every replica reads and
//     changes only with optimistic concurrency (SH-7); bounds follow the namespaces' hashes weighted by their
//     pods (bounds.go, SH-5);
//   - the plan (plan.go): a pure function from the ring, the live replicas and the time to the one next move,
//     with its cause; rebalancing at most once per RebalanceInterval (SH-5, SH-8);
//   - membership (member.go, members.go): one Lease per replica, renewed once per retry period (SH-6), whose
//     lapses end every claim of the replica (SH-2), the observation of the other replicas' Leases, and the
//     ring's members: joined, marked expired, their Lease deleted once their buckets are taken (SH-8);
//   - the coordinator (coordinator.go): takes, accepts and releases buckets and starts and stops what runs for
//     each through a Runner, with a Fence per bucket that a writer checks before every write (SH-2, SH-3);
//   - the scope (scope.go): which namespaces a bucket holds, as a client-side filter on informers' list and
//     watch and as ListOptions.ShardSelector where the API server filters (SH-4).
//
// It must never run a controller itself, never write to a namespace's objects, and never act on a bucket
// without a claim it won with its own conditional write in the current membership epoch.
package shard
