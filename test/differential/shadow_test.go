package differential

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"testing"

	"github.com/kubedeploy/kubedeploy/internal/manager"
)

// shadowQuiet is the shadow check's confirmation time on the embedded clusters, whose controllers act in
// milliseconds.
const shadowQuiet = time.Second

// runObserved runs the tests while `kubedeploy observe` (observe mode, in this process) follows the upstream
// cluster, and fails the run when its shadow check found a write kubedeploy would make at a settled state, or
// a ReplicaSet write of kube-controller-manager past the surge or availability bound (issue 25: every scenario
// of the suite, with kubedeploy in shadow, gives 0 divergences). It prints the checks' counts.
func runObserved(m *testing.M, c *cluster) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "observe: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().WithName("observe")))
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(ctx, manager.Config{RESTConfig: cfg, Controllers: []string{}, Observe: true, ShadowQuiet: shadowQuiet,
			Version: "differential", Serving: manager.Serving{Port: 0}})
	}()
	code := m.Run()
	// The scenarios' namespaces are being deleted: wait for the shadow check to decide on every Deployment it
	// still knows of, so that a divergence it found is confirmed (counted) or dropped with its Deployment.
	scenariosDone := time.Now()
	undecided, waitErr := waitShadowDecided(shadowDecideTimeout)
	decidedIn := time.Since(scenariosDone).Round(100 * time.Millisecond)
	cancel()
	if waitErr != nil {
		fmt.Fprintf(os.Stderr, "observe: reading its metrics: %v\n", waitErr)
		return max(code, 1)
	}
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "observe: %v\n", err)
		return max(code, 1)
	}
	if len(undecided) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the shadow check did not decide on %v within %s\n", undecided, shadowDecideTimeout)
		return max(code, 1)
	}
	counts, err := shadowCounts()
	if err != nil {
		fmt.Fprintf(os.Stderr, "observe: reading its metrics: %v\n", err)
		return max(code, 1)
	}
	fmt.Fprintf(os.Stderr, "observe on the upstream cluster: %v shadow checks of settled Deployments, %v of unsettled ones; "+
		"%v divergences; bound violations: %v surge, %v availability, %v partition; every Deployment decided %s after the scenarios\n",
		counts["checks/true"], counts["checks/false"], counts["divergences"], counts["surge"], counts["availability"], counts["partition"], decidedIn)
	if counts["checks/true"] == 0 || counts["divergences"] != 0 || counts["surge"] != 0 || counts["availability"] != 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the shadow check must run on settled Deployments and find neither a divergence nor a surge or "+
			"availability violation (see the observe log lines in this output)")
		return max(code, 1)
	}
	return code
}

// shadowDecideTimeout bounds how long the suite waits, after its scenarios, for the shadow check's decisions:
// long enough for the namespaces of the last scenarios to be deleted on a busy machine.
const shadowDecideTimeout = 2 * time.Minute

// waitShadowDecided polls this process's registry until the shadow check's last check of every Deployment it
// still knows of (kubedeploy_shadow_deployment_state) found it settled and decided (converged, or divergent:
// confirmed and counted); deleted Deployments are forgotten. It returns those still unsettled or unconfirmed
// at timeout ("namespace/name: state"), or the registry's error.
func waitShadowDecided(timeout time.Duration) ([]string, error) {
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		undecided, err := shadowUndecided()
		if err != nil || len(undecided) == 0 || time.Now().After(deadline) {
			return undecided, err
		}
	}
}

// shadowUndecided returns the Deployments whose last shadow check found them unsettled or divergent but not
// yet confirmed, "namespace/name: state".
func shadowUndecided() ([]string, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "kubedeploy_shadow_deployment_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if s := labels["state"]; m.GetGauge().GetValue() == 1 && (s == "unsettled" || s == "unconfirmed") {
				out = append(out, labels["namespace"]+"/"+labels["deployment"]+": "+s)
			}
		}
	}
	return out, nil
}

// shadowCounts reads the shadow check's counters from this process's registry.
func shadowCounts() (map[string]float64, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			v := m.GetCounter().GetValue()
			switch f.GetName() {
			case "kubedeploy_shadow_checks_total":
				out["checks/"+labels["settled"]] += v
			case "kubedeploy_shadow_divergences_total":
				out["divergences"] += v
			case "kubedeploy_shadow_bound_violations_total":
				out[labels["bound"]] += v
			}
		}
	}
	return out, nil
}
