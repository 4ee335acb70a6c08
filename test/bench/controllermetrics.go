package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// metricsClient returns an HTTPS client presenting the admin kubeconfig's client certificate (kubedeploy
// authorizes /metrics for system:masters; upstream, given no authentication kubeconfig, treats it as anonymous
// and allows /metrics by --authorization-always-allow-paths). Serving certificates are self-signed, so they are
// not verified: everything is on loopback.
func metricsClient(kubeconfig string) (*http.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{}
	}
	tlsCfg.RootCAs, tlsCfg.InsecureSkipVerify = nil, true //nolint:gosec // loopback, self-signed serving cert
	// Uncompressed: each gzipped scrape allocates a gzip writer (~0.8 MB) and leaves it in the process's
	// sync.Pool, where the next collection counts it live (liveHeapMB).
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableCompression: true}}, nil
}

// queueMetrics are a controller process's workqueue metrics (client-go's, named by queue: "deployment",
// "replicaset") at one moment.
type queueMetrics struct {
	adds, retries map[string]float64
	// work and wait are the workqueue_work_duration_seconds and workqueue_queue_duration_seconds histograms:
	// cumulative counts by upper bound in seconds, per queue.
	work, wait map[string]map[float64]float64
}

// scrapeQueues reads the metrics at url, retrying for up to 30 s while the server starts.
func scrapeQueues(ctx context.Context, client *http.Client, url string) (queueMetrics, error) {
	var body []byte
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		body, err = get(ctx, client, url)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return queueMetrics{}, fmt.Errorf("controller metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return queueMetrics{}, fmt.Errorf("parsing controller metrics: %w", err)
	}
	return queueMetrics{
		adds:    counters(families["workqueue_adds_total"]),
		retries: counters(families["workqueue_retries_total"]),
		work:    histograms(families["workqueue_work_duration_seconds"]),
		wait:    histograms(families["workqueue_queue_duration_seconds"]),
	}, nil
}

func get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.200s", url, res.Status, b)
	}
	return b, err
}

// queueName returns the "name" label of m.
func queueName(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "name" {
			return l.GetValue()
		}
	}
	return ""
}

func counters(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		out[queueName(m)] += m.GetCounter().GetValue()
	}
	return out
}

func histograms(f *dto.MetricFamily) map[string]map[float64]float64 {
	out := map[string]map[float64]float64{}
	for _, m := range f.GetMetric() {
		h := map[float64]float64{}
		for _, b := range m.GetHistogram().GetBucket() {
			h[b.GetUpperBound()] = float64(b.GetCumulativeCount())
		}
		h[math.Inf(1)] = float64(m.GetHistogram().GetSampleCount())
		out[queueName(m)] = h
	}
	return out
}

// queueStats is what a phase cost a controller process in its queues, summed over the Deployment and ReplicaSet
// queues.
type queueStats struct {
	// Syncs counts workqueue adds; Retries counts workqueue_retries_total, which client-go raises for every
	// AddAfter (rate-limited retries and time-based or coalesced adds alike).
	Syncs, Retries int
	// SyncP50, SyncP99 are quantiles of the time a sync took; WaitP99 of the time a key waited in the queue; in
	// seconds, estimated from the histograms' buckets as Prometheus' histogram_quantile does.
	SyncP50, SyncP99, WaitP99 float64
}

// diffQueues returns the queue statistics between two scrapes.
func diffQueues(before, after queueMetrics) queueStats {
	var s queueStats
	for q, n := range after.adds {
		s.Syncs += int(n - before.adds[q])
	}
	for q, n := range after.retries {
		s.Retries += int(n - before.retries[q])
	}
	work, wait := diffHistograms(before.work, after.work), diffHistograms(before.wait, after.wait)
	s.SyncP50, s.SyncP99, s.WaitP99 = quantile(0.5, work), quantile(0.99, work), quantile(0.99, wait)
	return s
}

// diffHistograms returns after - before, merged over queues: cumulative counts by upper bound.
func diffHistograms(before, after map[string]map[float64]float64) map[float64]float64 {
	out := map[float64]float64{}
	for q, h := range after {
		for le, n := range h {
			out[le] += n - before[q][le]
		}
	}
	return out
}

