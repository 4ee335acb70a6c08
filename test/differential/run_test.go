package differential

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubedeploy/kubedeploy/internal/testing/harness"
)

const (
	// deploymentName is the Deployment every scenario creates (its container has the same name).
	deploymentName = "web"
	// waitTimeout bounds each wait of a scenario; generous because two clusters share two busy cores.
	waitTimeout = 2 * time.Minute
	// scenarioTimeout bounds a whole scenario.
	scenarioTimeout = 4 * time.Minute
)

// run is one cluster's run of one scenario: the steps act through it and it keeps what was observed.
type run struct {
	c     *cluster
	ns    string
	rec   *recorder
	snaps map[string]snapshot
	// managers are the field managers that wrote the Deployment's ReplicaSets (see writers).
	managers []string
}

// scenario is the steps of one test, run identically against each cluster; it returns the first error.
type scenario func(ctx context.Context, r *run) error

// outcome is what one cluster's run observed.
type outcome struct {
	phases []phase
	events []eventKey
	snaps  map[string]snapshot
	// managers is run.managers.
	managers []string
}

// runBoth runs sc against the upstream and our cluster in parallel, each in its own namespace named after t, and
// returns both outcomes; it fails t if either run could not complete its steps.
func runBoth(t *testing.T, sc scenario) (up, our outcome) {
	t.Helper()
	if upstream == nil || ours == nil {
		t.Skip("differential clusters not started (-short)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	ns := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	type result struct {
		o   outcome
		err error
	}
	results := [2]chan result{make(chan result, 1), make(chan result, 1)}
	for i, c := range []*cluster{upstream, ours} {
		go func() {
			o, err := runOne(ctx, c, ns, sc)
			results[i] <- result{o, err}
		}()
	}
	ru, ro := <-results[0], <-results[1]
	if ru.err != nil || ro.err != nil {
		t.Fatalf("scenario did not complete: upstream: %v; ours: %v", ru.err, ro.err)
	}
	t.Logf("upstream events:\n  %s\nour events:\n  %s", strings.Join(multiset(ru.o.events), "\n  "), strings.Join(multiset(ro.o.events), "\n  "))
	return ru.o, ro.o
}

// runOne runs sc on c in namespace ns and deletes the namespace afterwards.
func runOne(ctx context.Context, c *cluster, ns string, sc scenario) (outcome, error) {
	if _, err := c.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.role, err)
	}
	defer func() {
		_ = c.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	rec, err := newRecorder(ctx, c.client, ns, deploymentName, "create")
	if err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.role, err)
	}
	defer rec.close()
	r := &run{c: c, ns: ns, rec: rec, snaps: map[string]snapshot{}}
	if err := sc(ctx, r); err != nil {
		return outcome{}, fmt.Errorf("%s: %w", c.role, err)
	}
	phases, events := rec.result()
	return outcome{phases: phases, events: events, snaps: r.snaps, managers: r.managers}, nil
}

// create creates d in the run's namespace.
func (r *run) create(ctx context.Context, d *appsv1.Deployment) error {
	d.Namespace = r.ns
	_, err := r.c.client.AppsV1().Deployments(r.ns).Create(ctx, d, metav1.CreateOptions{})
	return err
}

// patch patches the Deployment with body of type pt.
func (r *run) patch(ctx context.Context, pt types.PatchType, body string) error {
	_, err := r.c.client.AppsV1().Deployments(r.ns).Patch(ctx, deploymentName, pt, []byte(body), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch %s: %w", body, err)
	}
	return nil
}

// setImage changes the container image as `kubectl set image` does.
func (r *run) setImage(ctx context.Context, image string) error {
	return r.patch(ctx, types.StrategicMergePatchType,
		fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, deploymentName, image))
}

// scale sets spec.replicas as `kubectl scale` does.
func (r *run) scale(ctx context.Context, n int32) error {
	return r.patch(ctx, types.MergePatchType, fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
}

// setPaused pauses or resumes as `kubectl rollout pause|resume` does.
func (r *run) setPaused(ctx context.Context, paused bool) error {
	return r.patch(ctx, types.MergePatchType, fmt.Sprintf(`{"spec":{"paused":%t}}`, paused))
}

// annotateRollback sets the deprecated.deployment.rollback.to annotation to rev.
func (r *run) annotateRollback(ctx context.Context, rev string) error {
	return r.patch(ctx, types.MergePatchType, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, rollbackAnnotation, rev))
}

// undo does what `kubectl rollout undo --to-revision=rev` does (RB-9), through harness.RolloutUndo; rev "" means
// the previous revision. A skipped undo (the template already at rev) is an error too.
func (r *run) undo(ctx context.Context, rev string) error {
	var toRevision int64
	if rev != "" {
		var err error
		if toRevision, err = strconv.ParseInt(rev, 10, 64); err != nil {
			return fmt.Errorf("revision %q: %w", rev, err)
		}
	}
	_, err := harness.RolloutUndo(ctx, r.c.client, r.ns, deploymentName, toRevision)
	return err
}

// settled is a predicate on the Deployment and its ReplicaSets (oldest first) read from the API.
type settled func(d *appsv1.Deployment, rss []appsv1.ReplicaSet) bool

