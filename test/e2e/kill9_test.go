package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

// upKills is how many times TestKill9UpMidRollout kills `kubedeploy up`.
const upKills = 5

// TestKill9UpMidRollout kills the whole of `kubedeploy up` (etcd,
// kube-apiserver, KWOK and the controllers in one process) with SIGKILL in
// the middle of each of 5 rollouts of a 20-replica Deployment, and starts it
// again on the same data dir (issue 7). After every restart:
//   - nothing is lost: the Deployment, every ReplicaSet that existed at the
//     kill (same UIDs) and a ConfigMap written just before the kill are there;
//   - the rollout resumes within the surge and availability bounds (25 / 15),
//     checked at every ReplicaSet change, with one ReplicaSet per template;
//
// and at the end nothing spurious was written: one ReplicaSet and one
// revision per template, no hash collision, and a last kill of the settled
// Deployment followed by a restart writes neither it nor its ReplicaSets.
func TestKill9UpMidRollout(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--api-port", "0", "--pod-startup-delay", "1s"}
	p := startUp(t, args...)
	client := clientFor(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	d := harness.NewDeployment("default", "web", 20, "nginx:1.9")
	d.Spec.RevisionHistoryLimit = ptr.To(int32(upKills + 1)) // every ReplicaSet is kept, so a lost one shows
	created, err := client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", "web", 2*time.Minute)

	for kill := range upKills {
		watch := harness.WatchRollout(t, client, "default", "web", harness.Bounds{MaxTotal: 25, MinAvailable: 15})
		harness.SetImage(ctx, t, client, "default", "web", "web", fmt.Sprintf("nginx:1.9-%d", kill+1))
		harness.Eventually(t, 2*time.Minute, "the controllers to start rolling out the new template", func(ctx context.Context) (bool, error) {
			return rollingOut(ctx, client, "web")
		})
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
		watch.Stop()
		watch.Check(0)
		marker := fmt.Sprintf("written-before-kill-%d", kill)
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: marker}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before := ownedReplicaSetUIDs(ctx, t, client, "web")
		p.sigkill(t)

		p = startUp(t, args...)
		client = clientFor(t, dir)
		checkNothingLost(ctx, t, client, kill, marker, created.UID, before)
	}
	watch := harness.WatchRollout(t, client, "default", "web", harness.Bounds{MaxTotal: 25, MinAvailable: 15})
	done := harness.WaitComplete(t, client, "default", "web", 3*time.Minute)
	watch.Stop()
	watch.Check(1)
	checkOneRevisionPerTemplate(ctx, t, client, done, upKills+1)

	// A kill of the settled Deployment: after the restart the controllers
	// resync it and must find nothing to write.
	checkSettledKillWritesNothing(ctx, t, p, client, args, dir, done)
}

// checkNothingLost checks, after the restart that followed kill number kill,
// that the ConfigMap marker written just before it, Deployment default/web
// (still uid) and every ReplicaSet of before (name → uid) are there.
func checkNothingLost(ctx context.Context, t *testing.T, client kubernetes.Interface, kill int, marker string, uid types.UID, before map[string]types.UID) {
	t.Helper()
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, marker, metav1.GetOptions{}); err != nil {
		t.Errorf("kill %d: ConfigMap %s, written before the kill, is lost: %v", kill, marker, err)
	}
	checkSameUID(ctx, t, client, "web", uid)
	after := ownedReplicaSetUIDs(ctx, t, client, "web")
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("kill %d: ReplicaSet %s (uid %s) is lost after the restart; now %v", kill, name, uid, after)
		}
	}
}

// checkSettledKillWritesNothing waits for done and its ReplicaSets to
// settle, kills p with SIGKILL, starts up again with args on dir, and checks
// that the controllers, resyncing, wrote neither done nor its ReplicaSets.
func checkSettledKillWritesNothing(ctx context.Context, t *testing.T, p *upProcess, client kubernetes.Interface, args []string, dir string, done *appsv1.Deployment) {
	t.Helper()
	harness.Eventually(t, time.Minute, "the Deployment and its ReplicaSets to settle", func(ctx context.Context) (bool, error) {
		return settled(ctx, client, done)
	})
	versions := resourceVersions(ctx, t, client, done)
	p.sigkill(t)
	startUp(t, args...)
	client = clientFor(t, dir)
	barrier(ctx, t, client)
	checkUnchanged(ctx, t, client, done, versions)
}

// sigkill kills `kubedeploy up` with SIGKILL and waits for it to be gone.
func (p *upProcess) sigkill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-p.exited
	p.exited <- err
}

