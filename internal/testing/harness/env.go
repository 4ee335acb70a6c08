package harness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubedeploy/kubedeploy/internal/controlplane"
	"github.com/kubedeploy/kubedeploy/internal/manager"
)

// Options configure the shared environment of one test package.
type Options struct {
	// Nodes is the number of simulated nodes (default 3).
	Nodes int
	// PodStartupDelay and PodTerminationDelay drive the KWOK pod lifecycle (default 200ms each).
	PodStartupDelay, PodTerminationDelay time.Duration
	// Controllers to run (default: deployment and replicaset; an empty,
	// non-nil slice runs none, for tests that run their own with
	// RunControllers).
	Controllers []string
	// KubeControllers are the kube-controller-manager controllers of the cluster (controlplane.Config's; nil is
	// up's default set, controlplane.DefaultKubeControllers).
	KubeControllers []string
	// Manager is the template of the controllers' manager.Config; Start
	// fills RESTConfig, Controllers and Version.
	Manager manager.Config
	// ControlPlane, if set, adjusts the control plane's configuration before it starts (a test that needs a
	// cluster unlike up's, e.g. one whose rollouts kube-controller-manager runs, for observe mode).
	ControlPlane func(*controlplane.Config)
}

// UpOptions are the Options that time the cluster as `kubedeploy up` does
// by default: DefaultNodes simulated nodes, pods Ready 1 s after they are
// scheduled and gone 1 s after deletion (controlplane's defaults), and the
// controllers' client at the loopback rate limit (up's --kube-api-qps and
// --kube-api-burst). For tests whose claim is about `up` itself, such as
// the exact rollout plan (issue 11).
func UpOptions() Options {
	return Options{
		Nodes:               controlplane.DefaultNodes,
		PodStartupDelay:     controlplane.DefaultPodStartupDelay,
		PodTerminationDelay: controlplane.DefaultPodTerminationDelay,
		Manager:             manager.Config{QPS: controlplane.LoopbackQPS, Burst: controlplane.LoopbackBurst},
	}
}

// Env is a running control plane plus the kubedeploy controllers.
type Env struct {
	// ControlPlane is the embedded cluster.
	ControlPlane *controlplane.ControlPlane
	// Config is an admin REST config; Client an admin clientset built from it.
	Config *rest.Config
	Client kubernetes.Interface

	dataDir string
	cancel  context.CancelFunc
	done    chan error
	nsSeq   atomic.Int64
}

// Main starts the environment, stores it in *env, runs the package's tests and
// tears everything down; TestMain returns its result to os.Exit. With -short
// the environment is not started and every test using it is skipped.
func Main(m *testing.M, opts Options, env **Env) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the integration environment: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(code == 0); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the integration environment: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control plane and controller logs kept in %s\n", filepath.Join(e.dataDir, "logs"))
	}
	return code
}

// redirectLogs sends the global klog output (every embedded component and the
// controllers) to <dir>/logs/test.log, so test output shows only the tests.
func redirectLogs(dir string) error {
	_, err := controlplane.RedirectComponentLogs(filepath.Join(dir, "logs", "test.log"), 2)
	return err
}

