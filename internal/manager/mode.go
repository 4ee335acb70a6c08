package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// SH-10, one mode at a time: a leader-elected (unsharded) `kubedeploy controllers` and sharded replicas exclude
// each other through one Lease, the leader's (LeaderElection.ResourceNamespace/ResourceName; in sharded mode
// Sharding.LeaderLease names it). An unsharded process holds it as any leader does. Sharded replicas hold it
// together, under the holder identity shardedHolderOf(ring), before any of them writes anything else (its
// membership Lease, the ring, a workload): whichever mode took the Lease first runs, the other waits without
// writing, and a process of the other mode started meanwhile finds it held. client-go's elector never writes a
// Lease another holder renews, so an unsharded standby writes nothing while the sharded replicas run; sharded
// replicas write nothing while a leader renews it.

// shardedHolderPrefix starts the holder identity sharded replicas write on the leader Lease.
const shardedHolderPrefix = "kubedeploy-sharded:"

// shardedHolderOf is the holder identity the sharded replicas of the ring ringNamespace/ringName write on the
// leader Lease (SH-10).
func shardedHolderOf(ringNamespace, ringName string) string {
	return shardedHolderPrefix + ringNamespace + "/" + ringName
}

// isShardedHolder reports whether a Lease holder identity is the sharded replicas'.
func isShardedHolder(identity string) bool { return strings.HasPrefix(identity, shardedHolderPrefix) }

// waitingForOtherMode is 1 while this process runs nothing because the other mode runs (SH-10), by the mode it
// waits for ("sharded" or "leader-elected"); 0 otherwise.
var waitingForOtherMode = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Name:           "kubedeploy_waiting_for_other_mode",
	Help:           "1 while this process writes nothing because kubedeploy runs in the other mode (sharded replicas, or a leader-elected kubedeploy controllers) on the same cluster, by the mode it waits for; 0 otherwise (SH-10).",
	StabilityLevel: metrics.ALPHA,
}, []string{"mode"})

// otherMode says whether this process waits for the other mode (SH-10): in its log (once per change), as the
// readiness check "other-mode" (not ready while waiting, with the reason) and in waitingForOtherMode.
type otherMode struct {
	logger klog.Logger
	mu     sync.Mutex
	mode   string // the mode waited for: "sharded", "leader-elected", "" for none
	why    string
}

// Name returns the readiness check's name, "other-mode".
func (o *otherMode) Name() string { return "other-mode" }

// Check returns the reason this process waits, while it waits for the other mode; else nil.
func (o *otherMode) Check(*http.Request) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mode == "" {
		return nil
	}
	return errors.New(o.why)
}

// wait records that this process waits for mode (why says who runs and what to do); an empty mode records that
// it no longer waits.
func (o *otherMode) wait(mode, why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mode == mode && o.why == why {
		return
	}
	if o.mode != "" {
		waitingForOtherMode.WithLabelValues(o.mode).Set(0)
	}
	o.mode, o.why = mode, why
	if mode == "" {
		o.logger.Info("No longer waiting for kubedeploy's other mode")
		return
	}
	waitingForOtherMode.WithLabelValues(mode).Set(1)
	o.logger.Info("Warning: kubedeploy runs in the other mode on this cluster; this process writes nothing while it does", "mode", mode, "reason", why)
}

// leaderObserved is an unsharded elector's OnNewLeader: a leader identity of the sharded replicas means this
// process waits for them.
func (o *otherMode) leaderObserved(lease, identity string) {
	if isShardedHolder(identity) {
		o.wait("sharded", fmt.Sprintf("waiting: sharded replicas (%s) hold the Lease %s; run either `kubedeploy controllers --sharding` or one leader-elected `kubedeploy controllers`, not both (SH-10)",
			strings.TrimPrefix(identity, shardedHolderPrefix), lease))
		return
	}
	o.wait("", "")
}

// modeLease is the sharded replicas' hold on the leader Lease (SH-10), as one replica keeps it: it takes the Lease
// when no one holds it (or its holder stopped renewing it for LeaseDuration, as this replica observed), renews it
// when no replica has for RetryPeriod, and knows until when the sharded mode may act (HeldUntil): RenewDeadline
// after the last renewal this replica knows of, so that every replica stops acting before a leader-elected
// standby may take the Lease over (it waits LeaseDuration of no change, as it observes it).
type modeLease struct {
	lock   resourcelock.Interface
	name   string // namespace/name, for messages
	holder string
	le     LeaderElection
	clock  clock.PassiveClock
	other  *otherMode

	mu sync.Mutex
	// seen is the record as last read, seenAt when it was first read so (the start of that read); lastRead the
	// start of the last read.
	seen             *resourcelock.LeaderElectionRecord
	seenAt, lastRead time.Time
	heldUntil        time.Time
	// taken is set once a read found another holder renewing the Lease (the other mode took it).
	taken bool
}

