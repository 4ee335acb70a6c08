package runner

import (
	"context"
	"slices"
	"sync"
)

// Scope is which namespaces the Runners sharing it act on now, for controllers whose share of the cluster
// changes while they run (sharded mode: one long-lived set of controllers per replica, buckets of namespaces
// admitted and dropped as the replica wins and gives them up, SH-3, SH-9). A namespace is admitted while a part
// holding it is. A Runner with a Scope drops the keys of other namespaces when they are enqueued and, if already
// queued, instead of syncing them; Drop waits for the syncs in flight of one part's namespaces, and only those.
//
// A nil *Scope admits every namespace and tracks nothing (unsharded mode: nothing changes). Build one with
// NewScope; safe for concurrent use.
type Scope struct {
	mu    sync.Mutex
	parts map[int]func(namespace string) bool
	// inflight are the syncs running now; landed is closed (and replaced) whenever one ends.
	inflight map[*flight]struct{}
	landed   chan struct{}
	hooks    []ScopeHooks
}

// flight is one sync in flight: its key's namespace and what cancels its context.
type flight struct {
	namespace string
	cancel    context.CancelFunc
}

// ScopeHooks are what a controller does as namespaces enter its Scope (Scope.Watch).
type ScopeHooks struct {
	// Forget, if set, drops what the controller remembers of the keys of the namespaces in reports (its
	// expectations): Admit calls it before they are admitted, so that their first syncs start from nothing
	// (SH-3), and Scope.Forget calls it.
	Forget func(in func(namespace string) bool)
	// Admitted, if set, enqueues once every key of the namespaces in reports, just admitted (their caches have
	// synced: SH-3's "sync after sync").
	Admitted func(in func(namespace string) bool)
}

// NewScope returns a Scope that admits no namespace yet.
func NewScope() *Scope {
	return &Scope{parts: map[int]func(string) bool{}, inflight: map[*flight]struct{}{}, landed: make(chan struct{})}
}

// Watch adds h to what Admit and Forget call. Controllers call it once, when built.
func (s *Scope) Watch(h ScopeHooks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, h)
}

// Admits reports whether namespace is admitted now; a nil Scope admits every namespace.
func (s *Scope) Admits(namespace string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admits(namespace)
}

// admits is Admits. Call with mu held.
func (s *Scope) admits(namespace string) bool {
	for _, in := range s.parts {
		if in(namespace) {
			return true
		}
	}
	return false
}

// Admit admits the namespaces in reports as part (an index the caller chooses: a bucket), in three steps:
// the hooks' Forget, then admission (from then on their keys are enqueued and synced), then the hooks'
// Admitted. Parts must not overlap. Admitting a part admitted already replaces its namespaces.
func (s *Scope) Admit(part int, in func(namespace string) bool) {
	s.Forget(in)
	s.mu.Lock()
	s.parts[part] = in
	hooks := slices.Clone(s.hooks)
	s.mu.Unlock()
	for _, h := range hooks {
		if h.Admitted != nil {
			h.Admitted(in)
		}
	}
}

// Forget calls every hook's Forget with in.
func (s *Scope) Forget(in func(namespace string) bool) {
	s.mu.Lock()
	hooks := slices.Clone(s.hooks)
	s.mu.Unlock()
	for _, h := range hooks {
		if h.Forget != nil {
			h.Forget(in)
		}
	}
}

// Drop stops admitting part's namespaces (their keys are dropped from then on, queued ones included), then
// waits for their syncs in flight to finish; syncs of other namespaces go on untouched. When ctx ends first, the
// contexts of the part's syncs still in flight are cancelled, and Drop waits for them to return. It returns
// how many it cancelled (0 when all finished by themselves, or when part was not admitted).
func (s *Scope) Drop(ctx context.Context, part int) (cancelled int) {
	s.mu.Lock()
	in, ok := s.parts[part]
	delete(s.parts, part)
	s.mu.Unlock()
	if !ok {
		return 0
	}
	done := ctx.Done()
	for {
		s.mu.Lock()
		var flying []*flight
		for f := range s.inflight {
			if in(f.namespace) {
				flying = append(flying, f)
			}
		}
		landed := s.landed
		s.mu.Unlock()
		if len(flying) == 0 {
			return cancelled
		}
		select {
		case <-landed:
		case <-done:
			for _, f := range flying {
				f.cancel()
			}
			cancelled, done = len(flying), nil // cancel once; then wait for them to return
		}
	}
}

// enter starts a sync of a key in namespace if the namespace is admitted: it returns the sync's context (a
// child of ctx that Drop may cancel) and the flight to pass to exit, or false when the key must be dropped. A nil
// Scope returns ctx.
func (s *Scope) enter(ctx context.Context, namespace string) (context.Context, *flight, bool) {
	if s == nil {
		return ctx, nil, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.admits(namespace) {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &flight{namespace: namespace, cancel: cancel}
	s.inflight[f] = struct{}{}
	return ctx, f, true
}

// exit ends the sync enter started.
func (s *Scope) exit(f *flight) {
	if s == nil || f == nil {
		return
	}
	f.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, f)
	close(s.landed)
	s.landed = make(chan struct{})
}

// InFlight returns the namespaces of the syncs in flight now, one entry per sync (for tests and logs).
func (s *Scope) InFlight() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.inflight))
	for f := range s.inflight {
		out = append(out, f.namespace)
	}
	slices.Sort(out)
	return out
}