// quantile estimates the q-quantile of a cumulative histogram (upper bound → count) by linear interpolation
// within the bucket that holds it, as histogram_quantile does; NaN for no samples. A quantile in the +Inf bucket
// is the largest finite bound.
func quantile(q float64, h map[float64]float64) float64 {
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 || h[bounds[len(bounds)-1]] == 0 {
		return math.NaN()
	}
	rank := q * h[bounds[len(bounds)-1]]
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		if h[le] >= rank {
			if math.IsInf(le, 1) {
				return prevBound
			}
			if h[le] == prevCount {
				return le
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(h[le]-prevCount)
		}
		prevBound, prevCount = le, h[le]
	}
	return prevBound
}

// profileFor is how much of each phase -profile records.
const profileFor = 30 * time.Second

// profileInto makes dir and has p's profiles (profile) written there.
func (p *process) profileInto(dir string) error {
	p.profileDir = dir
	return os.MkdirAll(dir, 0o755)
}

// profiled says whether profile and profileWhole fetch anything from p: it has a profileDir and serves
// /debug/pprof (observe mode's processes do not).
func (p *process) profiled() bool { return p.profileDir != "" && !p.noPprof }

// profile, when p has a profileDir, fetches a profileFor CPU profile from the controllers'
// /debug/pprof/profile into profileDir/<phase>.pprof and an allocation profile of the same seconds
// (/debug/pprof/allocs) into profileDir/<phase>.allocs in the background; the returned channel is closed when both
// are written or have failed (a failure is logged, not returned: the profile is a diagnostic, not a measurement).
func (p *process) profile(ctx context.Context, cl *cluster, phase string) <-chan struct{} {
	done := make(chan struct{})
	if !p.profiled() {
		close(done)
		return done
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.fetchProfile(ctx, cl, "profile", phase+".pprof") })
	wg.Go(func() { p.fetchProfile(ctx, cl, "allocs", phase+".allocs") })
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

// profileWhole, when p has a profileDir, fetches back-to-back profileFor CPU profiles from p until stop is closed
// (the last one ends up to profileFor after it) into profileDir/<phase>-windows/NN.pprof, then merges them into
// profileDir/<phase>.pprof: the CPU profile of the whole phase, not of its first profileFor (the shards mode's
// rollout, whose first 30 s are mostly pod creates: issue 48). It fetches no allocation profile: the shards mode
// runs its processes with heap profiling off (heapProfileOff). The returned channel is closed once the merged
// profile is written or has failed (logged, not returned: a diagnostic).
func (p *process) profileWhole(ctx context.Context, cl *cluster, phase string, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	if !p.profiled() {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		windows := phase + "-windows"
		if err := os.MkdirAll(filepath.Join(p.profileDir, windows), 0o755); err != nil {
			logf("CPU profile of %s: %v", phase, err)
			return
		}
		var files []string
		for i := 1; ; i++ {
			file := filepath.Join(windows, fmt.Sprintf("%02d.pprof", i))
			p.fetchProfile(ctx, cl, "profile", file)
			files = append(files, filepath.Join(p.profileDir, file))
			select {
			case <-stop:
			case <-ctx.Done():
			default:
				continue
			}
			break
		}
		if err := mergeProfiles(files, filepath.Join(p.profileDir, phase+".pprof")); err != nil {
			logf("CPU profile of %s: %v", phase, err)
		}
	}()
	return done
}

// mergeProfiles writes to out the merge of the pprof profiles at paths (github.com/google/pprof/profile.Merge:
// the same samples summed); a path that is missing or unreadable is skipped (fetchProfile logged why). The error
// is the merge's or out's, or says that no profile could be read.
func mergeProfiles(paths []string, out string) error {
	var ps []*profile.Profile
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if p, err := profile.ParseData(b); err == nil {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return fmt.Errorf("none of the %d profiles could be read", len(paths))
	}
	merged, err := profile.Merge(ps)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fetchProfile fetches the profileFor delta of the controllers' /debug/pprof/<name> (profile: CPU; allocs: the
// bytes and objects allocated in that time, by call stack) into profileDir/file. A failure is logged, not returned.
func (p *process) fetchProfile(ctx context.Context, cl *cluster, name, file string) {
	client := *cl.metrics
	client.Timeout = profileFor + 30*time.Second
	url := fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", strings.TrimSuffix(p.metricsURL(), "/metrics"), name, int(profileFor.Seconds()))
	b, err := get(ctx, &client, url)
	if err == nil {
		err = os.WriteFile(filepath.Join(p.profileDir, file), b, 0o644)
	}
	if err != nil {
		logf("%s profile of %s: %v", name, file, err)
	}
}
