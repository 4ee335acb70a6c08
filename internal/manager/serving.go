package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/path"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	controllermanager "k8s.io/controller-manager/app"
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

// Serving configures the HTTPS endpoint serving /healthz, /livez, /readyz and
// /metrics, as kube-controller-manager's --secure-port and --bind-address.
// Requests are authenticated (client certificates against the cluster's client
// CA, bearer tokens with TokenReview) and authorized (SubjectAccessReview) by
// the API server; the health paths are open to anyone.
type Serving struct {
	// BindAddress is the IP to listen on (default 127.0.0.1).
	BindAddress string
	// Port to listen on; 0 disables serving unless Listener is set.
	Port int
	// Listener, if set, is used instead of BindAddress:Port (tests pass one on a free port).
	Listener net.Listener
	// Profiling serves Go's pprof handlers under /debug/pprof/, authorized like /metrics (nonResourceURLs
	// ["/debug/pprof/*"], verb get), as kube-controller-manager's --profiling does.
	Profiling bool
}

// Enabled reports whether anything is to be served.
func (s Serving) Enabled() bool { return s.Port > 0 || s.Listener != nil }

// Validate returns an error for a port outside 0..65535 or a BindAddress that is not an IP.
func (s Serving) Validate() error {
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("secure-port %d is not in 0..65535", s.Port)
	}
	if s.BindAddress != "" && net.ParseIP(s.BindAddress) == nil {
		return fmt.Errorf("bind-address %q is not an IP address", s.BindAddress)
	}
	return nil
}

// informerSyncCheck is the "informer-sync" readiness check: ok when no
// controllers run (a standby), else only once their caches have synced.
type informerSyncCheck struct {
	synced atomic.Pointer[func() bool]
}

func (c *informerSyncCheck) Name() string { return "informer-sync" }

func (c *informerSyncCheck) Check(*http.Request) error {
	if f := c.synced.Load(); f != nil && !(*f)() {
		return errors.New("informer caches not synced yet")
	}
	return nil
}

// set makes the check follow synced; nil resets it to ok.
func (c *informerSyncCheck) set(synced func() bool) {
	if synced == nil {
		c.synced.Store(nil)
		return
	}
	c.synced.Store(&synced)
}

// serve starts the HTTPS server and returns once it listens; it stops when ctx
// is done. live checks back /healthz and /livez; /readyz adds ready.
// It returns an error if the port cannot be bound or the delegated
// authentication cannot read its client CA from the API server.
func serve(ctx context.Context, s Serving, client kubernetes.Interface, live []healthz.HealthChecker, ready ...healthz.HealthChecker) error {
	opts := options.NewSecureServingOptions()
	opts.BindAddress = net.ParseIP(s.BindAddress)
	if opts.BindAddress == nil {
		opts.BindAddress = net.ParseIP("127.0.0.1")
	}
	opts.BindPort, opts.Listener = s.Port, s.Listener
	opts.ServerCert.CertDirectory, opts.ServerCert.PairName = "", "kubedeploy"
	if err := opts.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return fmt.Errorf("generating the serving certificate: %w", err)
	}
	var info *server.SecureServingInfo
	if err := opts.ApplyTo(&info); err != nil {
		return fmt.Errorf("listening on the secure port: %w", err)
	}
	authn, err := delegatedAuthentication(client, info)
	if err != nil {
		return err
	}
	authz, err := delegatedAuthorization(client)
	if err != nil {
		return err
	}
	m := mux.NewPathRecorderMux("kubedeploy")
	healthz.InstallHandler(m, live...)
	healthz.InstallLivezHandler(m, live...)
	healthz.InstallReadyzHandler(m, append(append([]healthz.HealthChecker{}, live...), ready...)...)
	m.Handle("/metrics", legacyregistry.Handler())
	if s.Profiling {
		routes.Profiling{}.Install(m)
	}
	handler := controllermanager.BuildHandlerChain(m, authz, authn)
	if _, _, err := info.Serve(handler, 5*time.Second, ctx.Done()); err != nil {
		return fmt.Errorf("serving health and metrics: %w", err)
	}
	return nil
}

// delegatedAuthentication is what DelegatingAuthenticationOptions.ApplyTo
// builds, from our client instead of a kubeconfig file: client certificates
// verified against the cluster's client CA (read from the
// extension-apiserver-authentication ConfigMap), bearer tokens checked with
// TokenReview, anything else anonymous (then refused by authorization except
// on the health paths).
func delegatedAuthentication(client kubernetes.Interface, info *server.SecureServingInfo) (*server.AuthenticationInfo, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", authConfigMapNamespace, authConfigMapName, "client-ca-file", client)
	if err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	authn := &server.AuthenticationInfo{}
	if err := authn.ApplyClientCert(ca, info); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	cfg := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: true},
		CacheTTL:                           10 * time.Second,
		TokenAccessReviewClient:            client.AuthenticationV1(),
		TokenAccessReviewTimeout:           10 * time.Second,
		WebhookRetryBackoff:                options.DefaultAuthWebhookRetryBackoff(),
		ClientCertificateCAContentProvider: ca,
	}
	authn.Authenticator, _, err = cfg.New()
	if err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	return authn, nil
}

// delegatedAuthorization is what DelegatingAuthorizationOptions.ApplyTo
// builds: system:masters and the health paths are always allowed, anything
// else is asked of the API server with SubjectAccessReview (for /metrics:
// nonResourceURLs ["/metrics"], verb get).
func delegatedAuthorization(client kubernetes.Interface) (*server.AuthorizationInfo, error) {
	paths, err := path.NewAuthorizer(unauthenticatedPaths)
	if err != nil {
		return nil, err
	}
	sar, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             10 * time.Second,
		DenyCacheTTL:              10 * time.Second,
		WebhookRetryBackoff:       options.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	return &server.AuthorizationInfo{
		Authorizer: union.New(authorizerfactory.NewPrivilegedGroups("system:masters"), paths, sar),
	}, nil
}