// HeldUntil returns until when the sharded mode may act, as this replica knows; the zero time before it holds.
func (m *modeLease) HeldUntil() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heldUntil
}

// held reports whether the sharded mode may act now.
func (m *modeLease) held() bool { return m.clock.Now().Before(m.HeldUntil()) }

// step reads the Lease once (a quorum read) and renews it, takes it, or records that the other mode holds it, as
// the record calls for. It returns the API error of the read or the write; a conflict (another replica renewed,
// or another process took it, first) is not an error: the next step reads what won.
func (m *modeLease) step(ctx context.Context) error {
	start := m.clock.Now()
	rec, _, err := m.lock.Get(ctx)
	if apierrors.IsNotFound(err) {
		return m.write(ctx, start, nil)
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	changed := m.seen == nil || !sameRecord(*m.seen, *rec)
	if changed {
		if m.seen != nil && rec.HolderIdentity == m.holder {
			// Renewed by another replica after this one's last read began (at R > lastRead): a standby waits
			// LeaseDuration from R, so the sharded mode holds until lastRead + RenewDeadline + RetryPeriod, before
			// that as long as LeaseDuration ≥ RenewDeadline + RetryPeriod, the rule leader election's own settings
			// keep (LeaderElection.Overlap).
			m.heldUntil = later(m.heldUntil, m.lastRead.Add(m.le.RenewDeadline+m.le.RetryPeriod))
		}
		m.seen, m.seenAt = rec, start
	}
	m.lastRead = start
	unchangedFor := start.Sub(m.seenAt)
	m.mu.Unlock()
	switch {
	case rec.HolderIdentity == m.holder && unchangedFor >= m.le.RetryPeriod:
		return m.write(ctx, start, rec)
	case rec.HolderIdentity == m.holder:
		m.mu.Lock()
		m.taken = false
		m.mu.Unlock()
		m.other.wait("", "")
		return nil
	case rec.HolderIdentity == "" || unchangedFor >= time.Duration(max(rec.LeaseDurationSeconds, 1))*time.Second && unchangedFor >= m.le.LeaseDuration:
		return m.write(ctx, start, rec)
	}
	m.mu.Lock()
	m.taken = true
	m.mu.Unlock()
	m.other.wait("leader-elected", fmt.Sprintf("waiting: a leader-elected kubedeploy controllers (%s) holds the Lease %s; run either one leader-elected `kubedeploy controllers` or `kubedeploy controllers --sharding`, not both (SH-10)",
		rec.HolderIdentity, m.name))
	return nil
}

// write renews (cur held by the sharded replicas), takes (cur free or expired) or creates (cur nil) the Lease for
// the sharded replicas, conditioned on the record read; on success the sharded mode holds until start +
// RenewDeadline.
func (m *modeLease) write(ctx context.Context, start time.Time, cur *resourcelock.LeaderElectionRecord) error {
	now := metav1.NewTime(start)
	next := resourcelock.LeaderElectionRecord{HolderIdentity: m.holder, LeaseDurationSeconds: int(m.le.LeaseDuration / time.Second),
		AcquireTime: now, RenewTime: now}
	var err error
	switch {
	case cur == nil:
		err = m.lock.Create(ctx, next)
	case cur.HolderIdentity == m.holder:
		next.AcquireTime, next.LeaderTransitions = cur.AcquireTime, cur.LeaderTransitions
		err = m.lock.Update(ctx, next)
	default:
		next.LeaderTransitions = cur.LeaderTransitions + 1
		err = m.lock.Update(ctx, next)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.heldUntil = later(m.heldUntil, start.Add(m.le.RenewDeadline))
	m.seen, m.seenAt, m.taken = &next, start, false
	m.mu.Unlock()
	m.other.wait("", "")
	return nil
}

// release gives the Lease up (an empty holder, a 1-second duration, as client-go's elector releases) while the
// sharded replicas hold it, for the last replica to leave. Failure is returned; the Lease then expires after
// LeaseDuration.
func (m *modeLease) release(ctx context.Context) error {
	rec, _, err := m.lock.Get(ctx)
	if err != nil || rec.HolderIdentity != m.holder {
		return err
	}
	now := metav1.NewTime(m.clock.Now())
	return m.lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now,
		LeaderTransitions: rec.LeaderTransitions})
}

