package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

const (
	// serviceClusterIPRange is the range of ClusterIPs handed to Services.
	serviceClusterIPRange = "10.0.0.0/24"
	// serviceClusterIP is the ClusterIP of the "kubernetes" Service (first address of the range).
	serviceClusterIP = "10.0.0.1"
	// serviceAccountIssuer is the issuer of service account tokens.
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	// readyzTimeout bounds how long Start waits for kube-apiserver's /readyz.
	readyzTimeout = 2 * time.Minute
)

// apiserverParams is everything apiserverArgs needs; all paths are absolute.
type apiserverParams struct {
	port      int
	etcdURL   string
	caFile    string
	certFile  string
	keyFile   string
	saKeyFile string
	saPubFile string
	certDir   string
	// featureGates is the value of --feature-gates (featureGates' result: DefaultFeatureGates and Config's).
	featureGates string
	// auditPolicyFile and auditLogPath, when set, are passed as --audit-policy-file and --audit-log-path.
	auditPolicyFile string
	auditLogPath    string
}

// apiserverArgs returns kube-apiserver's command-line flags: 127.0.0.1 only, TLS with our CA, client-certificate
// authentication, no anonymous access, Node+RBAC authorization, the default admission chain, service-account
// tokens signed by our key, our embedded etcd, p's feature gates and, when p names them, the audit policy and log.
// It is pure.
func apiserverArgs(p apiserverParams) []string {
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.port),
		"--cert-dir=" + p.certDir,
		"--tls-cert-file=" + p.certFile,
		"--tls-private-key-file=" + p.keyFile,
		"--client-ca-file=" + p.caFile,
		"--anonymous-auth=false",
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--etcd-servers=" + p.etcdURL,
		// The "kubernetes" Service would point at 127.0.0.1, which Endpoints validation rejects; nothing in the
		// embedded cluster needs in-cluster access to the API server.
		"--endpoint-reconciler-type=none",
		// TaintNodesByCondition taints new nodes not-ready until node-lifecycle-controller lifts the taint; that
		// controller does not run here (KWOK's nodes are Ready from the start), so the taint would stay forever.
		"--disable-admission-plugins=TaintNodesByCondition",
		"--profiling=false",
	}
	if p.featureGates != "" {
		args = append(args, "--feature-gates="+p.featureGates)
	}
	if p.auditPolicyFile != "" {
		args = append(args, "--audit-policy-file="+p.auditPolicyFile, "--audit-log-path="+p.auditLogPath)
	}
	return args
}

// apiserver is a configured kube-apiserver ready to run on a listener we already hold.
type apiserver struct {
	run func(ctx context.Context) error
}

// newAPIServer parses args into kube-apiserver's options, completes and validates them and builds the server
// chain (aggregator → kube-apiserver → apiextensions), serving the Kubernetes release it embeds at /version
// (unless the build information does not name it). ln must be the listener for the port in args; on error the
// caller still owns it.
func newAPIServer(ctx context.Context, args []string, ln net.Listener) (*apiserver, error) {
	s, err := apiserverOptions(args)
	if err != nil {
		return nil, err
	}
	s.SecureServing.Listener = ln
	s.SecureServing.BindPort = ln.Addr().(*net.TCPAddr).Port
	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	if release, ok := kubernetesRelease(); ok {
		serveRelease(config, release)
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver server chain: %w", err)
	}
	prepared, err := server.PrepareRun()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver prepare: %w", err)
	}
	return &apiserver{run: prepared.Run}, nil
}

// apiserverOptions resets the process's feature gates (resetFeatureGates), parses args into kube-apiserver's
// options and applies their --feature-gates to the process-global gates, which kube-apiserver reads on every
// request (utilfeature.DefaultFeatureGate) and the control plane's kube-controller-manager and kube-scheduler then
// share. It returns an error for a flag or feature gate kube-apiserver refuses.
func apiserverOptions(args []string) (*options.ServerRunOptions, error) {
	if err := resetFeatureGates(); err != nil {
		return nil, fmt.Errorf("resetting feature gates: %w", err)
	}
	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, fmt.Errorf("kube-apiserver feature gates: %w", err)
	}
	return s, nil
}

// waitForReadyz polls /readyz with client until it answers "ok", failed reports a component failure, or timeout.
func waitForReadyz(ctx context.Context, cfg *rest.Config, failed <-chan struct{}) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube-apiserver client: %w", err)
	}
	logger := klog.FromContext(ctx)
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyzTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-failed:
			return false, errControlPlaneFailed
		default:
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err
			logger.V(4).Info("Waiting for kube-apiserver /readyz", "err", err)
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil {
		if last != nil && (errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err)) {
			return fmt.Errorf("kube-apiserver did not become ready within %s: %w", readyzTimeout, last)
		}
		return fmt.Errorf("kube-apiserver did not become ready: %w", err)
	}
	return nil
}
