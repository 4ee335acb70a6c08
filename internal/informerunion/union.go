package informerunion

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Informer is a cache.SharedIndexInformer over member informers, each holding the objects of a group of
// namespaces no other member holds (a shard bucket). It never runs them: their owner starts each before or
// after Add and stops it before Remove. Build it with New; safe for concurrent use.
type Informer struct {
	mu      sync.RWMutex
	members map[int]*member
	// ids are the members' ids, sorted: the order of List and of the queries of every member.
	ids      []int
	handlers []*registration
	indexers cache.Indexers
	// transform and the watch error handlers are applied to every member added after they are set.
	transform   cache.TransformFunc
	watchErr    cache.WatchErrorHandler
	watchErrCtx cache.WatchErrorHandlerWithContext

	indexer *indexer
}

// member is one member informer: its namespaces, and the registrations of the union's handlers on it.
type member struct {
	contains func(namespace string) bool
	inf      cache.SharedIndexInformer
	regs     map[*registration]cache.ResourceEventHandlerRegistration
}

// New returns an Informer with no member, whose indexers are indexers plus cache.NamespaceIndex (the index
// every member must have, as the informers of client-go's factories do).
func New(indexers cache.Indexers) *Informer {
	u := &Informer{members: map[int]*member{}, indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}}
	maps.Copy(u.indexers, indexers)
	u.indexer = &indexer{u: u}
	return u
}

// Add makes inf the member id, holding the objects of the namespaces contains reports: the union's indexers
// it lacks are added to it, then its handlers (an informer started already replays its objects to them as
// adds). Add it before it starts so that its indexers can be added. The error is inf's (a stopped informer
// refuses handlers and indexers), or a member id already added; nothing is added then.
func (u *Informer) Add(id int, contains func(namespace string) bool, inf cache.SharedIndexInformer) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.members[id]; ok {
		return fmt.Errorf("informer union: member %d added twice", id)
	}
	missing := cache.Indexers{}
	for name, f := range u.indexers {
		if _, ok := inf.GetIndexer().GetIndexers()[name]; !ok {
			missing[name] = f
		}
	}
	if err := errors.Join(u.configure(inf), inf.AddIndexers(missing)); err != nil {
		return fmt.Errorf("informer union: member %d: %w", id, err)
	}
	m := &member{contains: contains, inf: inf, regs: map[*registration]cache.ResourceEventHandlerRegistration{}}
	for _, r := range u.handlers {
		reg, err := inf.AddEventHandlerWithOptions(r.serial(), r.options)
		if err != nil {
			m.removeHandlers()
			return fmt.Errorf("informer union: member %d: %w", id, err)
		}
		m.regs[r] = reg
	}
	u.members[id] = m
	u.ids = append(u.ids, id)
	slices.Sort(u.ids)
	return nil
}

// configure sets the union's transform and watch error handlers on inf. Call with mu held.
func (u *Informer) configure(inf cache.SharedIndexInformer) error {
	var errs []error
	if u.transform != nil {
		errs = append(errs, inf.SetTransform(u.transform))
	}
	if u.watchErr != nil {
		errs = append(errs, inf.SetWatchErrorHandler(u.watchErr))
	}
	if u.watchErrCtx != nil {
		errs = append(errs, inf.SetWatchErrorHandlerWithContext(u.watchErrCtx))
	}
	return errors.Join(errs...)
}

// removeHandlers removes the union's handlers from the member's informer.
func (m *member) removeHandlers() {
	for r, reg := range m.regs {
		_ = m.inf.RemoveEventHandler(reg) // only a handle of another informer is refused
		delete(m.regs, r)
	}
}

// Remove removes the member id and returns its informer (false if there is none): its objects leave the
// union's reads at once, the union's handlers are removed from it, and each handler is then given a delete of
// every object it held, as a cache.DeletedFinalStateUnknown (what a relist that no longer holds an object
// delivers). Stop the informer first, so that no event of its own reaches a handler after those deletes.
func (u *Informer) Remove(id int) (cache.SharedIndexInformer, bool) {
	u.mu.Lock()
	m, ok := u.members[id]
	delete(u.members, id)
	u.ids = slices.DeleteFunc(u.ids, func(i int) bool { return i == id })
	handlers := slices.Clone(u.handlers)
	u.mu.Unlock()
	if !ok {
		return nil, false
	}
	m.removeHandlers()
	objs := m.inf.GetStore().List()
	for _, r := range handlers {
		for _, obj := range objs {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				continue
			}
			r.serial().OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: obj})
		}
	}
	return m.inf, true
}

