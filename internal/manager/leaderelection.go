package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Leader election defaults, as kube-controller-manager's (CM-7), except the lock name.
const (
	DefaultLeaseDuration     = 15 * time.Second
	DefaultRenewDeadline     = 10 * time.Second
	DefaultRetryPeriod       = 2 * time.Second
	DefaultResourceName      = "kubedeploy-controllers"
	DefaultResourceNamespace = "kube-system"
)

// ErrLeaderElectionLost is returned by Run when this process stopped holding
// the Lease while it was not asked to stop: its controllers were stopped and
// drained, and the process should exit non-zero so that it is restarted as a standby.
var ErrLeaderElectionLost = errors.New("leader election lost: this process no longer holds the lease; controllers stopped")

// LeaderElection configures running the controllers only while holding a
// coordination.k8s.io Lease (CM-7). Zero durations take the defaults.
type LeaderElection struct {
	// Enabled turns leader election on (--leader-elect).
	Enabled bool
	// LeaseDuration is how long a standby waits after the last renewal before taking over (default 15s).
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader retries renewing before it gives up leading (default 10s).
	RenewDeadline time.Duration
	// RetryPeriod is the time between acquire or renew attempts (default 2s).
	RetryPeriod time.Duration
	// ResourceName and ResourceNamespace name the Lease (default kube-system/kubedeploy-controllers).
	ResourceName      string
	ResourceNamespace string
	// Identity is this process's holder identity; default "<hostname>_<random UUID>", as kube-controller-manager's.
	Identity string
}

// Default fills zero fields with the defaults (CM-7).
func (l *LeaderElection) Default() {
	l.LeaseDuration = cmp.Or(l.LeaseDuration, DefaultLeaseDuration)
	l.RenewDeadline = cmp.Or(l.RenewDeadline, DefaultRenewDeadline)
	l.RetryPeriod = cmp.Or(l.RetryPeriod, DefaultRetryPeriod)
	if l.ResourceName == "" {
		l.ResourceName = DefaultResourceName
	}
	if l.ResourceNamespace == "" {
		l.ResourceNamespace = DefaultResourceNamespace
	}
	if l.Identity == "" {
		host, _ := os.Hostname()
		l.Identity = host + "_" + string(uuid.NewUUID())
	}
}

// Validate returns an error unless, when enabled, LeaseDuration > RenewDeadline > RetryPeriod > 0
// (client-go's own rule, checked here so the message names our flags).
func (l LeaderElection) Validate() error {
	if !l.Enabled {
		return nil
	}
	if l.RetryPeriod <= 0 || l.RenewDeadline <= l.RetryPeriod || l.LeaseDuration <= l.RenewDeadline {
		return fmt.Errorf("leader election needs lease-duration (%v) > renew-deadline (%v) > retry-period (%v) > 0",
			l.LeaseDuration, l.RenewDeadline, l.RetryPeriod)
	}
	return nil
}

// Overlap returns, for an enabled configuration, why a leader cut off from
// the API server might still be acting when a standby takes the Lease over,
// or "" when it gives up first. The leader gives up at most retry-period +
// renew-deadline after its last renewal. The standby takes over
// lease-duration after it first read that renewal; client-go compares the
// Lease record with renewTime to the second, so with a retry period under a
// second two renewals can read alike and the standby may count from up to a
// second before the last one. Upstream allows such settings (and so do we):
// this is advice for the log, not a validation error.
func (l LeaderElection) Overlap() string {
	if !l.Enabled {
		return ""
	}
	giveUp := l.RetryPeriod + l.RenewDeadline
	var early time.Duration
	if l.RetryPeriod < time.Second {
		early = time.Second
	}
	if giveUp+early < l.LeaseDuration {
		return ""
	}
	if early > 0 {
		return fmt.Sprintf("a leader cut off from the API server gives up within retry-period + renew-deadline (%v) of its last renewal, "+
			"and with a retry period under 1s a standby may take over up to 1s before lease-duration (%v) has passed since that renewal", giveUp, l.LeaseDuration)
	}
	return fmt.Sprintf("a leader cut off from the API server gives up within retry-period + renew-deadline (%v) of its last renewal, "+
		"not before a standby may take over at lease-duration (%v)", giveUp, l.LeaseDuration)
}

