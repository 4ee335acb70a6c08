package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Stop timeouts per component.
const (
	apiserverStopTimeout = 60 * time.Second
	componentStopTimeout = 30 * time.Second
	etcdStopTimeout      = 30 * time.Second
)

// ControlPlane is an embedded Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and KWOK, all in this process and all on 127.0.0.1. Only one may run per process at a time.
type ControlPlane struct {
	cfg    Config
	layout layout

	mu       sync.Mutex
	prepared bool
	started  bool
	running  bool // Start succeeded: from then on the data dir's contents are kept
	ln       net.Listener
	sup      *supervisor
	pki      *pki
	port     int
	admin    *rest.Config
}

// New returns a ControlPlane for cfg after applying Default and Validate; it starts nothing and touches no file.
// It returns Validate's error for an invalid cfg.
func New(cfg Config) (*ControlPlane, error) {
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &ControlPlane{cfg: cfg, layout: layout{dataDir: cfg.DataDir}, sup: newSupervisor(context.Background())}, nil
}

// Prepare takes the first steps of Start, those that are cheap and may fail on the user's input, in an order that
// creates and changes nothing when one fails: it checks that no other kubedeploy holds the data dir, listens on
// the API port (kept for Start), then creates the data dir if missing, proves it writable, locks it and creates
// logs/. From then on until Start succeeds, what is added to the data dir counts as this run's (the caller's
// own logs included): a Start that fails, or Stop without Start, removes it before releasing the lock (see
// dataDirContents), so the data dir is left as it was found. Calling Prepare is optional, Start prepares itself;
// it may be called once, before Start. Errors, one line each: "data dir D is in use by another kubedeploy (pid
// N)", "kube-apiserver port 127.0.0.1:P is already in use", "data dir D is not writable: …"; after one, the
// ControlPlane is stopped.
func (cp *ControlPlane) Prepare() error {
	cp.mu.Lock()
	again := cp.prepared || cp.started
	cp.prepared = true
	cp.mu.Unlock()
	if again {
		return errors.New("control plane already prepared")
	}
	if err := cp.prepare(); err != nil {
		_ = cp.sup.stop()
		return err
	}
	return nil
}

// Start brings the control plane up in order: Prepare's steps unless Prepare was called (data-dir check, API
// port, data-dir lock), PKI, etcd, kube-apiserver (until /readyz is ok), kubeconfigs, kube-controller-manager,
// kube-scheduler, KWOK nodes and pod lifecycle. It returns once /readyz is ok and every fake node is Ready. If a
// step fails (or ctx ends first) it undoes everything it started, removes what this run added to the data dir,
// and returns a one-line error (busy port, unwritable or locked data dir, or the failing component). Components
// run until ctx is cancelled, Stop is called or one of them fails. Start may be called only once per
// ControlPlane.
func (cp *ControlPlane) Start(ctx context.Context) error {
	cp.mu.Lock()
	if cp.started {
		cp.mu.Unlock()
		return errors.New("control plane already started")
	}
	cp.started = true
	prepared := cp.prepared
	cp.prepared = true
	cp.mu.Unlock()
	select {
	case <-cp.sup.done:
		return errors.New("control plane already stopped")
	default:
	}
	cp.sup.setBase(ctx)

	logger := klog.FromContext(ctx)
	begin := time.Now()
	err := error(nil)
	if !prepared {
		err = cp.prepare()
	}
	if err == nil {
		err = cp.start(ctx)
	}
	if err != nil {
		if stopErr := cp.sup.stop(); stopErr != nil {
			logger.Error(stopErr, "Undoing a failed start")
		}
		if failErr := cp.sup.err(); failErr != nil && errors.Is(err, errControlPlaneFailed) {
			return failErr
		}
		return err
	}
	cp.mu.Lock()
	cp.running = true
	cp.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			_ = cp.Stop()
		case <-cp.sup.done:
		}
	}()
	logger.Info("Control plane ready", "server", cp.Server(), "kubeconfig", cp.KubeconfigPath(),
		"nodes", cp.cfg.Nodes, "duration", time.Since(begin).Round(time.Millisecond))
	return nil
}

// start runs the steps of Start after Prepare's; the caller undoes them on error.
func (cp *ControlPlane) start(ctx context.Context) error {
	var err error
	if cp.pki, err = ensurePKI(cp.layout.pkiDir()); err != nil {
		return fmt.Errorf("pki in %s: %w", cp.layout.pkiDir(), err)
	}
	etcdCfg, err := cp.startEtcd(ctx)
	if err != nil {
		return err
	}
	if err := cp.writeKubeconfigs(); err != nil {
		return err
	}
	if err := cp.startAPIServer(ctx, etcdCfg, cp.ln); err != nil {
		return err
	}
	if err := waitForReadyz(ctx, cp.admin, cp.sup.failed); err != nil {
		return err
	}
	if err := cp.startControllerManager(); err != nil {
		return err
	}
	if err := cp.startScheduler(); err != nil {
		return err
	}
	return cp.startKWOK(ctx)
}

