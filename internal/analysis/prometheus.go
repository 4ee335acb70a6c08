package analysis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/klog/v2"
)

// Prometheus is where the prometheus provider sends its instant queries (EX-6), as the operator configured
// it on the controllers. The zero value queries nothing: every measurement is an Error asking for
// --prometheus-url. Safe for concurrent use; it keeps no connection state but Transport's.
type Prometheus struct {
	// DefaultAddress is the controllers' --prometheus-url: the address of a metric without one.
	DefaultAddress string
	// AllowedAddresses are the controllers' --analysis-allowed-addresses: the only other addresses a
	// template's `address` may name (compared as normalized URLs). Empty by default, so that whoever can
	// write a ConfigMap cannot make the controllers send requests to an arbitrary URL (SSRF).
	AllowedAddresses []string
	// Timeout bounds a query without a template `timeout` (at most MaxQueryTimeout); 0 means
	// DefaultQueryTimeout.
	Timeout time.Duration
	// Transport sends the requests; nil means client_golang's api.DefaultRoundTripper.
	Transport http.RoundTripper
}

// Validate errors when an address is not an absolute http(s) URL or Timeout is negative or above
// MaxQueryTimeout; the controllers' flag parsing calls it.
func (p Prometheus) Validate() error {
	if p.DefaultAddress != "" {
		if _, err := normalizeAddress(p.DefaultAddress); err != nil {
			return fmt.Errorf("--prometheus-url: %w", err)
		}
	}
	for _, a := range p.AllowedAddresses {
		if _, err := normalizeAddress(a); err != nil {
			return fmt.Errorf("--analysis-allowed-addresses: %w", err)
		}
	}
	if p.Timeout < 0 || p.Timeout > MaxQueryTimeout {
		return fmt.Errorf("prometheus query timeout %s is outside 0–%s", p.Timeout, MaxQueryTimeout)
	}
	return nil
}

// Address returns the address a metric whose template names templateAddress (empty for none) is queried at:
// DefaultAddress when templateAddress is empty, else templateAddress when it equals DefaultAddress or one of
// AllowedAddresses as normalized URLs (scheme and host case, default port, trailing slash). Errors, naming
// the flag to set: no address at all, a template address not allowed (SSRF guard), an address that is not
// an http(s) URL.
func (p Prometheus) Address(templateAddress string) (string, error) {
	if templateAddress == "" {
		if p.DefaultAddress == "" {
			return "", fmt.Errorf("no Prometheus address: set the controllers' --prometheus-url, or give the template an address the operator allowed")
		}
		return p.DefaultAddress, nil
	}
	want, err := normalizeAddress(templateAddress)
	if err != nil {
		return "", err
	}
	for _, a := range append([]string{p.DefaultAddress}, p.AllowedAddresses...) {
		if n, err := normalizeAddress(a); err == nil && n == want {
			return templateAddress, nil
		}
	}
	return "", fmt.Errorf("address %q is not allowed: the controllers query only --prometheus-url and the addresses of --analysis-allowed-addresses (the operator adds it there)", templateAddress)
}

// timeout is the bound of one query: the template's (Settings.Timeout) when set, else p.Timeout, else
// DefaultQueryTimeout; never above MaxQueryTimeout.
func (p Prometheus) timeout(template time.Duration) time.Duration {
	t := DefaultQueryTimeout
	if template > 0 {
		t = template
	} else if p.Timeout > 0 {
		t = p.Timeout
	}
	return min(t, MaxQueryTimeout)
}

// outcome is a measurement decided before the conditions: no single finite value to evaluate.
type outcome struct {
	phase   Phase
	value   string
	message string
}

// instant runs query at address with timeout and returns its value, or the outcome when there is no single
// finite value: a query error, a timeout or an unreachable address is Error with the cause; an empty vector
// (argo-rollouts#1466), more than one series, NaN or ±Inf is Inconclusive; a matrix or a string is Error.
func (p Prometheus) instant(ctx context.Context, address string, timeout time.Duration, query string) (float64, *outcome) {
	client, err := promapi.NewClient(promapi.Config{Address: address, Client: p.httpClient(address)})
	if err != nil {
		return 0, &outcome{phase: PhaseError, message: "Prometheus client: " + oneLine(err.Error())}
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, warnings, err := promv1.NewAPI(client).Query(qctx, query, time.Time{}, promv1.WithTimeout(timeout))
	if len(warnings) > 0 {
		klog.FromContext(ctx).V(2).Info("Prometheus warnings", "address", address, "query", query, "warnings", warnings)
	}
	if err != nil {
		return 0, &outcome{phase: PhaseError, message: queryError(err, qctx, address, timeout)}
	}
	return valueOf(v)
}

// queryError is the one-line cause of a failed query.
func queryError(err error, qctx context.Context, address string, timeout time.Duration) string {
	var perr *promv1.Error
	switch {
	case errors.Is(qctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("query to %s timed out after %s", address, timeout)
	case errors.As(err, &perr):
		msg := fmt.Sprintf("Prometheus at %s answered %s: %s", address, perr.Type, perr.Msg)
		if perr.Detail != "" {
			msg += " (" + perr.Detail + ")"
		}
		return oneLine(msg)
	}
	return oneLine(fmt.Sprintf("query to %s failed: %v", address, err))
}

// valueOf returns the one finite value of an instant query's result v, or the outcome when there is none.
func valueOf(v model.Value) (float64, *outcome) {
	var f float64
	switch v := v.(type) {
	case *model.Scalar:
		f = float64(v.Value)
	case model.Vector:
		switch len(v) {
		case 0:
			return 0, &outcome{phase: PhaseInconclusive, message: "empty result: no series matched (no data yet, or a label that does not match)"}
		case 1:
			f = float64(v[0].Value)
		default:
			return 0, &outcome{phase: PhaseInconclusive, message: fmt.Sprintf("%d series, want one: aggregate the query (e.g. sum(…)) or narrow its labels", len(v))}
		}
	case nil:
		return 0, &outcome{phase: PhaseError, message: "no result in Prometheus' answer"}
	default:
		return 0, &outcome{phase: PhaseError, message: fmt.Sprintf("result is a %s, want a scalar or a vector of one sample (an instant query without a range selector)", v.Type())}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, &outcome{phase: PhaseInconclusive, value: formatValue(f), message: fmt.Sprintf("result %s is not a finite number (e.g. 0/0: no traffic)", formatValue(f))}
	}
	return f, nil
}

// formatValue is a Prometheus value as Measurement.Value shows it: at most 10 significant digits, so that
// float noise does not show ("0.4" for 0.3999999999999999, "12", "1234567", "1e-07", "NaN", "+Inf");
// Measurement.Number keeps the exact value.
func formatValue(f float64) string {
	return strconv.FormatFloat(f, 'g', 10, 64)
}

// httpClient returns the HTTP client of queries to address: p.Transport, and redirects followed only within
// address's scheme and host, so an allowed address cannot forward the query elsewhere.
func (p Prometheus) httpClient(address string) *http.Client {
	rt := p.Transport
	if rt == nil {
		rt = promapi.DefaultRoundTripper
	}
	origin := originOf(address)
	return &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if origin == "" || len(via) >= 5 || originOf(req.URL.String()) != origin {
			return fmt.Errorf("redirect to %s refused: only the allowed address is queried", req.URL.Redacted())
		}
		return nil
	}}
}

// originOf is addr's normalized scheme://host[:port], "" when addr is not an http(s) URL.
func originOf(addr string) string {
	n, err := normalizeAddress(addr)
	if err != nil {
		return ""
	}
	u, err := url.Parse(n)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
