package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// DefaultSecurePort is the default port of `kubedeploy controllers` for
// /healthz, /readyz, /livez and /metrics: kube-controller-manager uses 10257
// and kube-scheduler 10259, so both can run next to kubedeploy on one host.
const DefaultSecurePort = 10260

// The ConfigMap kube-apiserver publishes with the client CA that delegated
// authentication trusts, as kube-controller-manager reads it.
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
)

// unauthenticatedPaths may be read by anyone (kubelet probes), as kube-controller-manager's defaults.
var unauthenticatedPaths = []string{"/healthz", "/readyz", "/livez"}

// Config configures the HTTPS endpoint serving /healthz, /livez, /readyz and
// /metrics, as kube-controller-manager's --secure-port and --bind-address.
// Requests are authenticated (client certificates against the cluster's client
// CA, bearer tokens with TokenReview) and authorized (SubjectAccessReview) by
// the API server; the health paths are open to anyone.
type Config struct {
	// BindAddress is the IP to listen on (default 127.0.0.1).
	BindAddress string
	// Port to listen on; 0 disables serving unless Listener is set.
	Port int
	// Listener, if set, is used instead of BindAddress:Port (tests pass one on a free port).
	Listener net.Listener
	// Profiling serves Go's pprof handlers under /debug/pprof/, authorized like /metrics (nonResourceURLs
	// ["/debug/pprof/*"], verb get), as kube-controller-manager's --profiling does.
	Profiling bool
	// Plain serves plain HTTP with no authentication or authorization, as exporters such as kube-state-metrics
	// serve their metrics: observe mode's, whose RBAC allows reads only (delegated authentication would need
	// TokenReview and SubjectAccessReview creates). It cannot go with Profiling.
	Plain bool
}

// Enabled reports whether anything is to be served.
func (s Config) Enabled() bool { return s.Port > 0 || s.Listener != nil }

// Validate returns an error for a port outside 0..65535 or a BindAddress that is not an IP.
func (s Config) Validate() error {
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("secure-port %d is not in 0..65535", s.Port)
	}
	if s.BindAddress != "" && net.ParseIP(s.BindAddress) == nil {
		return fmt.Errorf("bind-address %q is not an IP address", s.BindAddress)
	}
	if s.Plain && s.Profiling {
		return errors.New("profiling is served only on the authenticated HTTPS endpoint, not over plain HTTP")
	}
	return nil
}

// SyncCheck is the "informer-sync" readiness check: ok when no controllers
// run (a standby), else only once their caches have synced. The zero value
// is ok; it is safe for concurrent use.
type SyncCheck struct {
	synced atomic.Pointer[func() bool]
}

// Name returns the check's name, "informer-sync".
func (c *SyncCheck) Name() string { return "informer-sync" }

// Check returns an error while the function given to Set reports false, else nil.
func (c *SyncCheck) Check(*http.Request) error {
	if f := c.synced.Load(); f != nil && !(*f)() {
		return errors.New("informer caches not synced yet")
	}
	return nil
}

// Set makes the check follow synced; nil resets it to ok.
func (c *SyncCheck) Set(synced func() bool) {
	if synced == nil {
		c.synced.Store(nil)
		return
	}
	c.synced.Store(&synced)
}

// Secure starts the HTTPS server and returns once it listens; it stops when ctx
// is done (in-flight requests get up to 5 s). live checks back /healthz and
// /livez; /readyz adds ready. It returns an error if the port cannot be bound
// or no serving certificate can be made. A client CA that cannot be read yet
// is logged and retried in the background, as kube-controller-manager does:
// until then only bearer tokens authenticate.
//
// Authentication and authorization are delegated to the API server as
// kube-controller-manager's are (see delegation.go), built from
// k8s.io/apiserver's authenticator and authorizer pieces. The packages that
// assemble them upstream (server/options, authorizerfactory, the webhook
// plugins, endpoints/filters) also link CEL, gRPC, OpenTelemetry and the etcd
// client: 20 MB of code, and about 17 MB of resident memory, that a process
// serving four paths never runs (issue 10).
func Secure(ctx context.Context, s Config, client kubernetes.Interface, live []healthz.HealthChecker, ready ...healthz.HealthChecker) error {
	logger := klog.FromContext(ctx)
	ln, err := s.listen()
	if err != nil {
		return fmt.Errorf("listening on the secure port: %w", err)
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("generating the serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authConfigMapNamespace, authConfigMapName, "client-ca-file", client)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("delegated authentication: %w", err)
	}
	if err := ca.RunOnce(ctx); err != nil {
		logger.Info("Client CA not read yet; client certificates are refused until it is", "configMap", authConfigMapNamespace+"/"+authConfigMapName, "err", err)
	}
	go ca.Run(ctx, 1)

	m := HealthAndMetrics(live, ready...)
	if s.Profiling {
		m.HandleFunc("/debug/pprof/", pprof.Index)
		m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		m.HandleFunc("/debug/pprof/profile", pprof.Profile)
		m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{
		Handler:           withDelegatedAuth(m, delegatedAuthentication(client, ca), delegatedAuthorization(client)),
		ReadHeaderTimeout: 32 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			// Verified by the x509 authenticator against the current client CA, so that a rotated CA applies
			// without a restart; a request without a certificate may still carry a token.
			ClientAuth: tls.RequestClientCert,
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"},
		},
		// TLS handshake failures of probes and scanners are noise; keep them for -v=4.
		ErrorLog: log.New(serverErrors{logger}, "", 0),
	}
	run(ctx, srv, func() error { return srv.ServeTLS(ln, "", "") })
	logger.Info("Serving health and metrics", "address", ln.Addr().String())
	return nil
}

// listen returns s.Listener, else a listener on BindAddress (default 127.0.0.1) and Port.
func (s Config) listen() (net.Listener, error) {
	if s.Listener != nil {
		return s.Listener, nil
	}
	host := s.BindAddress
	if host == "" {
		host = "127.0.0.1"
	}
	return net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(s.Port)))
}

// run serves srv with serve in the background until ctx is done, then shuts it down, giving in-flight requests
// up to 5 s; a serving error is logged.
func run(ctx context.Context, srv *http.Server, serve func() error) {
	logger := klog.FromContext(ctx)
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Serving health and metrics stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
}

// serverErrors passes the HTTPS server's own error lines to the logger at verbosity 4.
type serverErrors struct{ logger klog.Logger }

func (e serverErrors) Write(p []byte) (int, error) {
	e.logger.V(4).Info("HTTPS server", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
