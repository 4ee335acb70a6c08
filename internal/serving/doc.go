// Package serving serves a controller process's /healthz, /livez, /readyz and /metrics (and, if asked, Go's
// pprof handlers): over HTTPS with authentication and authorization delegated to the API server as
// kube-controller-manager's (Secure: client certificates against the cluster's client CA, bearer tokens by
// TokenReview, paths by SubjectAccessReview, the health paths open to anyone), or over plain HTTP with neither
// (Plain, observe mode's). It also holds the "informer-sync" readiness check (SyncCheck) that the controllers'
// caches drive.
//
// It owns the endpoints only: the checks behind /healthz and /readyz, other than SyncCheck, are given to it,
// and the metrics are whatever the process registered in the legacy registry. It must never start controllers
// or informers, nor write to the API server other than the TokenReviews and SubjectAccessReviews it asks.
package serving