// prepare runs Prepare's steps; the caller undoes them on error (cp.sup.stop).
func (cp *ControlPlane) prepare() error {
	if err := checkNotInUse(cp.cfg.DataDir); err != nil {
		return err
	}
	if err := cp.listenAPI(); err != nil {
		return err
	}
	before, err := recordDataDir(cp.cfg.DataDir)
	if err != nil {
		return err
	}
	return cp.prepareDataDir(before)
}

// prepareDataDir creates the data dir if missing, checks it is writable, locks it and creates logs/. Once the
// lock is held, what the data dir holds beyond before is removed on a failed start, before the lock is released.
func (cp *ControlPlane) prepareDataDir(before dataDirContents) error {
	if err := ensureWritable(cp.cfg.DataDir); err != nil {
		return err
	}
	lock, err := lockDataDir(cp.cfg.DataDir)
	if err != nil {
		return err
	}
	cp.sup.push("data dir lock", lock.release)
	cp.sup.push("data dir contents of a failed start", func() error {
		cp.mu.Lock()
		running := cp.running
		cp.mu.Unlock()
		if running {
			return nil
		}
		return before.removeAdded()
	})
	if err := os.MkdirAll(cp.layout.logsDir(), 0o700); err != nil {
		return fmt.Errorf("data dir %s is not writable: %w", cp.cfg.DataDir, err)
	}
	return nil
}

// listenAPI takes the API port before anything is created, so a busy port fails fast and changes nothing. The
// listener is kube-apiserver's once it starts, which closes it; until then, undoing the start closes it.
func (cp *ControlPlane) listenAPI() error {
	ln, port, err := listenAPIPort(cp.cfg.APIPort)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.ln, cp.port = ln, port
	cp.mu.Unlock()
	cp.sup.push("api port", func() error {
		_ = ln.Close() // an error only says kube-apiserver closed it already
		return nil
	})
	return nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) (*embed.Config, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	logOut := RotatingLog(cp.layout.log("etcd.log"))
	cp.sup.push("etcd log", logOut.Close) // undone after etcd, which logs until it stops
	cfg := etcdConfig(cp.layout.etcdDir(), logOut, ports[0], ports[1])
	e, err := startEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, cp.layout.log("etcd.log"))
	}
	klog.FromContext(ctx).V(2).Info("Started etcd", "url", etcdClientURL(cfg), "dataDir", cfg.Dir)
	cp.sup.push("etcd", func() error { return closeEtcd(e) })
	go func() {
		select {
		case err, ok := <-e.Err():
			if ok && err != nil {
				cp.sup.fail(fmt.Errorf("etcd failed: %w", err))
			}
		case <-cp.sup.done:
		}
	}()
	return cfg, nil
}

// closeEtcd closes etcd, which flushes its data, waiting at most etcdStopTimeout.
func closeEtcd(e *embed.Etcd) error {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.Close()
	}()
	select {
	case <-closed:
		return nil
	case <-time.After(etcdStopTimeout):
		return fmt.Errorf("etcd did not stop within %s", etcdStopTimeout)
	}
}

func (cp *ControlPlane) startAPIServer(ctx context.Context, etcdCfg *embed.Config, ln net.Listener) error {
	gates, err := featureGates(cp.cfg.FeatureGates)
	if err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	args := apiserverArgs(apiserverParams{
		port:      cp.port,
		etcdURL:   etcdClientURL(etcdCfg),
		caFile:    cp.pki.caFile(),
		certFile:  cp.pki.certFile("apiserver"),
		keyFile:   cp.pki.keyFile("apiserver"),
		saKeyFile: cp.pki.saKeyFile(),
		saPubFile: cp.pki.saPubFile(),
		certDir:   cp.layout.pki("apiserver-generated"),

		featureGates:    gates,
		auditPolicyFile: cp.cfg.AuditPolicyFile,
		auditLogPath:    cp.cfg.AuditLogPath,
	})
	err = cp.sup.goRun("kube-apiserver", apiserverStopTimeout, func(ctx context.Context) (func(context.Context) error, error) {
		s, err := newAPIServer(ctx, args, ln)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		return s.run, nil
	})
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Started kube-apiserver", "server", cp.Server())
	return nil
}

// writeKubeconfigs writes the admin kubeconfig (certificates inlined) and one kubeconfig per component under pki/.
func (cp *ControlPlane) writeKubeconfigs() error {
	server := cp.Server()
	for _, name := range []string{"controller-manager", "scheduler", "kwok"} {
		cfg := kubeconfigFor(server, cp.pki.caPEM, cp.pki.certFile(name), cp.pki.keyFile(name))
		if err := writeKubeconfig(cp.componentKubeconfig(name), cfg); err != nil {
			return err
		}
	}
	admin, err := embedCertificates(kubeconfigFor(server, cp.pki.caPEM, cp.pki.certFile("admin"), cp.pki.keyFile("admin")))
	if err != nil {
		return err
	}
	if err := writeKubeconfig(cp.KubeconfigPath(), admin); err != nil {
		return err
	}
	rc, err := restConfigFor(admin)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.admin = rc
	cp.mu.Unlock()
	return nil
}

