// Package runner owns the one worker loop that every kubedeploy controller uses:
// a named, rate-limited, typed workqueue of object keys, N workers, and a single
// retry policy (IM-5). It also holds the small helpers both controllers share:
// tombstone unwrapping (ObjectFrom), enqueueing an object (EnqueueObject),
// the "caches behind our writes" wait (ErrCacheBehind) and required-field
// checks for their Configs (RequiredFields).
//
// It must never contain controller decisions: it does not know about
// Deployments, ReplicaSets or pods. It never drops a failing key (IM-5: one
// retry policy for both controllers, unlike upstream's 15-retry cap for
// Deployments, CM-3) and never uses error backoff for time-based wake-ups
// (those use Result.RequeueAfter, which maps to AddAfter).
package runner
