// Package ownership resolves, claims, adopts and releases objects by
// ControllerRef (spec section 10, AD-1..AD-8; EH-5 resolution).
//
// It is shared by the Deployment controller (which claims ReplicaSets) and the
// ReplicaSet controller (which claims pods). It only decides and sends the
// adopt/release patches it is handed a function for; it never lists, creates
// or deletes anything, and it never decides which objects are candidates
// (callers filter, e.g. AD-8's active pods).
package ownership
