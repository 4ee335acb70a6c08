package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
)

// errControlPlaneFailed is returned by waits that were cut short because a component failed; Err has the cause.
var errControlPlaneFailed = errors.New("a control plane component failed")

// undo is one step of tearing down what Start did, run in reverse order by Stop.
type undo struct {
	name string
	fn   func() error
}

// supervisor runs components as goroutines, remembers how to undo every step of Start, and turns the first
// unexpected component exit into an orderly shutdown of everything.
type supervisor struct {
	base context.Context // carries the logger; never cancelled itself

	mu       sync.Mutex
	undos    []undo
	stopping bool
	failErr  error
	failed   chan struct{} // closed on the first component failure
	stopOnce sync.Once
	stopErr  error
	done     chan struct{} // closed once everything is stopped
}

func newSupervisor(ctx context.Context) *supervisor {
	return &supervisor{
		base:   context.WithoutCancel(ctx),
		failed: make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// setBase makes ctx's values (the logger) the base of every component context; ctx's cancellation is ignored.
func (s *supervisor) setBase(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base = context.WithoutCancel(ctx)
}

func (s *supervisor) baseContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// push records how to undo a step that just succeeded. If the control plane is already stopping (a component
// failed while Start was still running), the step is undone at once.
func (s *supervisor) push(name string, fn func() error) {
	s.mu.Lock()
	if !s.stopping {
		s.undos = append(s.undos, undo{name: name, fn: fn})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if err := fn(); err != nil {
		klog.FromContext(s.baseContext()).Error(err, "Stopping component started during shutdown", "component", name)
	}
}

// goRun runs a component: prepare builds it synchronously with the component's own context (an error means
// nothing was started), then run executes in a goroutine until that context is cancelled. An exit of run before
// its context is cancelled fails the whole control plane. Stopping cancels the context and waits up to timeout.
func (s *supervisor) goRun(name string, timeout time.Duration, prepare func(ctx context.Context) (func(context.Context) error, error)) error {
	base := s.baseContext()
	logger := klog.FromContext(base).WithValues("component", name)
	ctx, cancel := context.WithCancel(klog.NewContext(base, logger))
	run, err := prepare(ctx)
	if err != nil {
		cancel()
		return err
	}
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = run(ctx)
		if ctx.Err() == nil {
			if runErr == nil {
				runErr = errors.New("exited unexpectedly")
			}
			s.fail(fmt.Errorf("%s failed: %w", name, runErr))
		}
	}()
	s.push(name, func() error {
		cancel()
		select {
		case <-exited:
		case <-time.After(timeout):
			return fmt.Errorf("%s did not stop within %s", name, timeout)
		}
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			return fmt.Errorf("%s: %w", name, runErr)
		}
		return nil
	})
	logger.V(2).Info("Component started")
	return nil
}

// fail records the first failure and stops everything in the background.
func (s *supervisor) fail(err error) {
	s.mu.Lock()
	first := s.failErr == nil
	if first {
		s.failErr = err
		close(s.failed)
	}
	s.mu.Unlock()
	if first {
		klog.FromContext(s.baseContext()).Error(err, "Control plane component failed, stopping the control plane")
		go func() { _ = s.stop() }()
	}
}

// err returns the first component failure, or nil.
func (s *supervisor) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failErr
}

// stop undoes every recorded step in reverse order, once, and aggregates their errors.
func (s *supervisor) stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		undos := s.undos
		s.undos = nil
		s.stopping = true
		s.mu.Unlock()
		logger := klog.FromContext(s.baseContext())
		var errs []error
		for i := len(undos) - 1; i >= 0; i-- {
			start := time.Now()
			if err := undos[i].fn(); err != nil {
				errs = append(errs, err)
			}
			logger.V(2).Info("Stopped", "component", undos[i].name, "duration", time.Since(start))
		}
		s.stopErr = utilerrors.NewAggregate(errs)
		close(s.done)
	})
	<-s.done
	return s.stopErr
}
