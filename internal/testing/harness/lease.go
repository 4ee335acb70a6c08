package harness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// LeaseLog records every version of one coordination.k8s.io Lease, in the
// order the API server stored them, so a test can tell how leadership
// changed hands: after a release (holder emptied by the old leader) or after
// the Lease expired (the new holder overwrote the old holder's last renewal).
type LeaseLog struct {
	t        *testing.T
	client   kubernetes.Interface
	ns, name string
	cancel   context.CancelFunc
	done     chan struct{}

	mu       sync.Mutex
	versions []coordinationv1.LeaseSpec
	// seen holds the resourceVersion of every version recorded.
	seen  map[string]bool
	ended error // why the watch ended before Stop, if it did
}

// WatchLease starts recording Lease ns/name, which must exist: the first
// version is the Lease as it is now, then every later write. It fails t if
// the Lease cannot be read or watched, and stops when t ends.
func WatchLease(t *testing.T, client kubernetes.Interface, ns, name string) *LeaseLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		cancel()
		t.Fatalf("reading Lease %s/%s: %v", ns, name, err)
	}
	w, err := client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: l.ResourceVersion,
	})
	if err != nil {
		cancel()
		t.Fatalf("watching Lease %s/%s: %v", ns, name, err)
	}
	log := &LeaseLog{t: t, client: client, ns: ns, name: name, cancel: cancel, done: make(chan struct{}),
		versions: []coordinationv1.LeaseSpec{*l.Spec.DeepCopy()}, seen: map[string]bool{l.ResourceVersion: true}}
	go log.record(ctx, w)
	t.Cleanup(func() { log.cancel(); <-log.done })
	return log
}

func (l *LeaseLog) record(ctx context.Context, w watch.Interface) {
	defer close(l.done)
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if ctx.Err() != nil {
				return // stopped: the watch closing or erring now is expected
			}
			l.mu.Lock()
			switch lease, isLease := ev.Object.(*coordinationv1.Lease); {
			case !ok:
				l.ended = fmt.Errorf("the watch closed")
			case ev.Type == watch.Modified && isLease:
				l.versions = append(l.versions, *lease.Spec.DeepCopy())
				l.seen[lease.ResourceVersion] = true
			case ev.Type != watch.Bookmark:
				l.ended = fmt.Errorf("unexpected %s event: %v", ev.Type, objectName(ev.Object))
			}
			ended := l.ended != nil
			l.mu.Unlock()
			if ended {
				return
			}
		}
	}
}

func objectName(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetNamespace() + "/" + m.GetName()
	}
	return fmt.Sprintf("%T", obj)
}

// Stop stops recording and returns the versions recorded, oldest first, up to
// at least the version a read of the Lease returns now: a test that saw a new
// holder by a read gets that version, although the watch delivers it a little
// later (waiting up to 30 s for it). It fails t if the watch ended early or the
// Lease was deleted, since versions may then be missing.
func (l *LeaseLog) Stop() []coordinationv1.LeaseSpec {
	l.t.Helper()
	if cur, err := l.client.CoordinationV1().Leases(l.ns).Get(context.Background(), l.name, metav1.GetOptions{}); err == nil {
		Eventually(l.t, 30*time.Second, "the Lease watch to deliver resourceVersion "+cur.ResourceVersion, func(context.Context) (bool, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.seen[cur.ResourceVersion] || l.ended != nil, nil
		})
	}
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended != nil {
		l.t.Fatalf("recording Lease %s/%s: %v", l.ns, l.name, l.ended)
	}
	return append([]coordinationv1.LeaseSpec(nil), l.versions...)
}

// Holder returns spec's holderIdentity, "" when the Lease is released or was never held.
func Holder(spec coordinationv1.LeaseSpec) string {
	if spec.HolderIdentity == nil {
		return ""
	}
	return *spec.HolderIdentity
}

