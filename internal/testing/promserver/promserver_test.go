package promserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// A Server scrapes its targets (the exporter's series reach Prometheus), and after Stop nothing answers at its
// URL: what "Prometheus down" tests need.
func TestServerScrapesAndStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := NewExporter(t)
	e.SetErrorRate("h1", 0.5)
	s := Run(ctx, t, Config{Targets: []string{e.Target()}})
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := seriesCount(ctx, s.URL, `http_requests_total{job="promserver",pod_template_hash="h1"}`)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus has %d series of the exporter's hash h1 after a minute, want 2 (codes 200 and 500)", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.Stop()
	s.Stop() // a second Stop returns at once
	if resp, err := http.Get(s.URL + "/-/ready"); err == nil {
		resp.Body.Close()
		t.Errorf("Prometheus still answers at %s after Stop: %s", s.URL, resp.Status)
	}
}

// seriesCount returns how many series the instant query q returns.
func seriesCount(ctx context.Context, base, q string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		return 0, fmt.Errorf("query %q: status %q, %v", q, body.Status, err)
	}
	return len(body.Data.Result), nil
}
