package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// otherModeWarning is what a process that waits for kubedeploy's other mode logs (SH-10).
const otherModeWarning = "kubedeploy runs in the other mode on this cluster; this process writes nothing while it does"

// TestOneModeAtATime is SH-10 with the real binary on `up --controllers=`, during rollouts of every Deployment:
// (1) a leader-elected `kubedeploy controllers` started beside 3 sharded replicas waits and says why, and the
// API server's audit log shows it wrote nothing (no Lease, no workload) while they lived; after kill -9 of all
// three it takes over within lease duration + 5 s. (2) A sharded replica started beside that running leader waits
// likewise and writes nothing (no ring, no Lease, no workload); after SIGTERM of the leader it takes over within
// lease duration + 5 s. Every rollout completes within the bounds.
func TestOneModeAtATime(t *testing.T) {
	skipShort(t)
	r := startShardRun(t, shardOptions{namespaces: 8}, nil)
	for range 3 {
		r.startReplica()
	}
	r.waitSettled("with 3 replicas")
	r.waitRolloutsComplete()
	r.watchRollouts()
	stopRolling := r.keepRollingOut()
	leader := startControllers(t, r.dir, 0)
	since := time.Now()
	waitLog(t, leader, otherModeWarning, 30*time.Second)
	time.Sleep(10 * time.Second) // rollouts go on; the leader must stay quiet
	for _, p := range append([]*shardReplica(nil), r.live...) {
		r.signal(p, syscall.SIGKILL)
		p.exited <- <-p.exited
		r.remove(p)
	}
	killed := time.Now()
	took := waitLog(t, leader, "Acquired the lease; starting controllers", shardLeaseDuration+5*time.Second)
	t.Logf("(1) the leader waited beside 3 sharded replicas; after their kill -9 it took over in %s", took.Round(100*time.Millisecond))
	r.checkQuiet(since, killed, isLeaderWrite, "the leader-elected process while the sharded replicas lived")

	late := r.startReplica()
	since = time.Now()
	waitLog(t, late.controllersProcess, otherModeWarning, 30*time.Second)
	time.Sleep(10 * time.Second)
	leader.cmd.Process.Signal(syscall.SIGTERM)
	stopped := time.Now()
	took = waitLog(t, late.controllersProcess, "The sharded replicas hold the leader Lease; starting", shardLeaseDuration+5*time.Second)
	t.Logf("(2) the sharded replica waited beside the leader; after its SIGTERM it took over in %s", took.Round(100*time.Millisecond))
	r.checkQuiet(since, stopped, func(e auditEvent) bool {
		return replicaOf(e) == late.identity || strings.Contains(e.UserAgent, late.identity)
	},
		"the sharded replica while the leader lived")
	stopRolling()
	r.waitRolloutsComplete()
	r.checkRollouts()
}

// waitLog waits up to timeout for p's output to contain line, and returns how long that took.
func waitLog(t *testing.T, p *controllersProcess, line string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	harness.Eventually(t, timeout, fmt.Sprintf("the log line %q", line), func(context.Context) (bool, error) {
		return strings.Contains(p.out.String(), line), nil
	})
	return time.Since(start)
}

// isLeaderWrite reports whether e was made by a leader-elected (unsharded) kubedeploy controllers: a kubedeploy
// user agent without a sharded replica's identity.
func isLeaderWrite(e auditEvent) bool {
	return strings.HasPrefix(e.UserAgent, "kubedeploy-") && replicaOf(e) == ""
}

// checkQuiet fails the test for every write in the audit log between from and to made by a process by says is
// the waiting one: it must write nothing at all while the other mode runs (SH-10).
func (r *shardRun) checkQuiet(from, to time.Time, by func(auditEvent) bool, who string) {
	r.t.Helper()
	events, err := readAuditFile(filepath.Join(r.dir, "audit.log"))
	if err != nil {
		r.t.Fatal(err)
	}
	var writes []string
	for _, e := range events {
		at := e.RequestReceivedTimestamp.Time
		if at.Before(from) || at.After(to) || !by(e) {
			continue
		}
		writes = append(writes, fmt.Sprintf("%s %s %s/%s %s (%s)", at.Format(time.TimeOnly), e.Verb, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ObjectRef.Resource, e.UserAgent))
	}
	if len(writes) > 0 {
		r.t.Errorf("%s wrote %d times:\n  %s", who, len(writes), strings.Join(writes, "\n  "))
	}
	r.t.Logf("%s: no write in %d audit events from %s to %s", who, len(events), from.Format(time.TimeOnly), to.Format(time.TimeOnly))
}

// klogError matches an error-level klog line ("E1128 00:31:43.027195 …").
var klogError = regexp.MustCompile(`(?m)^E\d{4} `)

// Issue 45: SIGTERM stops a sharded replica without an error-level log line, whether it comes while the replica
// starts its buckets (informers not synced yet) or once it runs them during rollouts; the replica exits 0.
func TestShardedSIGTERMLogsNoErrors(t *testing.T) {
	skipShort(t)
	r := startShardRun(t, shardOptions{namespaces: 4}, nil)
	early := r.startReplica()
	time.Sleep(500 * time.Millisecond) // its ring and buckets starting
	r.terminateQuietly(early)
	settled := r.startReplica()
	r.startReplica()
	r.waitSettled("with 2 replicas")
	stopRolling := r.keepRollingOut()
	time.Sleep(5 * time.Second)
	r.terminateQuietly(settled)
	stopRolling()
}

// terminateQuietly sends SIGTERM to p, waits for it to exit 0, and fails the test for every error-level line it
// logged after the signal.
func (r *shardRun) terminateQuietly(p *shardReplica) {
	r.t.Helper()
	before := len(p.out.Bytes())
	r.terminate(p)
	if lines := klogError.FindAllIndex(p.out.Bytes()[before:], -1); len(lines) > 0 {
		r.t.Errorf("replica %s logged %d error lines after SIGTERM:\n%s", p.identity, len(lines), p.out.Bytes()[before:])
	}
}
