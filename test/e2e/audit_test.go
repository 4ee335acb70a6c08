package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// auditPolicy returns an audit.k8s.io/v1 Policy that logs what the never-two-owners check needs and little
// else: the request and response of every write to a ConfigMap in ringNamespace (the ring's history), the
// metadata of every write to a Lease there or in kube-system (the leader's Lease, SH-10) and of every write to a
// Deployment, ReplicaSet or Pod (and their subresources), each once (ResponseComplete); no reads, no events.
func auditPolicy(ringNamespace string) string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  verbs: ["create", "update", "patch", "delete"]
  namespaces: [%[1]q]
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  namespaces: [%[1]q, "kube-system"]
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: ""
    resources: ["pods", "pods/*"]
  - group: apps
    resources: ["deployments", "deployments/*", "replicasets", "replicasets/*"]
- level: None
`, ringNamespace)
}

// auditEvent is the part of an audit.k8s.io/v1 Event the check reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	// RequestURI is the request's path and query (a LIST's shardSelector among them).
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
	StageTimestamp           metav1.MicroTime `json:"stageTimestamp"`
	ResponseObject           json.RawMessage  `json:"responseObject"`
}

// readAuditFile reads the audit log at path (readAudit).
func readAuditFile(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAudit(f)
}

// readAudit reads one JSON audit event a line, keeping the ResponseComplete ones (the stage that has the
// response). The error names the first line that does not decode.
func readAudit(r io.Reader) ([]auditEvent, error) {
	var out []auditEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", n, err)
		}
		if e.Stage == "ResponseComplete" && e.ObjectRef != nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// replicaUserAgent matches a sharded replica's user agent, "kubedeploy-<controller>-controller/<version>
// (<identity>)", capturing the controller and the identity.
var replicaUserAgent = regexp.MustCompile(`^kubedeploy-([a-z0-9-]+)-controller/\S+ \((.+)\)$`)

// replicaOf returns the identity of the sharded replica that made e, or "" for anyone else (the test, the
// scheduler, KWOK, the garbage collector).
func replicaOf(e auditEvent) string {
	if m := replicaUserAgent.FindStringSubmatch(e.UserAgent); m != nil {
		return m[2]
	}
	return ""
}

// isWorkloadWrite reports whether e writes a Deployment, a ReplicaSet or a Pod (or a subresource of one),
// whatever the answer: a write that reached the API server was made, even if refused.
func isWorkloadWrite(e auditEvent) bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
	default:
		return false
	}
	switch e.ObjectRef.Resource {
	case "pods", "replicasets", "deployments":
		return e.ObjectRef.Namespace != ""
	}
	return false
}

// ringVersion is one version of the ring as written: when the write completed (stageTimestamp), by which
// replica (identity, "" for anyone else) and what it holds.
type ringVersion struct {
	at   time.Time
	by   string
	rv   int64
	ring shard.Ring
}

// ringHistory returns every version of ConfigMap ringNamespace/ringName written successfully (create or
// update, with its response), in resourceVersion order: the order etcd applied them. A version that does not
// decode is an error: the ring is never written invalid.
func ringHistory(events []auditEvent, ringNamespace, ringName string) ([]ringVersion, error) {
	var out []ringVersion
	for _, e := range events {
		ref := e.ObjectRef
		if ref.Resource != "configmaps" || ref.Namespace != ringNamespace || ref.Name != ringName ||
			(e.Verb != "create" && e.Verb != "update") || e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			continue
		}
		var cm v1.ConfigMap
		if err := json.Unmarshal(e.ResponseObject, &cm); err != nil {
			return nil, fmt.Errorf("ring %s at %s: %w", e.Verb, e.StageTimestamp.Format(time.RFC3339Nano), err)
		}
		ring, err := shard.DecodeRing(&cm)
		if err != nil {
			return nil, err
		}
		rv, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ring resourceVersion %q: %w", cm.ResourceVersion, err)
		}
		out = append(out, ringVersion{at: e.StageTimestamp.Time, by: replicaOf(e), rv: rv, ring: ring})
	}
	slices.SortFunc(out, func(a, b ringVersion) int { return int(a.rv - b.rv) })
	return out, nil
}

// ringAt returns the latest ring version whose write had completed at t, or nil before the first.
func ringAt(history []ringVersion, t time.Time) *ringVersion {
	var last *ringVersion
	for i := range history {
		if history[i].at.After(t) {
			continue
		}
		if last == nil || history[i].rv > last.rv {
			last = &history[i]
		}
	}
	return last
}

// ownerAt returns the owner the ring gave namespace's bucket at t ("" for none, or before any ring).
func ownerAt(history []ringVersion, t time.Time, namespace string) string {
	v := ringAt(history, t)
	if v == nil {
		return ""
	}
	i := v.ring.Find(namespace)
	if i < 0 {
		return ""
	}
	return v.ring.Buckets[i].Owner
}

// ownershipViolations checks SH-1 from the audit log: every workload write by a sharded replica R in namespace
// ns, received at t, was made while the ring's latest version at t gave ns's bucket to R. It returns one line
// per write that was not, and how many replica writes it checked.
func ownershipViolations(events []auditEvent, history []ringVersion) (violations []string, checked int) {
	for _, e := range events {
		id := replicaOf(e)
		if id == "" || !isWorkloadWrite(e) {
			continue
		}
		checked++
		ref := e.ObjectRef
		t := e.RequestReceivedTimestamp.Time
		if owner := ownerAt(history, t, ref.Namespace); owner != id {
			violations = append(violations, fmt.Sprintf("%s %s %s/%s%s by %q (%s) at %s: the ring then gave %s to %q",
				e.Verb, ref.Resource, ref.Namespace, ref.Name, subresource(ref.Subresource), id, e.UserAgent,
				t.Format(time.RFC3339Nano), ref.Namespace, owner))
		}
	}
	return violations, checked
}

func subresource(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

// isClaim reports whether history[i] is a claim by its writer: a ring write by a replica that gave that
// replica a bucket with more Claims than the version before (SH-2, SH-7: a take, an accept, or a claim again
// after a lapse).
func isClaim(history []ringVersion, i int) bool {
	v := history[i]
	if v.by == "" {
		return false
	}
	for j, b := range v.ring.Buckets {
		if b.Owner != v.by {
			continue
		}
		if i == 0 || j >= len(history[i-1].ring.Buckets) || b.Claims > history[i-1].ring.Buckets[j].Claims {
			return true
		}
	}
	return false
}

// writesBeforeClaim checks SH-2 for a replica woken at woke (SIGCONT after a SIGSTOP longer than the lease
// duration): every workload write it made after woke came after a ring write of it that was a claim, made
// after woke too. It returns the writes that did not, and how many writes it made after woke.
func writesBeforeClaim(events []auditEvent, history []ringVersion, identity string, woke time.Time) (early []string, after int) {
	var claimed time.Time
	for i, v := range history {
		if v.by == identity && v.at.After(woke) && isClaim(history, i) {
			claimed = v.at
			break
		}
	}
	for _, e := range events {
		t := e.RequestReceivedTimestamp.Time
		if replicaOf(e) != identity || !isWorkloadWrite(e) || !t.After(woke) {
			continue
		}
		after++
		if claimed.IsZero() || t.Before(claimed) {
			early = append(early, fmt.Sprintf("%s %s %s/%s at %s, %s after waking, before its first claim (%v)", e.Verb,
				e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, t.Format(time.RFC3339Nano), t.Sub(woke), claimed))
		}
	}
	return early, after
}

// ownedAt returns the indexes of the buckets the ring gave identity at t.
func ownedAt(history []ringVersion, t time.Time, identity string) []int {
	var out []int
	if v := ringAt(history, t); v != nil {
		for i, b := range v.ring.Buckets {
			if b.Owner == identity {
				out = append(out, i)
			}
		}
	}
	return out
}

// unownedAfter returns how long the buckets identity owned at killed went without a live owner: from killed to
// the first ring version that gives each to another replica, the longest of them; and how many buckets that
// was. ok is false if one was never given to another replica.
func unownedAfter(history []ringVersion, identity string, killed time.Time) (longest time.Duration, buckets int, ok bool) {
	owned := ownedAt(history, killed, identity)
	for _, i := range owned {
		var taken time.Time
		for _, v := range history {
			if v.at.After(killed) && i < len(v.ring.Buckets) && v.ring.Buckets[i].Owner != identity && v.ring.Buckets[i].Owner != "" {
				taken = v.at
				break
			}
		}
		if taken.IsZero() {
			return 0, len(owned), false
		}
		longest = max(longest, taken.Sub(killed))
	}
	return longest, len(owned), true
}

// p99 returns the 99th percentile of ds (nearest rank; the maximum for fewer than 100).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100
	return s[rank-1]
}

// craftedLog builds an audit log line by line for the checker's own tests, at times base+seconds.
type craftedLog struct {
	t     *testing.T
	base  time.Time
	lines []string
	rv    int
}

func (l *craftedLog) at(seconds float64) time.Time {
	return l.base.Add(time.Duration(seconds * float64(time.Second)))
}

// write logs a write of resource[/sub] ns/name by userAgent, received at seconds and completed 10 ms later,
// answered with code and obj (nil for none).
func (l *craftedLog) write(seconds float64, verb, userAgent, resource, sub, ns, name string, code int, obj any) {
	e := map[string]any{
		"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseComplete",
		"verb": verb, "userAgent": userAgent,
		"objectRef":                map[string]string{"resource": resource, "subresource": sub, "namespace": ns, "name": name},
		"responseStatus":           map[string]int{"code": code},
		"requestReceivedTimestamp": metav1.NewMicroTime(l.at(seconds)),
		"stageTimestamp":           metav1.NewMicroTime(l.at(seconds + 0.01)),
	}
	if obj != nil {
		e["responseObject"] = obj
	}
	raw, err := json.Marshal(e)
	if err != nil {
		l.t.Fatal(err)
	}
	l.lines = append(l.lines, string(raw))
}

// ring logs a successful write of the ring by identity at seconds, owners[i] owning bucket i of ring with
// claims[i] claims.
func (l *craftedLog) ring(seconds float64, verb, identity string, ring shard.Ring, owners []string, claims []int64) {
	next := ring.Clone()
	for i := range next.Buckets {
		next.Buckets[i].Owner, next.Buckets[i].Claims = owners[i], claims[i]
	}
	l.rv++
	cm := shard.EncodeRing(nil, "ring-ns", shard.DefaultRingName, next)
	cm.ResourceVersion = strconv.Itoa(l.rv)
	l.write(seconds, verb, coordinatorUA(identity), "configmaps", "", "ring-ns", shard.DefaultRingName, 200, cm)
}

func (l *craftedLog) events() []auditEvent {
	l.t.Helper()
	events, err := readAudit(strings.NewReader(strings.Join(l.lines, "\n") + "\n"))
	if err != nil {
		l.t.Fatal(err)
	}
	return events
}

func coordinatorUA(identity string) string {
	return "kubedeploy-shard-coordinator-controller/v0.0.0 (" + identity + ")"
}

func replicaSetUA(identity string) string {
	return "kubedeploy-replicaset-controller/v0.0.0 (" + identity + ")"
}

// twoBucketRing returns a ring of two buckets split between four namespaces, and one namespace of each bucket.
func twoBucketRing(t *testing.T) (ring shard.Ring, first, second string) {
	t.Helper()
	pods := map[string]int{"ns-01": 6, "ns-02": 6, "ns-03": 6, "ns-04": 6}
	ring = shard.NewRing(shard.Bounds(pods, 2), pods)
	for ns := range pods {
		switch ring.Find(ns) {
		case 0:
			first = ns
		case 1:
			second = ns
		}
	}
	if first == "" || second == "" {
		t.Fatalf("the two buckets %v do not each hold a namespace", ring.Buckets)
	}
	return ring, first, second
}

// TestShardedAuditCheckCatchesTwoOwners shows the never-two-owners check (SH-1, SH-2, SH-7) can fail, on a
// crafted audit log: replicas A and B own one bucket each; writes by others (the garbage collector, KWOK) and
// refused ring writes do not count; a replica that ignores the ring and acts as owner of everything is
// reported for each write in the other's bucket; a replica that writes after waking from a pause before
// claiming again is reported; the unowned time after a kill runs to the ring write that gives the bucket away.
func TestShardedAuditCheckCatchesTwoOwners(t *testing.T) {
	ring, nsA, nsB := twoBucketRing(t)
	l := &craftedLog{t: t, base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l.write(0.5, "create", replicaSetUA("A"), "pods", "", nsA, "early", 201, nil) // before any ring
	l.ring(1, "create", "A", ring, []string{"A", "B"}, []int64{1, 1})
	l.write(2, "create", replicaSetUA("A"), "pods", "", nsA, "a-1", 201, nil)
	l.write(2, "update", replicaSetUA("B"), "replicasets", "status", nsB, "b-1", 200, nil)
	l.write(2, "delete", "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:generic-garbage-collector", "pods", "", nsB, "gc", 200, nil)
	l.write(2, "patch", "kwok/v0.7.0", "pods", "status", nsB, "kwok", 200, nil)
	l.write(3, "patch", "kubedeploy-deployment-controller/v0.0.0 (A)", "deployments", "", nsB, "rogue", 200, nil) // A ignores the ring
	l.ring(4, "update", "B", ring, []string{"B", "B"}, []int64{2, 1})                                             // B takes A's bucket
	l.write(4.1, "update", coordinatorUA("A"), "configmaps", "", "ring-ns", shard.DefaultRingName, 409, nil)      // refused: no version
	l.write(5, "update", replicaSetUA("A"), "replicasets", "", nsA, "stale", 409, nil)                            // A wakes and writes first
	l.write(5, "create", replicaSetUA("B"), "pods", "", nsA, "b-2", 201, nil)
	l.ring(6, "update", "A", ring, []string{"A", "B"}, []int64{3, 1}) // A accepts its bucket back: a claim
	l.write(7, "delete", replicaSetUA("A"), "pods", "", nsA, "a-2", 200, nil)
	events := l.events()
	history, err := ringHistory(events, "ring-ns", shard.DefaultRingName)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 3 {
		t.Fatalf("ring history has %d versions, want 3 (the refused write has none)", len(history))
	}
	violations, checked := ownershipViolations(events, history)
	if checked != 7 || len(violations) != 3 {
		t.Errorf("checked %d replica writes, want 7; violations %d, want 3 (before the ring, the rogue patch, the stale write):\n%s",
			checked, len(violations), strings.Join(violations, "\n"))
	}
	early, after := writesBeforeClaim(events, history, "A", l.at(4.5))
	if after != 2 || len(early) != 1 || !strings.Contains(early[0], "stale") {
		t.Errorf("after waking: %d writes, want 2; before its claim: %q, want the stale one", after, early)
	}
	if d, buckets, ok := unownedAfter(history, "A", l.at(3.5)); !ok || buckets != 1 || d != 510*time.Millisecond {
		t.Errorf("unowned after A's kill: %v over %d buckets (ok %v), want 510ms over 1", d, buckets, ok)
	}
	if _, _, ok := unownedAfter(history, "B", l.at(6.5)); ok {
		t.Error("B's buckets were never given away after 6.5s, but unownedAfter says they were")
	}
	checkIgnoringTheRingIsCaught(t, ring, nsA, nsB)
}

// checkIgnoringTheRingIsCaught: two replicas that each treat themselves as owner of everything (a coordinator
// that ignored the ring) write in both namespaces; the check reports exactly the two writes outside each
// one's bucket, and none with the ring honoured.
func checkIgnoringTheRingIsCaught(t *testing.T, ring shard.Ring, nsA, nsB string) {
	t.Helper()
	l := &craftedLog{t: t, base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l.ring(1, "create", "A", ring, []string{"A", "B"}, []int64{1, 1})
	for i, id := range []string{"A", "B"} {
		for _, ns := range []string{nsA, nsB} {
			l.write(2+float64(i), "create", replicaSetUA(id), "pods", "", ns, "p", 201, nil)
		}
	}
	events := l.events()
	history, err := ringHistory(events, "ring-ns", shard.DefaultRingName)
	if err != nil {
		t.Fatal(err)
	}
	if violations, checked := ownershipViolations(events, history); checked != 4 || len(violations) != 2 {
		t.Errorf("replicas ignoring the ring: %d of %d writes reported, want 2 of 4:\n%s", len(violations), checked, strings.Join(violations, "\n"))
	} else {
		t.Logf("replicas ignoring the ring are caught:\n%s", strings.Join(violations, "\n"))
	}
	if got := p99([]time.Duration{3, 1, 2}); got != 3 {
		t.Errorf("p99 of 3 values = %v, want the maximum 3", got)
	}
}
