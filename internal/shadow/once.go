package shadow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubedeploy/kubedeploy/internal/controller/ownership"
	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// Once checks every Deployment in namespace ("" for all) as the caches show it, and returns the reports of
// those whose divergences were confirmed: seen, then seen again with the same fingerprint and divergences in
// the same fields after quiet (<= 0: DefaultQuiet). Deployments that are not settled are listed in unsettled
// (namespace/name: why), which `observe --once` prints so that a clean report says what it covered. The
// caches must have synced. It returns the first failed check's error, or ctx's.
func (c *Checker) Once(ctx context.Context, namespace string, quiet time.Duration) (divergent []Report, unsettled []string, checked int, err error) {
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	ds, err := c.dLister.Deployments(namespace).List(labels.Everything())
	if err != nil {
		return nil, nil, 0, fmt.Errorf("shadow: %w", err)
	}
	first := map[cache.ObjectName]Report{}
	for _, d := range ds {
		key := cache.ObjectName{Namespace: d.Namespace, Name: d.Name}
		r, err := c.Check(ctx, key)
		if err != nil {
			return nil, nil, 0, err
		}
		checked++
		switch {
		case !r.Settled:
			unsettled = append(unsettled, key.String()+": "+r.NotSettled)
		case len(r.Divergences) > 0:
			first[key] = r
		}
	}
	if len(first) > 0 {
		select {
		case <-ctx.Done():
			return nil, nil, 0, ctx.Err()
		case <-time.After(quiet):
		}
	}
	for key, r1 := range first {
		r2, err := c.Check(ctx, key)
		if err != nil {
			return nil, nil, 0, err
		}
		if r2.Settled && r2.Fingerprint == r1.Fingerprint && sameFields(r2.Divergences, r1.Divergences) {
			divergent = append(divergent, r2)
		} else {
			unsettled = append(unsettled, key.String()+": changed while being checked")
		}
	}
	slices.SortFunc(divergent, func(a, b Report) int { return strings.Compare(a.Deployment.String(), b.Deployment.String()) })
	slices.Sort(unsettled)
	return divergent, unsettled, checked, nil
}

// Verdicts returns, for every Deployment in namespace ("" for all) whose rollout is not complete, sorted,
// "namespace/name: " and rolloutstate.Verdict's one-line summary: the verdict the Deployment controller's
// conditions, `rollout plan`, `rollout watch` and the rollout metrics give the same objects (held, held with
// kept-back pods unavailable, stuck on an invalid value, past its deadline, progressing). The caches must
// have synced; it returns their errors.
func (c *Checker) Verdicts(namespace string) ([]string, error) {
	ds, err := c.dLister.Deployments(namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	var out []string
	for _, d := range ds {
		rss, err := ownership.ByController[*appsv1.ReplicaSet](c.rsIndexer, d.UID)
		if err != nil {
			return nil, fmt.Errorf("shadow: %w", err)
		}
		if v := rolloutstate.VerdictOf(d, rss); v.Phase != rolloutstate.PhaseComplete {
			out = append(out, fmt.Sprintf("%s/%s: %s", d.Namespace, d.Name, v.Summary))
		}
	}
	slices.Sort(out)
	return out, nil
}