// settle waits until ok holds, then for the Deployment's events (see recorder.waitEvents), then stores a
// snapshot as name (when name is not empty). It returns an error naming what did not happen within waitTimeout.
func (r *run) settle(ctx context.Context, what, name string, ok settled) error {
	return r.settleEvents(ctx, what, name, 0, ok)
}

// settleEvents is settle for a step that also emits other events than ScalingReplicaSet: it waits for at least
// minOther of those in the whole scenario so far.
func (r *run) settleEvents(ctx context.Context, what, name string, minOther int, ok settled) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := r.c.client.AppsV1().Deployments(r.ns).Get(ctx, deploymentName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		list, err := r.c.client.AppsV1().ReplicaSets(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		last = fmt.Sprintf("status %+v; ReplicaSets %s", d.Status, describe(list.Items))
		return ok(d, list.Items), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w; last seen %s", what, err, last)
	}
	r.rec.waitEvents(ctx, minOther, time.Second, 30*time.Second)
	if name == "" {
		return nil
	}
	s, err := r.rec.snapshot(ctx, r.c.client, r.ns)
	r.snaps[name] = s
	return err
}

func describe(rss []appsv1.ReplicaSet) string {
	var parts []string
	for i := range rss {
		rs := &rss[i]
		parts = append(parts, fmt.Sprintf("%s=%d/%d/%d", rsLabel(rs), replicas(rs), rs.Status.Replicas, rs.Status.AvailableReplicas))
	}
	return strings.Join(parts, " ")
}

// image returns the first container image of a template.
func image(t *v1.PodTemplateSpec) string {
	if len(t.Spec.Containers) == 0 {
		return ""
	}
	return t.Spec.Containers[0].Image
}

// complete holds when the Deployment's current generation finished rolling out (ST-9), its Progressing
// condition (when it has a deadline) says NewReplicaSetAvailable, every other ReplicaSet has no pods, and at most
// maxOld old ReplicaSets remain (revision-history cleanup done).
func complete(maxOld int) settled {
	return func(d *appsv1.Deployment, rss []appsv1.ReplicaSet) bool {
		want := *d.Spec.Replicas
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want {
			return false
		}
		if d.Spec.ProgressDeadlineSeconds != nil && conditionReason(d, appsv1.DeploymentProgressing) != "NewReplicaSetAvailable" {
			return false
		}
		old := 0
		for i := range rss {
			if image(&rss[i].Spec.Template) == image(&d.Spec.Template) {
				continue
			}
			old++
			if replicas(&rss[i]) != 0 || rss[i].Status.Replicas != 0 {
				return false
			}
		}
		return old <= maxOld
	}
}

// sizes holds when every ReplicaSet named by label (see rsLabel) has exactly that spec, status and available
// count, and the Deployment status was computed for its current generation from those ReplicaSets: the same
// total, ready and available replicas.
func sizes(want map[string][3]int32) settled {
	return func(d *appsv1.Deployment, rss []appsv1.ReplicaSet) bool {
		if d.Status.ObservedGeneration < d.Generation {
			return false
		}
		seen, total, ready, available := 0, int32(0), int32(0), int32(0)
		for i := range rss {
			w, ok := want[rsLabel(&rss[i])]
			if !ok {
				continue
			}
			seen++
			total += w[1]
			ready += rss[i].Status.ReadyReplicas
			available += w[2]
			got := [3]int32{replicas(&rss[i]), rss[i].Status.Replicas, rss[i].Status.AvailableReplicas}
			if got != w {
				return false
			}
		}
		// The Deployment's status must show those ReplicaSets too, or a snapshot
		// races the controller's next status write (seen: upstream's Available 4
		// of a ReplicaSet already showing 6).
		return seen == len(want) && d.Status.Replicas == total &&
			d.Status.ReadyReplicas == ready && d.Status.AvailableReplicas == available
	}
}

// conditionReason returns the reason of d's condition of type ct, or "".
func conditionReason(d *appsv1.Deployment, ct appsv1.DeploymentConditionType) string {
	for _, c := range d.Status.Conditions {
		if c.Type == ct {
			return c.Reason
		}
	}
	return ""
}

// progressing holds when d's Progressing condition has reason.
func progressing(reason string) settled {
	return func(d *appsv1.Deployment, _ []appsv1.ReplicaSet) bool {
		return conditionReason(d, appsv1.DeploymentProgressing) == reason
	}
}

// annotationCleared holds when the rollback annotation is gone (the rollback sync ran, RB-3..RB-7).
func annotationCleared(d *appsv1.Deployment, _ []appsv1.ReplicaSet) bool {
	_, ok := d.Annotations[rollbackAnnotation]
	return !ok
}

// and holds when all of preds hold.
func and(preds ...settled) settled {
	return func(d *appsv1.Deployment, rss []appsv1.ReplicaSet) bool {
		for _, p := range preds {
			if !p(d, rss) {
				return false
			}
		}
		return true
	}
}

// recordWriters stores in r.managers the field managers of the Deployment's ReplicaSets, which tell which
// implementation wrote them (kube-controller-manager or kubedeploy).
func (r *run) recordWriters() {
	seen := map[string]bool{}
	for _, rs := range r.rec.owned() {
		for _, f := range rs.ManagedFields {
			seen[f.Manager] = true
		}
	}
	r.managers = sortedKeys(seen)
}