func (cp *ControlPlane) componentKubeconfig(name string) string {
	return cp.layout.pki(name + ".kubeconfig")
}

func (cp *ControlPlane) startControllerManager() error {
	args := controllerManagerArgs(controllerManagerParams{
		kubeconfig:       cp.componentKubeconfig("controller-manager"),
		caFile:           cp.pki.caFile(),
		caKeyFile:        cp.pki.keyFile("ca"),
		saKeyFile:        cp.pki.saKeyFile(),
		controllers:      cp.cfg.KubeControllers,
		upstreamWorkload: cp.cfg.UpstreamWorkloadControllers,
		qps:              cp.cfg.ControllerManagerQPS,
		burst:            cp.cfg.ControllerManagerBurst,
	})
	return cp.sup.goRun("kube-controller-manager", componentStopTimeout, func(ctx context.Context) (func(context.Context) error, error) {
		return newControllerManager(ctx, args, cp.cfg.UpstreamWorkloadControllers)
	})
}

func (cp *ControlPlane) startScheduler() error {
	args := schedulerArgs(cp.componentKubeconfig("scheduler"))
	return cp.sup.goRun("kube-scheduler", componentStopTimeout, func(ctx context.Context) (func(context.Context) error, error) {
		return newScheduler(ctx, args)
	})
}

func (cp *ControlPlane) startKWOK(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if err := ensureNodes(ctx, client, cp.cfg.Nodes, cp.cfg.Zones); err != nil {
		return err
	}
	st, err := stages(cp.cfg.PodStartupDelay, cp.cfg.PodTerminationDelay)
	if err != nil {
		return err
	}
	logFile := RotatingLog(cp.layout.log("kwok.log"))
	cp.sup.push("kwok log", logFile.Close)
	err = cp.sup.goRun("kwok", componentStopTimeout, func(context.Context) (func(context.Context) error, error) {
		return newKWOK(cp.componentKubeconfig("kwok"), logFile, st)
	})
	if err != nil {
		return err
	}
	return waitForNodesReady(ctx, client, cp.cfg.Nodes, cp.sup.failed)
}

// Stop stops every component in reverse start order (KWOK, scheduler, controller manager, API server, etcd),
// releases the data-dir lock and returns the aggregated errors (components that did not stop in time or failed
// while stopping). It is idempotent: later calls return the same result. Stop before Start returns nil; after
// Prepare but before Start it also removes what the run added to the data dir, as a failed Start does.
func (cp *ControlPlane) Stop() error {
	return cp.sup.stop()
}

// Done is closed when the control plane has stopped: after Stop, after the Start context is cancelled, or after a
// component failed. Err tells why.
func (cp *ControlPlane) Done() <-chan struct{} {
	return cp.sup.done
}

// Err returns the component failure that stopped the control plane, or nil if it stopped cleanly or still runs.
func (cp *ControlPlane) Err() error {
	return cp.sup.err()
}

// KubeconfigPath returns <data-dir>/kubeconfig, the admin kubeconfig written by Start (mode 0600).
func (cp *ControlPlane) KubeconfigPath() string {
	return cp.layout.adminKubeconfig()
}

// AdminConfig returns a copy of the admin client configuration (client certificate in group system:masters), or
// nil before Start has written the kubeconfig.
func (cp *ControlPlane) AdminConfig() *rest.Config {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.admin == nil {
		return nil
	}
	return rest.CopyConfig(cp.admin)
}

// ClientConfig returns a client configuration for the API server authenticating with a fresh client certificate,
// signed by the cluster CA, for user (certificate CN) in groups (certificate O). It is meant for kubedeploy's own
// controllers' dedicated identities. It returns an error before Start has loaded the PKI or if user is empty.
func (cp *ControlPlane) ClientConfig(user string, groups ...string) (*rest.Config, error) {
	if user == "" {
		return nil, errors.New("client certificate user must not be empty")
	}
	cp.mu.Lock()
	p, server := cp.pki, cp.server()
	cp.mu.Unlock()
	if p == nil {
		return nil, errors.New("control plane not started")
	}
	certPEM, keyPEM, err := p.clientCertPEM(user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   append([]byte(nil), p.caPEM...),
			CertData: certPEM,
			KeyData:  keyPEM,
		},
	}, nil
}

// Server returns the API server URL, https://127.0.0.1:<port>; the port is known once Start has begun.
func (cp *ControlPlane) Server() string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.server()
}

func (cp *ControlPlane) server() string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cp.port))
}

// Nodes returns the number of simulated nodes the control plane runs (Config.Nodes after Default).
func (cp *ControlPlane) Nodes() int {
	return cp.cfg.Nodes
}

// Zones returns the number of zones the simulated nodes are spread over (Config.Zones; 1 when it is 0 or 1).
func (cp *ControlPlane) Zones() int {
	return max(cp.cfg.Zones, 1)
}

// KubeControllers returns a copy of the kube-controller-manager controllers the control plane runs, by canonical
// name (Config.KubeControllers after Default), without the differential tests' upstream workload controllers.
func (cp *ControlPlane) KubeControllers() []string {
	return slices.Clone(cp.cfg.KubeControllers)
}
