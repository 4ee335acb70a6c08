// Package replicaset is kubedeploy's ReplicaSet controller (spec sections
// 10-12 and 17; EH-9..EH-12; IM-4, IM-5). For each ReplicaSet it claims the
// matching pods (adopting orphans, releasing pods that no longer match),
// creates pods from the template with slow start or deletes the
// lowest-ranked ones until the active pods equal spec.replicas, and writes
// status once per sync with the ReplicaFailure condition.
//
// Shape: event handlers only enqueue keys and observe expectations; a sync
// reads from listers, deep-copies, decides with pure functions
// (podsToDelete, slowStartBatchSizes, calculateStatus, replicaDiff,
// nextAvailableCheck) and writes with a few named methods (createPods,
// deletePods, patchPod, updateStatus). The worker loop and retry policy are
// the shared runner's; expectations and the read-your-writes guard are the
// expectations package's.
//
// A nil spec.replicas is treated as 1, the API server default (VA-2). A
// missing, empty or invalid selector makes the ReplicaSet ignored (logged,
// not retried).
//
// It must never touch Deployments or ReplicaSet specs: its only writes are
// pod creates, deletes and adopt/release patches, and ReplicaSet status.
package replicaset