// rollingOut reports whether the controllers have begun the rollout of
// Deployment default/name's current template: its generation is observed and
// some, not all, replicas are updated.
func rollingOut(ctx context.Context, client kubernetes.Interface, name string) (bool, error) {
	d, err := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas > 0 && d.Status.UpdatedReplicas < *d.Spec.Replicas, nil
}

// settled reports whether d and its ReplicaSets have nothing left to
// record: d complete, every ReplicaSet's status observed and equal to its
// spec, and no pod of theirs terminating.
func settled(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment) (bool, error) {
	got, err := client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil || !harness.DeploymentComplete(got) || ptr.Deref(got.Status.TerminatingReplicas, 0) != 0 {
		return false, err
	}
	rss, err := client.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, rs := range rss.Items {
		if rs.Status.ObservedGeneration != rs.Generation || rs.Status.Replicas != *rs.Spec.Replicas ||
			rs.Status.AvailableReplicas != *rs.Spec.Replicas || ptr.Deref(rs.Status.TerminatingReplicas, 0) != 0 {
			return false, nil
		}
	}
	pods, err := client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			return false, nil
		}
	}
	return true, nil
}

// ownedReplicaSetUIDs returns the UID of each ReplicaSet of Deployment
// default/name, by ReplicaSet name.
func ownedReplicaSetUIDs(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) map[string]types.UID {
	t.Helper()
	d, err := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, rs := range harness.OwnedReplicaSets(ctx, t, client, d) {
		out[rs.Name] = rs.UID
	}
	return out
}

// checkSameUID fails t unless Deployment default/name exists with uid.
func checkSameUID(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, uid types.UID) {
	t.Helper()
	d, err := client.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil || d.UID != uid {
		t.Errorf("Deployment %s (uid %s) lost or recreated: %v", name, uid, err)
	}
}

// checkOneRevisionPerTemplate checks the settled Deployment d went through
// templates templates and wrote nothing more: that many ReplicaSets, with
// distinct revisions 1..templates, d at the last one, and no hash collision.
func checkOneRevisionPerTemplate(ctx context.Context, t *testing.T, client kubernetes.Interface, d *appsv1.Deployment, templates int) {
	t.Helper()
	rss := harness.OwnedReplicaSets(ctx, t, client, d)
	revisions := map[string]string{}
	for _, rs := range rss {
		revisions[rs.Annotations["deployment.kubernetes.io/revision"]] = rs.Name
	}
	if len(rss) != templates || len(revisions) != templates {
		t.Errorf("%d ReplicaSets with revisions %v, want %d, one per template: %v", len(rss), revisions, templates, names(rss))
	}
	if got, want := d.Annotations["deployment.kubernetes.io/revision"], fmt.Sprint(templates); got != want {
		t.Errorf("Deployment revision %s, want %s: a revision was written twice", got, want)
	}
	if c := d.Status.CollisionCount; c != nil && *c != 0 {
		t.Errorf("status.collisionCount = %d: a ReplicaSet was created for a template that already had one", *c)
	}
}

// resourceVersions returns the resourceVersion of d and of each of its
// ReplicaSets, by "kind/name".
func resourceVersions(ctx context.Context, t *testing.T, client kubernetes.Interface, d *appsv1.Deployment) map[string]string {
	t.Helper()
	got, err := client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"Deployment/" + d.Name: got.ResourceVersion}
	for _, rs := range harness.OwnedReplicaSets(ctx, t, client, got) {
		out["ReplicaSet/"+rs.Name] = rs.ResourceVersion
	}
	return out
}

// barrier creates a one-replica Deployment and waits for it to complete.
// Both controllers queue every object they find at start before they see
// the barrier, and the barrier needs several syncs of each, so by then every
// object present at start has been synced at least once.
func barrier(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	name := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
	if _, err := client.AppsV1().Deployments("default").Create(ctx, harness.NewDeployment("default", name, 1, "nginx:1.9"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.WaitComplete(t, client, "default", name, 2*time.Minute)
}

// checkUnchanged fails t if d or one of its ReplicaSets was written since
// versions were taken, or one was added or removed.
func checkUnchanged(ctx context.Context, t *testing.T, client kubernetes.Interface, d *appsv1.Deployment, versions map[string]string) {
	t.Helper()
	now := resourceVersions(ctx, t, client, d)
	for key, rv := range versions {
		if now[key] != rv {
			t.Errorf("%s was written after the restart although nothing had changed: resourceVersion %s, was %s", key, now[key], rv)
		}
	}
	for key := range now {
		if _, ok := versions[key]; !ok {
			t.Errorf("%s appeared after the restart although nothing had changed", key)
		}
	}
}