// sameRecord reports whether two reads of the Lease show the same record.
func sameRecord(a, b resourcelock.LeaderElectionRecord) bool {
	return a.HolderIdentity == b.HolderIdentity && a.RenewTime.Equal(&b.RenewTime) && a.AcquireTime.Equal(&b.AcquireTime) &&
		a.LeaseDurationSeconds == b.LeaseDurationSeconds && a.LeaderTransitions == b.LeaderTransitions
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// newModeLease returns the sharded replicas' hold on the Lease lease ("namespace/name") for the ring
// ringNamespace/ringName, with le's durations, as this process keeps it. It returns an error for a malformed
// lease name or a lock that cannot be built.
func newModeLease(lease, ringNamespace, ringName string, le LeaderElection, client kubernetes.Interface, other *otherMode) (*modeLease, error) {
	ns, name, ok := strings.Cut(lease, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("the leader Lease %q is not NAMESPACE/NAME", lease)
	}
	holder := shardedHolderOf(ringNamespace, ringName)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: holder})
	if err != nil {
		return nil, fmt.Errorf("building the lock on the leader Lease %s: %w", lease, err)
	}
	return &modeLease{lock: lock, name: lease, holder: holder, le: le, clock: clock.RealClock{}, other: other}, nil
}

// waitHeld steps every RetryPeriod until the sharded mode holds the Lease or ctx ends (then ctx's error).
// Errors of a step are logged.
func (m *modeLease) waitHeld(ctx context.Context) error {
	m.mu.Lock()
	m.taken = false
	m.mu.Unlock()
	for {
		if err := m.step(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Info("Could not read or write the leader Lease to hold it for the sharded replicas", "lease", m.name, "err", err)
		}
		if m.held() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(m.le.RetryPeriod):
		}
	}
}

// keep steps every RetryPeriod until ctx ends, and calls lost once a leader-elected process holds the Lease (it
// took it after the sharded replicas' hold lapsed for LeaseDuration). A lapse alone (the API server unreachable)
// only ends the fences' validity until a renewal (Coordinator's Config.Hold).
func (m *modeLease) keep(ctx context.Context, lost func()) {
	t := time.NewTicker(m.le.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.step(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Info("Could not renew the sharded replicas' hold on the leader Lease", "lease", m.name, "err", err)
		}
		m.mu.Lock()
		taken := m.taken
		m.mu.Unlock()
		if taken {
			klog.FromContext(ctx).Info("A leader-elected kubedeploy controllers took the leader Lease; this replica stops and waits", "lease", m.name)
			lost()
			return
		}
	}
}

// waitForShardedReplicas is SH-10 for a `kubedeploy controllers --leader-elect=false`: it reads l's Lease every
// RetryPeriod until no sharded replicas hold it (none named, or their record unchanged for LeaseDuration), telling
// other meanwhile, and returns nil; or ctx's error. Such a process holds no Lease, so sharded replicas started
// after it cannot see it: docs/sharding.md says so. Read errors are logged and retried.
func waitForShardedReplicas(ctx context.Context, l LeaderElection, client kubernetes.Interface, other *otherMode) error {
	lease := l.ResourceNamespace + "/" + l.ResourceName
	var seen *resourcelock.LeaderElectionRecord
	var seenAt time.Time
	for {
		start := time.Now()
		obj, err := client.CoordinationV1().Leases(l.ResourceNamespace).Get(ctx, l.ResourceName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			other.wait("", "")
			return nil
		case err != nil:
			klog.FromContext(ctx).Info("Could not read the leader Lease to check for sharded replicas", "lease", lease, "err", err)
		default:
			rec := resourcelock.LeaseSpecToLeaderElectionRecord(&obj.Spec)
			if seen == nil || !sameRecord(*seen, *rec) {
				seen, seenAt = rec, start
			}
			if !isShardedHolder(rec.HolderIdentity) || start.Sub(seenAt) >= l.LeaseDuration {
				other.wait("", "")
				return nil
			}
			other.leaderObserved(lease, rec.HolderIdentity)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(l.RetryPeriod):
		}
	}
}