// Start starts a control plane in a fresh temporary data dir on a free port
// and runs the controllers on it. It returns once the control plane is ready.
func Start(opts Options) (*Env, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.PodStartupDelay == 0 {
		opts.PodStartupDelay = 200 * time.Millisecond
	}
	if opts.PodTerminationDelay == 0 {
		opts.PodTerminationDelay = 200 * time.Millisecond
	}
	if opts.Controllers == nil {
		opts.Controllers = manager.KnownControllers
	}
	dir, err := os.MkdirTemp("", "kubedeploy-it-")
	if err != nil {
		return nil, err
	}
	if err := redirectLogs(dir); err != nil {
		return nil, err
	}
	cpCfg := controlplane.Config{
		DataDir: dir, APIPort: 0, Nodes: opts.Nodes,
		PodStartupDelay: opts.PodStartupDelay, PodTerminationDelay: opts.PodTerminationDelay,
		KubeControllers: opts.KubeControllers,
	}
	if opts.ControlPlane != nil {
		opts.ControlPlane(&cpCfg)
	}
	cp, err := controlplane.New(cpCfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := cp.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	cfg := cp.AdminConfig()
	testCfg := rest.CopyConfig(cfg)
	testCfg.QPS, testCfg.Burst = 200, 400 // tests poll a lot; don't throttle them
	client, err := kubernetes.NewForConfig(testCfg)
	if err != nil {
		cancel()
		return nil, err
	}
	e := &Env{ControlPlane: cp, Config: cfg, Client: client, dataDir: dir, cancel: cancel, done: make(chan error, 1)}
	mcfg := opts.Manager
	mcfg.RESTConfig, mcfg.Controllers, mcfg.Version = cfg, opts.Controllers, "test"
	mctx := klog.NewContext(ctx, klog.Background().WithName("kubedeploy"))
	go func() {
		e.done <- manager.Run(mctx, mcfg)
	}()
	return e, nil
}

// RunControllers runs kubedeploy's controllers with cfg until the returned
// stop is called; stop cancels them, waits for in-flight syncs and returns
// manager.Run's error. cfg.RESTConfig defaults to the admin config,
// cfg.Controllers (nil) to both controllers. Their logs go to the package's
// log file.
func (e *Env) RunControllers(cfg manager.Config) (stop func() error) {
	if cfg.RESTConfig == nil {
		cfg.RESTConfig = e.Config
	}
	if cfg.Controllers == nil {
		cfg.Controllers = manager.KnownControllers
	}
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctx = klog.NewContext(ctx, klog.Background().WithName("kubedeploy"))
	done := make(chan error, 1)
	go func() { done <- manager.Run(ctx, cfg) }()
	return func() error {
		cancel()
		return <-done
	}
}

// Stop stops the controllers and the control plane, and removes the data dir
// when removeData is true (keep it to read the logs of a failed run).
func (e *Env) Stop(removeData bool) error {
	e.cancel()
	err := <-e.done
	if stopErr := e.ControlPlane.Stop(); stopErr != nil && err == nil {
		err = stopErr
	}
	klog.Flush()
	if removeData {
		_ = os.RemoveAll(e.dataDir)
	}
	return err
}

// Skip skips t when the environment was not started (go test -short).
func Skip(t *testing.T, e *Env) {
	t.Helper()
	if e == nil {
		t.Skip("integration environment not started (-short)")
	}
}

// Namespace creates a namespace for t and deletes it when t ends.
func (e *Env) Namespace(t *testing.T) string {
	t.Helper()
	Skip(t, e)
	name := fmt.Sprintf("%s-%d", sanitize(t.Name()), e.nsSeq.Add(1))
	ctx := context.Background()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// Context returns a context with a ktesting logger that ends with t (or after timeout).
func Context(t *testing.T, timeout time.Duration) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 100ms until it returns true, an error, or timeout passes;
// it fails t with what on timeout.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = strings.Trim(out[len(out)-40:], "-")
	}
	return out
}

// syncTimeout bounds how long a watch helper waits for its informer's first
// list: a test whose API server died fails instead of hanging until the
// package's timeout.
const syncTimeout = time.Minute

// waitSynced waits up to syncTimeout for synced and reports whether it held.
func waitSynced(synced cache.InformerSynced) bool {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), synced)
}

// startInformer calls onChange on every add, update and delete that inf
// (of factory) delivers, starts factory until stop is closed and waits up to
// syncTimeout for inf to sync. If it does not, it closes stop and fails t,
// naming what. onChange may read inf's store from the first event on.
func startInformer(t *testing.T, factory informers.SharedInformerFactory, inf cache.SharedIndexInformer, stop chan struct{}, what string, onChange func()) {
	t.Helper()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onChange() },
		UpdateFunc: func(any, any) { onChange() },
		DeleteFunc: func(any) { onChange() },
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	factory.Start(stop)
	if !waitSynced(inf.HasSynced) {
		close(stop)
		t.Fatalf("%s did not sync within %v (is the API server up?)", what, syncTimeout)
	}
}
