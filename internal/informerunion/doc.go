// Package informerunion is one informer over several that come and go while it is used: sharded mode's
// per-bucket informers (SH-9), each listing and watching the objects of one bucket's namespaces, seen by one
// long-lived set of controllers as one cache.SharedIndexInformer per resource.
//
// It owns:
//   - Informer (union.go): handlers registered on it are registered on every member informer, present and
//     future, and are called one event at a time as client-go calls a handler; a member removed looks to them
//     as if its objects had been deleted (tombstones, as after a relist that no longer holds them);
//   - its indexer (indexer.go): reads over the members' stores, a key's namespace routed to the one member
//     that holds it (as are NamespaceIndex lookups), any other index queried on every member;
//   - Factory (factory.go): an informers.SharedInformerFactory whose Deployment, ReplicaSet and pod
//     informers are Informers, everything else its base factory's.
//
// It must never start, stop or list anything itself: members are built, started and stopped by their owner
// (internal/manager), and it holds no object of its own.
package informerunion