// Members returns the ids of the members, sorted.
func (u *Informer) Members() []int {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return slices.Clone(u.ids)
}

// MemberSynced reports whether member id's informer has synced and every handler of the union has been given
// its initial objects (false for no such member).
func (u *Informer) MemberSynced(id int) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	m, ok := u.members[id]
	if !ok || !m.inf.HasSynced() {
		return false
	}
	for _, reg := range m.regs {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

// each calls f with every member, in id order, under the read lock; f must not call back into the union.
func (u *Informer) each(f func(m *member) bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	for _, id := range u.ids {
		if !f(u.members[id]) {
			return
		}
	}
}

// route returns the member holding namespace's objects, nil if none. Call with mu held (read).
func (u *Informer) route(namespace string) *member {
	for _, id := range u.ids {
		if m := u.members[id]; m.contains(namespace) {
			return m
		}
	}
	return nil
}

// AddEventHandler registers h on every member, present and future (AddEventHandlerWithOptions).
func (u *Informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return u.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod is AddEventHandlerWithOptions with a resync period.
func (u *Informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return u.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions registers h, with options, on every member now and on every member added later;
// h is called one event at a time, whichever member it comes from. The registration has synced when h has
// been given the initial objects of every member. The error is a member's (nothing is registered then).
func (u *Informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	r := &registration{u: u, handler: h, options: options}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range u.ids {
		m := u.members[id]
		reg, err := m.inf.AddEventHandlerWithOptions(r.serial(), options)
		if err != nil {
			u.removeRegistration(r)
			return nil, fmt.Errorf("informer union: member %d: %w", id, err)
		}
		m.regs[r] = reg
	}
	u.handlers = append(u.handlers, r)
	return r, nil
}

// RemoveEventHandler removes a registration AddEventHandler returned from every member. The error is for a
// handle of another informer.
func (u *Informer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok || r.u != u {
		return fmt.Errorf("informer union: not a registration of this informer: %T", handle)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.removeRegistration(r)
	return nil
}

// removeRegistration removes r from the members and the handlers. Call with mu held.
func (u *Informer) removeRegistration(r *registration) {
	for _, m := range u.members {
		if reg, ok := m.regs[r]; ok {
			_ = m.inf.RemoveEventHandler(reg)
			delete(m.regs, r)
		}
	}
	u.handlers = slices.DeleteFunc(u.handlers, func(h *registration) bool { return h == r })
}

// GetStore returns the union's indexer.
func (u *Informer) GetStore() cache.Store { return u.indexer }

// GetIndexer returns the union's indexer: reads over the members' stores (indexer.go). It implements
// expectations.NamespacedVersions.
func (u *Informer) GetIndexer() cache.Indexer { return u.indexer }

// GetController returns the union itself: it runs nothing (Run).
func (u *Informer) GetController() cache.Controller { return u }

// Run returns when stopCh is closed: the union runs nothing, its members are run by their owner.
func (u *Informer) Run(stopCh <-chan struct{}) { <-stopCh }

// RunWithContext returns when ctx ends (Run).
func (u *Informer) RunWithContext(ctx context.Context) { <-ctx.Done() }

// HasSynced reports whether every member has synced (true with none).
func (u *Informer) HasSynced() bool {
	synced := true
	u.each(func(m *member) bool { synced = m.inf.HasSynced(); return synced })
	return synced
}

// HasSyncedChecker returns a checker done once every member of now has synced.
func (u *Informer) HasSyncedChecker() cache.DoneChecker {
	var checkers []cache.DoneChecker
	u.each(func(m *member) bool { checkers = append(checkers, m.inf.HasSyncedChecker()); return true })
	return allDone("informer union", checkers)
}

// LastSyncResourceVersion is the oldest of the members' (the newest every member has synced; "" with none).
func (u *Informer) LastSyncResourceVersion() string {
	var rvs []string
	u.each(func(m *member) bool { rvs = append(rvs, m.inf.LastSyncResourceVersion()); return true })
	return oldest(rvs)
}

// SetWatchErrorHandler sets h on the members added from now on (and on no member added already).
func (u *Informer) SetWatchErrorHandler(h cache.WatchErrorHandler) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.watchErr = h
	return nil
}

// SetWatchErrorHandlerWithContext sets h on the members added from now on (and on no member added already).
func (u *Informer) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.watchErrCtx = h
	return nil
}

// SetTransform sets f on the members added from now on; it returns an error when there are members already
// (their objects would not all have been transformed alike).
func (u *Informer) SetTransform(f cache.TransformFunc) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.members) > 0 {
		return errors.New("informer union: a transform must be set before any member is added")
	}
	u.transform = f
	return nil
}

