package controlplane

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSupervisorStopsInReverseOrder(t *testing.T) {
	s := newSupervisor(context.Background())
	var mu sync.Mutex
	var order []string
	record := func(name string) func() error {
		return func() error { mu.Lock(); defer mu.Unlock(); order = append(order, name); return nil }
	}
	s.push("lock", record("lock"))
	s.push("etcd", record("etcd"))
	err := s.goRun("apiserver", time.Second, func(context.Context) (func(context.Context) error, error) {
		return func(ctx context.Context) error { <-ctx.Done(); record("apiserver")(); return ctx.Err() }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("stop = %v", err)
	}
	if want := []string{"apiserver", "etcd", "lock"}; !slices.Equal(order, want) {
		t.Errorf("stop order = %v, want %v", order, want)
	}
	if err := s.stop(); err != nil {
		t.Errorf("second stop = %v", err)
	}
	if s.err() != nil {
		t.Errorf("err after clean stop = %v", s.err())
	}
}

func TestSupervisorComponentFailureStopsEverything(t *testing.T) {
	s := newSupervisor(context.Background())
	etcdStopped := make(chan struct{})
	s.push("etcd", func() error { close(etcdStopped); return nil })
	boom := errors.New("boom")
	err := s.goRun("kube-scheduler", time.Second, func(context.Context) (func(context.Context) error, error) {
		return func(context.Context) error { return boom }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("control plane not stopped after a component failed")
	}
	<-etcdStopped
	if err := s.err(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "kube-scheduler failed") {
		t.Errorf("err = %v, want kube-scheduler failure", err)
	}
	// A component started after the failure (Start still running) is stopped at once.
	stopped := false
	s.push("late", func() error { stopped = true; return nil })
	if !stopped {
		t.Errorf("late component not stopped")
	}
}

func TestSupervisorStopTimeout(t *testing.T) {
	s := newSupervisor(context.Background())
	release := make(chan struct{})
	defer close(release)
	err := s.goRun("stuck", 50*time.Millisecond, func(context.Context) (func(context.Context) error, error) {
		return func(context.Context) error { <-release; return nil }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err == nil || !strings.Contains(err.Error(), "stuck did not stop within") {
		t.Errorf("stop = %v, want timeout error", err)
	}
}

func TestSupervisorPrepareErrorStartsNothing(t *testing.T) {
	s := newSupervisor(context.Background())
	err := s.goRun("kube-controller-manager", time.Second, func(context.Context) (func(context.Context) error, error) {
		return nil, errors.New("bad flags")
	})
	if err == nil || err.Error() != "bad flags" {
		t.Fatalf("goRun = %v", err)
	}
	if len(s.undos) != 0 {
		t.Errorf("undos = %d, want 0", len(s.undos))
	}
}
