package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// shardedLabel marks the ConfigMaps this test creates, so lists and watches leave out kube-root-ca.crt.
	shardedLabelKey = "kubedeploy.test/sharded"
	shardedLabel    = shardedLabelKey + "=true"
	// shardZero is the lower half of the hash space of object.metadata.namespace (KEP-5866's shard 0 of 2).
	shardZero = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"
	// auditPolicy audits ConfigMap requests at level Metadata.
	auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [configmaps]}]
- level: None
`
)

// TestShardedListAndWatch starts a control plane as `kubedeploy up` does (ShardedListAndWatch on by default) with
// an audit policy and log, and checks that a LIST of ConfigMaps in all namespaces with a shard selector on
// object.metadata.namespace returns exactly those of the namespaces whose hash is in range and echoes the
// selector in ShardInfo, that a WATCH with it delivers only their events, and that the audit log records the
// creates. It then restarts the same data dir with FeatureGates "ShardedListAndWatch=false": the gate is
// process-global, but each start resets it, so the selector is now ignored (every namespace, no ShardInfo).
func TestShardedListAndWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, auditDir := t.TempDir(), t.TempDir()
	policy, auditLog := filepath.Join(auditDir, "policy.yaml"), filepath.Join(auditDir, "log", "audit.log")
	writeTestFile(t, policy, auditPolicy)
	namespaces := shardNamespaces(t)

	cp, client := startControlPlaneWith(t, ctx, Config{DataDir: dir, Nodes: 1, AuditPolicyFile: policy, AuditLogPath: auditLog})
	defer cp.Stop()
	for _, ns := range namespaces.all {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, namespace, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createShardedConfigMap(t, ctx, client, ns, "first")
	}
	list := listShardedConfigMaps(t, ctx, client, shardZero)
	if list.ShardInfo == nil || list.ShardInfo.Selector != shardZero {
		t.Errorf("sharded list's ShardInfo = %+v, want selector %q", list.ShardInfo, shardZero)
	}
	assertNamespaces(t, "sharded list", configMapNamespaces(list.Items), namespaces.inShardZero)
	assertShardedWatch(t, ctx, client, list.ResourceVersion, namespaces)
	assertAudited(t, ctx, auditLog, namespaces.all[0], "first")
	stopCleanly(t, cp)

	off, client := startControlPlaneWith(t, ctx, Config{DataDir: dir, Nodes: 1, FeatureGates: "ShardedListAndWatch=false"})
	defer off.Stop()
	list = listShardedConfigMaps(t, ctx, client, shardZero)
	if list.ShardInfo != nil {
		t.Errorf("gate off: list's ShardInfo = %+v, want none", list.ShardInfo)
	}
	all := listShardedConfigMaps(t, ctx, client, "")
	assertNamespaces(t, "gate off: list with a shard selector", configMapNamespaces(list.Items),
		slices.Sorted(slices.Values(configMapNamespaces(all.Items))))
	if len(all.Items) != 2*len(namespaces.all)+1 {
		t.Errorf("gate off: %d ConfigMaps without a shard selector, want %d", len(all.Items), 2*len(namespaces.all)+1)
	}
	stopCleanly(t, off)
}

// shardedNamespaces are the test's namespaces: all of them, and those in shardZero.
type shardedNamespaces struct {
	all, inShardZero []string
}

// shardNamespaces returns 8 namespace names, sorted, and those whose FNV-1a hash is in the lower half, checking
// that both halves hold some (else the test could not fail).
func shardNamespaces(t *testing.T) shardedNamespaces {
	t.Helper()
	var ns shardedNamespaces
	// Names differing only in their last byte ("shard-0", "shard-1", …) share their hash's top bits: all 8 would
	// fall in one half.
	for _, name := range []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"} {
		ns.all = append(ns.all, name)
		if sharding.HexLess("0x"+sharding.HashField(name), "0x8000000000000000") {
			ns.inShardZero = append(ns.inShardZero, name)
		}
	}
	if len(ns.inShardZero) == 0 || len(ns.inShardZero) == len(ns.all) {
		t.Fatalf("namespaces %v: %v in shard 0, want some but not all", ns.all, ns.inShardZero)
	}
	t.Logf("namespaces in %s: %v of %v", shardZero, ns.inShardZero, ns.all)
	return ns
}

// startControlPlaneWith starts a control plane for cfg and returns it with an admin client.
func startControlPlaneWith(t *testing.T, ctx context.Context, cfg Config) (*ControlPlane, kubernetes.Interface) {
	t.Helper()
	cp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := cp.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %s (feature gates %q)", time.Since(begin).Round(time.Millisecond), cfg.FeatureGates)
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cp, client
}

// createShardedConfigMap creates a ConfigMap name with shardedLabel in namespace ns.
func createShardedConfigMap(t *testing.T, ctx context.Context, client kubernetes.Interface, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shardedLabelKey: "true"}}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// listShardedConfigMaps lists the test's ConfigMaps in all namespaces with shard selector selector.
func listShardedConfigMaps(t *testing.T, ctx context.Context, client kubernetes.Interface, selector string) *corev1.ConfigMapList {
	t.Helper()
	list, err := client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: shardedLabel, ShardSelector: selector})
	if err != nil {
		t.Fatalf("list with shard selector %q: %v", selector, err)
	}
	return list
}

// assertShardedWatch watches the test's ConfigMaps from resourceVersion with shardZero, creates a ConfigMap
// "second" in every namespace and then "last" in the last in-range one, and checks that the watch delivers the
// ADDED events of the in-range namespaces only: events arrive in resourceVersion order, so once "last" has
// arrived every earlier event the watch would deliver has.
func assertShardedWatch(t *testing.T, ctx context.Context, client kubernetes.Interface, resourceVersion string, ns shardedNamespaces) {
	t.Helper()
	w, err := client.CoreV1().ConfigMaps("").Watch(ctx, metav1.ListOptions{
		LabelSelector: shardedLabel, ShardSelector: shardZero, ResourceVersion: resourceVersion,
	})
	if err != nil {
		t.Fatalf("watch with shard selector: %v", err)
	}
	defer w.Stop()
	for _, n := range ns.all {
		createShardedConfigMap(t, ctx, client, n, "second")
	}
	lastNS := ns.inShardZero[len(ns.inShardZero)-1]
	createShardedConfigMap(t, ctx, client, lastNS, "last")
	var got []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after events in %v", got)
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Added || !isCM {
				t.Fatalf("watch event %s %T, want ADDED ConfigMap", ev.Type, ev.Object)
			}
			if cm.Name == "last" {
				assertNamespaces(t, "sharded watch", got, ns.inShardZero)
				return
			}
			got = append(got, cm.Namespace)
		case <-timeout:
			t.Fatalf("sharded watch: no event for %s/last within 30s; got events in %v", lastNS, got)
		}
	}
}

// configMapNamespaces returns the namespaces of items, in order.
func configMapNamespaces(items []corev1.ConfigMap) []string {
	var out []string
	for _, cm := range items {
		out = append(out, cm.Namespace)
	}
	return out
}

// assertNamespaces checks that got, sorted, equals want.
func assertNamespaces(t *testing.T, what string, got, want []string) {
	t.Helper()
	got = slices.Sorted(slices.Values(got))
	if !slices.Equal(got, want) {
		t.Errorf("%s: objects in namespaces %v, want exactly %v", what, got, want)
	}
}

// assertAudited polls the audit log at path until it holds a ResponseComplete create event for ConfigMap
// namespace/name.
func assertAudited(t *testing.T, ctx context.Context, path, namespace, name string) {
	t.Helper()
	var events int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		f, err := os.Open(path)
		if err != nil {
			return false, nil
		}
		defer f.Close()
		events = 0
		lines := bufio.NewScanner(f)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				return false, fmt.Errorf("audit log line %q: %w", lines.Text(), err)
			}
			events++
			ref := ev.ObjectRef
			if ev.Verb == "create" && ev.Stage == auditv1.StageResponseComplete && ref != nil &&
				ref.Resource == "configmaps" && ref.Namespace == namespace && ref.Name == name {
				return true, nil
			}
		}
		return false, lines.Err()
	})
	if err != nil {
		t.Fatalf("audit log %s (%d events): no create of configmap %s/%s: %v", path, events, namespace, name, err)
	}
}
