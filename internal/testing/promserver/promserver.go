// Package promserver is test-only: a real Prometheus (Debian's `prometheus` package, which .ci/run installs)
// on a free loopback port, scraping the targets a test gives every second (Start, Run, Server.Stop), and an
// exporter whose per-pod_template_hash error rate the test sets (Exporter). Tests of EX-6's analysis use
// both; test/integration/observe's startPrometheus predates it and could use Run with Config.Rules.
//
// It never installs anything: without the binary a test is skipped, or fails when the environment variable
// CI is set (CI must not skip it silently).
package promserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// readyTimeout bounds how long Run waits for Prometheus to answer /-/ready.
const readyTimeout = time.Minute

// Config is what a Server scrapes.
type Config struct {
	// Targets are host:port addresses scraped at /metrics under the job "promserver".
	Targets []string
	// ScrapeInterval is the scrape and rule evaluation interval; 0 means 1 s.
	ScrapeInterval time.Duration
	// Rules, when not empty, is the content of a Prometheus rule file the server loads.
	Rules string
	// Address, when not empty, is the 127.0.0.1 host:port to listen on (a Prometheus started again where the
	// one a test stopped was, e.g. Server.Address); empty picks a free port.
	Address string
}

// Server is a running Prometheus; the test's cleanup stops it.
type Server struct {
	// URL is its HTTP address, e.g. "http://127.0.0.1:41234".
	URL string
	// Dir holds its configuration, its TSDB and its log (prometheus.log).
	Dir string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	once sync.Once
}

// Start runs Prometheus scraping targets every second and returns its URL once it is ready; it stops when t
// ends. Run gives a Server that can be stopped earlier.
func Start(ctx context.Context, t testing.TB, targets ...string) string {
	t.Helper()
	return Run(ctx, t, Config{Targets: targets}).URL
}

// Binary returns the path of the prometheus binary; without one it skips t, or fails it when CI is set.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("prometheus is not installed, and CI is set: .ci/run installs Debian's prometheus package")
		}
		t.Skip("prometheus is not installed (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	return bin
}

// Run starts Prometheus with c on 127.0.0.1 and a free port (or c.Address), storage in a temporary directory, and returns
// once /-/ready answers 200; it fails t when Prometheus does not start or exits first. The process ends when
// ctx ends, when Stop is called or when t ends; its log is printed when t failed.
func Run(ctx context.Context, t testing.TB, c Config) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(configFile(c, dir, t)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := c.Address
	if addr == "" {
		addr = freeAddress(t)
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + addr, Dir: dir, done: make(chan struct{})}
	s.cmd = exec.CommandContext(ctx, bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("prometheus log:\n%s", b)
			}
		}
	})
	if err := s.waitReady(ctx); err != nil {
		t.Fatalf("prometheus at %s: %v", s.URL, err)
	}
	return s
}

// Address is the host:port s listens on (Config.Address to start another there).
func (s *Server) Address() string { return strings.TrimPrefix(s.URL, "http://") }

// Stop ends the process and waits for it to exit, so that the next query finds nothing listening ("Prometheus
// down"); it may be called more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
	})
	<-s.done
}

// waitReady polls /-/ready until it answers 200; errors when the process exits, ctx ends or readyTimeout
// passes.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before it was ready (see its log)")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// configFile is the prometheus.yml of c; a rule file, when c has rules, is written beside it in dir.
func configFile(c Config, dir string, t testing.TB) string {
	interval := c.ScrapeInterval
	if interval <= 0 {
		interval = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, "global: {scrape_interval: %s, evaluation_interval: %s}\n", interval, interval)
	if c.Rules != "" {
		if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(c.Rules), 0o600); err != nil {
			t.Fatal(err)
		}
		b.WriteString("rule_files: [rules.yaml]\n")
	}
	quoted := make([]string, len(c.Targets))
	for i, target := range c.Targets {
		quoted[i] = fmt.Sprintf("%q", target)
	}
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: promserver\n    static_configs: [{targets: [%s]}]\n", strings.Join(quoted, ", "))
	return b.String()
}

// freeAddress returns a loopback host:port nothing listened on a moment ago.
func freeAddress(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