// IsStopped reports false: the union is never stopped (its members are).
func (u *Informer) IsStopped() bool { return false }

// AddIndexers adds indexers to the union and to every member, present and future. The error is for a name
// the union has already, or a member's (a started member may refuse).
func (u *Informer) AddIndexers(indexers cache.Indexers) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for name := range indexers {
		if _, ok := u.indexers[name]; ok {
			return fmt.Errorf("informer union: indexer %q already exists", name)
		}
	}
	var errs []error
	for _, id := range u.ids {
		if err := u.members[id].inf.AddIndexers(indexers); err != nil {
			errs = append(errs, fmt.Errorf("member %d: %w", id, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("informer union: %w", err)
	}
	maps.Copy(u.indexers, indexers)
	return nil
}

// registration is one handler of the union: its registrations on the members call it one event at a time.
type registration struct {
	u       *Informer
	handler cache.ResourceEventHandler
	options cache.HandlerOptions
	// calls serializes the handler's calls from every member (client-go calls one registration's handler
	// from one goroutine; a union's handler is called by as many as it has members).
	calls sync.Mutex
}

// serial returns the handler registered on members: r's, called under r.calls.
func (r *registration) serial() cache.ResourceEventHandler { return serialHandler{r} }

// HasSynced reports whether the handler has been given the initial objects of every member.
func (r *registration) HasSynced() bool {
	synced := true
	r.u.each(func(m *member) bool {
		if reg, ok := m.regs[r]; ok {
			synced = reg.HasSynced()
		}
		return synced
	})
	return synced
}

// HasSyncedChecker returns a checker done once the handler has been given the initial objects of every
// member of now.
func (r *registration) HasSyncedChecker() cache.DoneChecker {
	var checkers []cache.DoneChecker
	r.u.each(func(m *member) bool {
		if reg, ok := m.regs[r]; ok {
			checkers = append(checkers, reg.HasSyncedChecker())
		}
		return true
	})
	return allDone("informer union handler", checkers)
}

type serialHandler struct{ r *registration }

func (s serialHandler) OnAdd(obj any, isInInitialList bool) {
	s.r.calls.Lock()
	defer s.r.calls.Unlock()
	s.r.handler.OnAdd(obj, isInInitialList)
}

func (s serialHandler) OnUpdate(oldObj, newObj any) {
	s.r.calls.Lock()
	defer s.r.calls.Unlock()
	s.r.handler.OnUpdate(oldObj, newObj)
}

func (s serialHandler) OnDelete(obj any) {
	s.r.calls.Lock()
	defer s.r.calls.Unlock()
	s.r.handler.OnDelete(obj)
}

// doneChecker is a cache.DoneChecker over a channel.
type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }

// allDone returns a checker done once every one of checkers is (at once for none). Its goroutine ends then.
func allDone(name string, checkers []cache.DoneChecker) cache.DoneChecker {
	done := make(chan struct{})
	go func() {
		for _, c := range checkers {
			<-c.Done()
		}
		close(done)
	}()
	return doneChecker{name: name, done: done}
}