// takeover returns the index in versions of the first version held by
// identity, or an error if there is none or identity held the Lease from
// the first version (so a returned index is at least 1).
func takeover(versions []coordinationv1.LeaseSpec, identity string) (int, error) {
	for i, v := range versions {
		if Holder(v) != identity {
			continue
		}
		if i == 0 {
			return 0, fmt.Errorf("%s already held the Lease when recording began", identity)
		}
		return i, nil
	}
	return 0, fmt.Errorf("%s never held the Lease; holders: %s", identity, holders(versions))
}

func holders(versions []coordinationv1.LeaseSpec) string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = fmt.Sprintf("%q", Holder(v))
	}
	return strings.Join(out, " → ")
}

// ReleasedTakeover returns nil if, in the recorded versions, to's first
// version replaced a release (holder emptied, as client-go's leader election
// does when a leader stops with ReleaseOnCancel) written right after a
// version held by from, and counted one more leader transition: a standby
// that takes over at its next retry instead of waiting for the Lease to
// expire. Otherwise it returns an error saying what differs.
func ReleasedTakeover(versions []coordinationv1.LeaseSpec, from, to string) error {
	i, err := takeover(versions, to)
	if err != nil {
		return err
	}
	if i < 2 || Holder(versions[i-1]) != "" || Holder(versions[i-2]) != from {
		return fmt.Errorf("%s did not take over a Lease released by %s; holders: %s", to, from, holders(versions))
	}
	return transition(versions[i-1], versions[i], to)
}

// takeoverClockSlack is how much earlier than renewTime+leaseDuration (in
// wall-clock stamps) ExpiredTakeover accepts an acquireTime; see there.
const takeoverClockSlack = 50 * time.Millisecond

// ExpiredTakeover returns nil if, in the recorded versions, to's first
// version directly replaced a version held by from (no release: from was cut
// off), counted one more leader transition, and was acquired no earlier than
// that version's renewTime plus its leaseDurationSeconds: to waited for the
// Lease to expire, so there were never two leaders. (It compares the Lease's
// own timestamps, not how long anything took.) Otherwise it returns an error
// saying what differs.
func ExpiredTakeover(versions []coordinationv1.LeaseSpec, from, to string) error {
	i, err := takeover(versions, to)
	if err != nil {
		return err
	}
	before, after := versions[i-1], versions[i]
	if Holder(before) != from {
		return fmt.Errorf("%s took the Lease over from %q, want directly from %s's unreleased Lease; holders: %s", to, Holder(before), from, holders(versions))
	}
	if err := transition(before, after, to); err != nil {
		return err
	}
	if before.RenewTime == nil || before.LeaseDurationSeconds == nil || after.AcquireTime == nil {
		return fmt.Errorf("the Lease versions lack renewTime, leaseDurationSeconds or acquireTime: %+v then %+v", before, after)
	}
	// The stamps are wall-clock times (MicroTime, truncated to microseconds),
	// while client-go decides expiry on the standby's monotonic clock: it
	// waits leaseDuration from when it first saw the renewal, which is after
	// the renewal was stamped. A wall-clock adjustment between the two stamps
	// (NTP or the VM's time sync; one CI run saw the wall clock gain 3.4 ms
	// within 3 s) can make the wall-clock gap a little shorter than the lease.
	// takeoverClockSlack allows for that; a standby that did not wait would
	// take over within a retry period of the crash, seconds early.
	expiry := before.RenewTime.Add(time.Duration(*before.LeaseDurationSeconds)*time.Second - takeoverClockSlack)
	if after.AcquireTime.Time.Before(expiry) {
		return fmt.Errorf("%s acquired the Lease at %s, before %s's renewal at %s (lease %ds) expired", to,
			after.AcquireTime.Format(time.StampMicro), from, before.RenewTime.Format(time.StampMicro), *before.LeaseDurationSeconds)
	}
	return nil
}

// transition returns an error unless after counts one more leader transition than before.
func transition(before, after coordinationv1.LeaseSpec, to string) error {
	var was, now int32
	if before.LeaseTransitions != nil {
		was = *before.LeaseTransitions
	}
	if after.LeaseTransitions != nil {
		now = *after.LeaseTransitions
	}
	if now != was+1 {
		return fmt.Errorf("leaseTransitions %d when %s took over, want %d", now, to, was+1)
	}
	return nil
}