// runLeading runs run(ctx) only while this process holds the Lease. It
// returns nil when ctx is cancelled (after run has returned, i.e. in-flight
// syncs are finished, and then the Lease is released so a standby takes over
// at once), or ErrLeaderElectionLost when the Lease was lost (after run has returned).
// watchdog, if not nil, is wired as the elector's health check.
func runLeading(ctx context.Context, l LeaderElection, client kubernetes.Interface,
	watchdog *leaderelection.HealthzAdaptor, run func(context.Context), other *otherMode) error {
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, l.ResourceNamespace, l.ResourceName,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: l.Identity})
	if err != nil {
		return fmt.Errorf("building the leader election lock: %w", err)
	}
	// The elector gets its own context: on shutdown it is cancelled only after
	// the controllers have drained, so the Lease is released last.
	electorCtx, cancelElector := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElector()
	if why := l.Overlap(); why != "" {
		klog.FromContext(ctx).Info("Warning: leader election settings let two leaders act at once for a moment; raise --leader-elect-lease-duration", "reason", why)
	}
	s := &leaderSession{l: l, logger: klog.FromContext(ctx), parent: ctx, run: run, cancelElector: cancelElector, drained: make(chan struct{}), other: other}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   l.LeaseDuration,
		RenewDeadline:   l.RenewDeadline,
		RetryPeriod:     l.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            l.ResourceName,
		WatchDog:        watchdog,
		Callbacks:       s.callbacks(),
	})
	if err != nil {
		return fmt.Errorf("building the leader elector: %w", err)
	}
	if watchdog != nil {
		watchdog.SetLeaderElection(le)
	}
	stopWaiting := context.AfterFunc(ctx, func() {
		if !s.leading.Load() {
			cancelElector() // a standby stops at once
		}
	})
	defer stopWaiting()
	le.Run(electorCtx)
	if s.leading.Load() {
		<-s.drained
	}
	if ctx.Err() != nil {
		if s.leading.Load() && le.IsLeader() {
			// The elector's own release failed (it tries once). A renewal cut
			// short by the shutdown can still land on the server after the
			// elector re-read the Lease, so its release met a conflict.
			releaseLease(s.logger, lock, l)
		}
		s.logger.Info("Stopped leader election", "lease", klog.KRef(l.ResourceNamespace, l.ResourceName))
		return nil
	}
	return ErrLeaderElectionLost
}

// releaseLease gives up the Lease after the elector's own release failed:
// while the Lease still names l.Identity it writes an empty holder with a
// 1-second duration (what the elector writes), re-reading and retrying on a
// conflict, for at most l.RenewDeadline. It never touches a Lease another
// holder took (the update carries the resourceVersion it read), and it runs
// only after the controllers drained. Failure is logged: the Lease then
// expires after l.LeaseDuration, as it does after kill -9.
func releaseLease(logger klog.Logger, lock resourcelock.Interface, l LeaderElection) {
	ctx, cancel := context.WithTimeout(context.Background(), l.RenewDeadline)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, l.RetryPeriod/4, true, func(ctx context.Context) (bool, error) {
		rec, _, err := lock.Get(ctx)
		if err != nil {
			logger.V(2).Info("Reading the Lease to release it", "lease", klog.KRef(l.ResourceNamespace, l.ResourceName), "err", err)
			return false, nil
		}
		if rec.HolderIdentity != l.Identity {
			return true, nil // released already, or taken by another holder
		}
		now := metav1.Now()
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		})
		if err != nil {
			logger.V(2).Info("Releasing the Lease", "lease", klog.KRef(l.ResourceNamespace, l.ResourceName), "err", err)
			return false, nil
		}
		logger.Info("Released the lease after a retry", "lease", klog.KRef(l.ResourceNamespace, l.ResourceName))
		return true, nil
	})
	if err != nil {
		logger.Error(err, "Could not release the lease; a standby takes over when it expires", "lease", klog.KRef(l.ResourceNamespace, l.ResourceName), "leaseDuration", l.LeaseDuration)
	}
}

// leaderSession is the state one runLeading call shares with the elector's
// callbacks.
type leaderSession struct {
	l      LeaderElection
	logger klog.Logger
	// parent is runLeading's ctx: its end stops run.
	parent        context.Context
	run           func(context.Context)
	cancelElector context.CancelFunc
	// leading is set once this process acquired the Lease; drained is
	// closed when run has returned after that.
	leading atomic.Bool
	drained chan struct{}
	// other, if set, is told each leader observed: a sharded replicas' holder means this process waits (SH-10).
	other *otherMode
}

// callbacks returns the elector callbacks: run while leading, log new leaders.
func (s *leaderSession) callbacks() leaderelection.LeaderCallbacks {
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: s.lead,
		OnStoppedLeading: func() {},
		OnNewLeader: func(identity string) {
			s.logger.Info("Observed leader", "lease", klog.KRef(s.l.ResourceNamespace, s.l.ResourceName), "leader", identity)
			if s.other != nil {
				s.other.leaderObserved(s.l.ResourceNamespace+"/"+s.l.ResourceName, identity)
			}
		},
	}
}

// lead runs the controllers until leCtx (the Lease is lost) or the parent
// context ends, then stops the elector so it releases the Lease.
func (s *leaderSession) lead(leCtx context.Context) {
	s.leading.Store(true)
	defer close(s.drained)
	defer s.cancelElector()
	if leCtx.Err() != nil {
		return // stopped between acquiring and starting
	}
	runCtx, cancel := context.WithCancel(leCtx)
	defer cancel()
	stop := context.AfterFunc(s.parent, cancel)
	defer stop()
	s.logger.Info("Acquired the lease; starting controllers", "lease", klog.KRef(s.l.ResourceNamespace, s.l.ResourceName), "identity", s.l.Identity)
	s.run(runCtx)
}
