package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// EX-6's SSRF guard: a template's own address is queried only when it is --prometheus-url or on
// --analysis-allowed-addresses, compared as normalized URLs; no address at all names the flag to set.
func TestPrometheusAddress(t *testing.T) {
	p := Prometheus{DefaultAddress: "http://prometheus.monitoring:9090/", AllowedAddresses: []string{"https://Thanos.example.com:443/query"}}
	cases := []struct {
		name      string
		p         Prometheus
		template  string
		want, err string
	}{
		{"default", p, "", "http://prometheus.monitoring:9090/", ""},
		{"default spelled differently", p, "HTTP://Prometheus.Monitoring:9090", "HTTP://Prometheus.Monitoring:9090", ""},
		{"allowed, default port and case", p, "https://thanos.example.com/query/", "https://thanos.example.com/query/", ""},
		{"other host", p, "http://169.254.169.254/latest/meta-data", "", "is not allowed: the controllers query only --prometheus-url and the addresses of --analysis-allowed-addresses"},
		{"other port", p, "http://prometheus.monitoring:9091", "", "is not allowed"},
		{"other path", p, "https://thanos.example.com/other", "", "is not allowed"},
		{"other scheme", p, "https://prometheus.monitoring:9090", "", "is not allowed"},
		{"not a URL", p, "prometheus:9090", "", "is not an http:// or https:// URL"},
		{"no address", Prometheus{}, "", "", "set the controllers' --prometheus-url"},
		{"nothing allowed", Prometheus{}, "http://prometheus.monitoring:9090", "", "is not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.p.Address(tc.template)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Address(%q) = %q, %v; want an error containing %q", tc.template, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Address(%q) = %q, %v; want %q", tc.template, got, err, tc.want)
			}
		})
	}
}

// A refused address or a redirect to another origin is an Error measurement and no request reaches that
// address.
func TestMeasureSendsNothingElsewhere(t *testing.T) {
	var reached int
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	cases := []struct {
		name, address, want string
	}{
		{"template address not allowed", elsewhere.URL, "is not allowed"},
		{"redirect", "", "redirect to " + elsewhere.URL + "/api/v1/query refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMeasurer(Prometheus{DefaultAddress: redirecting.URL})
			got := m.Measure(context.Background(), promMetric("up", tc.address, ""), QueryArgs{}, nil)
			if got.Phase != PhaseError || !strings.Contains(got.Message, tc.want) {
				t.Errorf("Measure = %+v, want Error with %q", got, tc.want)
			}
			if reached != 0 {
				t.Errorf("%d requests reached the address that was not allowed", reached)
			}
		})
	}
}

// Validate refuses the controllers' flags when they are not http(s) URLs or the timeout is out of bounds.
func TestPrometheusValidate(t *testing.T) {
	cases := []struct {
		name string
		p    Prometheus
		want string // "" for valid
	}{
		{"zero", Prometheus{}, ""},
		{"valid", Prometheus{DefaultAddress: "http://p:9090", AllowedAddresses: []string{"https://t"}, Timeout: MaxQueryTimeout}, ""},
		{"bad url", Prometheus{DefaultAddress: "p:9090"}, "--prometheus-url"},
		{"bad allowed", Prometheus{AllowedAddresses: []string{"ftp://x"}}, "--analysis-allowed-addresses"},
		{"timeout", Prometheus{Timeout: 2 * MaxQueryTimeout}, "outside 0–1m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
