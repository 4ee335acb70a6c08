package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/shard"
	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// TestShardedMoveTouchesNothingElse is issue 45's SH-9 check: 3 sharded replicas on `up --controllers=`, 24
// namespaces with a Deployment each; while every Deployment rolls out, a 4th replica joins and buckets move to
// it. No sync of a namespace that stays with its replica fails or is cancelled: each replica logs every sync
// that did not succeed with its key (--vmodule=runner=4), the logs account for every error
// kubedeploy_controller_sync_duration_seconds counted, and after the join no failure of a staying namespace is
// logged, only waits for the caches (rawtemplate.ErrStale among them) and write conflicts (neither cancelled nor
// fenced). The replicas list none
// of the buckets they keep again: from the API server's audit log, no list (a LIST, or a WATCH that begins
// with the objects, as client-go's informers list) of pods, ReplicaSets or Deployments by an old replica's
// informers (its user agent) of a kept bucket's range after the join, while the new replica lists its own.
func TestShardedMoveTouchesNothingElse(t *testing.T) {
	skipShort(t)
	r := startShardRun(t, shardOptions{namespaces: 24, auditLists: true}, nil)
	ports := map[string]int{}
	for range 3 {
		port := freePort(t)
		p := r.startReplica("--secure-port", strconv.Itoa(port), "--vmodule=runner=4")
		ports[p.identity] = port
	}
	r.waitSettled("with 3 replicas")
	r.waitRolloutsComplete()
	old := slices.Clone(r.live)
	stopRollouts := r.keepRollingOut()
	// Rollouts under way in every namespace, for longer than the 30 s after which replicas used to merge their
	// buckets' sets (--shard-consolidate-after): each replica in its steady state when the 4th joins.
	time.Sleep(steadyBeforeJoin)
	joined, logFrom := time.Now(), map[string]int{}
	for _, p := range old {
		logFrom[p.identity] = len(p.out.Bytes())
	}
	newcomer := r.startReplica()
	r.waitSettled("after a 4th replica joined")
	r.waitRingQuiet(5 * time.Second)
	time.Sleep(6 * time.Second) // rollouts go on after the moves
	stopRollouts()
	r.waitRolloutsComplete()
	m := r.readMove(joined, old, newcomer)
	for _, p := range old {
		m.checkSyncs(t, p, logFrom[p.identity], ports[p.identity], r.dir)
	}
	m.checkLists(t, old, newcomer)
}

// steadyBeforeJoin is how long TestShardedMoveTouchesNothingElse rolls out before the 4th replica joins.
const steadyBeforeJoin = 35 * time.Second

// waitRingQuiet waits up to two minutes for the ring to go unchanged for quiet (the moves a join asks for
// done).
func (r *shardRun) waitRingQuiet(quiet time.Duration) {
	r.t.Helper()
	last, since := "", time.Now()
	harness.Eventually(r.t, 2*time.Minute, "the ring to stay unchanged for "+quiet.String(), func(ctx context.Context) (bool, error) {
		cm, err := r.client.CoreV1().ConfigMaps(shardNamespace).Get(ctx, shard.DefaultRingName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		if cm.ResourceVersion != last {
			last, since = cm.ResourceVersion, time.Now()
		}
		return time.Since(since) >= quiet, nil
	})
}

// move is what the audit log says of a join: the ring from the join on, the buckets each old replica kept
// throughout, and every LIST made after the join.
type move struct {
	history []ringVersion
	kept    map[string][]int // old replica → buckets it owned at the join and at every ring version after
	moved   []int
	lists   []auditEvent
	joined  time.Time
	ns      []string
}

// readMove reads the audit log: the ring's history from joined on, which buckets the old replicas kept and
// which moved (at least one must have), and the LISTs received after joined.
func (r *shardRun) readMove(joined time.Time, old []*shardReplica, newcomer *shardReplica) *move {
	r.t.Helper()
	_, history := r.auditHistory()
	m := &move{history: history, kept: map[string][]int{}, joined: joined, ns: r.namespaces}
	start := ringAt(history, joined)
	if start == nil {
		r.t.Fatal("no ring when the 4th replica joined")
	}
	for i, b := range start.ring.Buckets {
		if m.stayed(i, b.Owner) {
			m.kept[b.Owner] = append(m.kept[b.Owner], i)
		} else {
			m.moved = append(m.moved, i)
		}
	}
	r.t.Logf("after %s joined: buckets %v moved; kept: %v", newcomer.identity, m.moved, m.kept)
	if len(m.moved) == 0 || len(m.kept) == 0 {
		r.t.Fatalf("buckets %v moved and %d replicas kept some when the 4th replica joined: the test proves nothing", m.moved, len(m.kept))
	}
	var err error
	if m.lists, err = listsAfter(filepath.Join(r.dir, "audit.log"), joined); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// listsAfter returns the lists received after t in the audit log at path: LISTs, and WATCHes that begin with
// the collection's objects (sendInitialEvents=true: client-go's informers list so, KEP-3157), each once.
func listsAfter(path string, t time.Time) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, err
		}
		list := e.Verb == "list" && e.Stage == "ResponseComplete" ||
			e.Verb == "watch" && e.Stage == "ResponseStarted" && strings.Contains(e.RequestURI, "sendInitialEvents=true")
		if list && e.ObjectRef != nil && e.RequestReceivedTimestamp.After(t) {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// stayed reports whether every ring version from the one current at the join on gives bucket i to owner (not
// releasing it).
func (m *move) stayed(i int, owner string) bool {
	from := ringAt(m.history, m.joined).rv
	for _, v := range m.history {
		if v.rv < from {
			continue
		}
		if i >= len(v.ring.Buckets) || v.ring.Buckets[i].Owner != owner || v.ring.Buckets[i].ReleasingTo != "" {
			return false
		}
	}
	return owner != ""
}

// staying returns the namespaces of the buckets identity kept.
func (m *move) staying(identity string) []string {
	last := m.history[len(m.history)-1].ring
	var out []string
	for _, ns := range m.ns {
		if slices.Contains(m.kept[identity], last.Find(ns)) {
			out = append(out, ns)
		}
	}
	return out
}

// syncLine matches a runner's log line of a sync that did not succeed (every one, with --vmodule=runner=4),
// capturing what it says and the key's namespace.
var syncLine = regexp.MustCompile(`"(Sync failed; will retry with backoff|Sync failed again|Sync is waiting; will retry with backoff|` +
	`Sync hit a write conflict; will retry with backoff|Namespace is terminating; dropping key)".*? key="([^"/]+)/[^"]*"(.*)`)

// checkSyncs checks replica p: its log accounts for every sync error its metric counted, and from logFrom on
// (the join) no sync of a namespace it kept failed, or waited or conflicted with a cancelled or fenced cause. A
// sync that met rawtemplate.ErrStale (its Deployment's newer generation decoded, not yet in the cache: the same
// race with or without sharding) is a wait for the cache, logged as a failure.
func (m *move) checkSyncs(t *testing.T, p *shardReplica, logFrom, port int, dataDir string) {
	t.Helper()
	staying := m.staying(p.identity)
	var lines int
	harness.Eventually(t, 30*time.Second, p.identity+"'s log to account for its sync errors", func(ctx context.Context) (bool, error) {
		errors, err := syncErrors(ctx, dataDir, port)
		lines = len(syncLine.FindAllSubmatch(p.out.Bytes(), -1))
		t.Logf("%s: %d sync errors counted, %d logged", p.identity, errors, lines)
		return err == nil && errors == lines, nil
	})
	causes := map[string]int{}
	for _, sm := range syncLine.FindAllSubmatch(p.out.Bytes()[logFrom:], -1) {
		what, ns, rest := string(sm[1]), string(sm[2]), string(sm[3])
		if !slices.Contains(staying, ns) {
			continue
		}
		if strings.Contains(rest, rawtemplate.ErrStale.Error()) {
			what = "informer behind the template store" // the decoder noted a generation the cache does not show yet
		}
		causes[what]++
		if strings.HasPrefix(what, "Sync failed") || strings.Contains(rest, "context canceled") || strings.Contains(rest, "shard claim") {
			t.Errorf("SH-9: %s kept %s's bucket, yet after the join: %s%s", p.identity, ns, what, rest)
		}
	}
	t.Logf("%s kept buckets %v (%d namespaces); after the join, their syncs that did not succeed: %v", p.identity, m.kept[p.identity], len(staying), causes)
}

// checkLists checks that no old replica's informers listed a bucket it kept after the join, and that the
// newcomer listed (else the audit of LISTs proves nothing).
func (m *move) checkLists(t *testing.T, old []*shardReplica, newcomer *shardReplica) {
	t.Helper()
	last := m.history[len(m.history)-1].ring
	byReplica := map[string]int{}
	for _, e := range m.lists {
		id := replicaOf(e)
		if id == "" || !strings.HasPrefix(e.UserAgent, "kubedeploy-shared-informers-controller/") {
			continue
		}
		byReplica[id]++
		buckets := listedBuckets(e.RequestURI, last)
		relisted := len(buckets) == 0 || slices.ContainsFunc(buckets, func(b int) bool { return b < 0 || slices.Contains(m.kept[id], b) })
		if slices.ContainsFunc(old, func(p *shardReplica) bool { return p.identity == id }) && relisted {
			t.Errorf("SH-9: %s listed %s again after the join (a %s of buckets %v; it kept %v): %s", id, e.ObjectRef.Resource, e.Verb, buckets, m.kept[id], e.RequestURI)
		}
	}
	t.Logf("LISTs of pods, ReplicaSets and Deployments by the replicas' informers after the join: %v", byReplica)
	if byReplica[newcomer.identity] == 0 {
		t.Errorf("the audit log holds no LIST by the new replica %s: it proves nothing", newcomer.identity)
	}
}

// shardRangeArgs are the bounds of a shardSelector's shardRange.
var shardRangeArgs = regexp.MustCompile(`'(0x[0-9a-fA-F]+)'\s*,\s*'(0x[0-9a-fA-F]+)'`)

// listedBuckets returns the buckets of ring whose ranges a list's shardSelector names (-1 for a range that is
// no bucket's), none without a selector (a list of every namespace).
func listedBuckets(requestURI string, ring shard.Ring) []int {
	u, err := url.Parse(requestURI)
	if err != nil {
		return nil
	}
	var out []int
	for _, sm := range shardRangeArgs.FindAllStringSubmatch(u.Query().Get("shardSelector"), -1) {
		out = append(out, slices.IndexFunc(ring.Buckets, func(b shard.Bucket) bool {
			return strings.EqualFold(b.Range().StartHex(), sm[1]) && strings.EqualFold(b.Range().EndHex(), sm[2])
		}))
	}
	return out
}

// syncErrors returns the sync errors a replica counted (kubedeploy_controller_sync_duration_seconds_count
// with result="error", every controller), read from its /metrics on port with up's admin client certificate.
func syncErrors(ctx context.Context, dataDir string, port int) (int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "kubeconfig"))
	if err != nil {
		return 0, err
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil || tlsCfg == nil {
		return 0, fmt.Errorf("client TLS of the kubeconfig: %v", err)
	}
	tlsCfg.RootCAs, tlsCfg.InsecureSkipVerify = nil, true //nolint:gosec // loopback, self-signed serving cert
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone()}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d %v", resp.StatusCode, err)
	}
	n := 0
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "kubedeploy_controller_sync_duration_seconds_count{") && strings.Contains(line, `result="error"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n, nil
}

// listsAuditPolicy is auditPolicy with the metadata of every LIST and WATCH of pods, ReplicaSets and
// Deployments too (the request URI holds its shardSelector, and whether a watch begins with a list).
func listsAuditPolicy(ringNamespace string) string {
	return strings.Replace(auditPolicy(ringNamespace), "- level: None\n", `- level: Metadata
  verbs: ["list", "watch"]
  resources:
  - group: ""
    resources: ["pods"]
  - group: apps
    resources: ["deployments", "replicasets"]
- level: None
`, 1)
}
