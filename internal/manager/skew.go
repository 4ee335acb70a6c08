package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/buildinfo"
	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
	"github.com/kubedeploy/kubedeploy/internal/rolloutmetrics"
)

// Version skew (IM-8): kubedeploy is compiled against one Kubernetes API (buildinfo.KubernetesVersion) and may
// run against newer API servers, whose Deployments carry fields it does not know. The Deployment and ReplicaSet
// informers notice such fields and read those objects as JSON (rawtemplate) so that pod templates are copied as
// stored; Deployments with other unknown
// spec fields are listed by kubedeploy_deployment_unsupported_fields; the server's version is reported at start and
// on every reconnect, and a server older than the oldest this build supports is refused.

// oldestSupportedMinorSkew is how many minor versions older than the compiled API an API server may be: one, as
// Kubernetes' own skew policy allows kube-controller-manager to be one minor older than kube-apiserver, not newer.
// An older server lacks fields kubedeploy's k8s.io/api sends (apps/v1 status fields, pod fields).
const oldestSupportedMinorSkew = 1

var (
	// serverVersionSkew is the API server's minor version minus the compiled API's, labelled with the server's
	// version: one series, replaced when the server's version changes.
	serverVersionSkew = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name: "kubedeploy_api_server_version_skew",
		Help: "Minor versions by which the API server (label server_version) is newer than the Kubernetes API kubedeploy is compiled " +
			"against (label compiled_version); negative when it is older. Pod template fields kubedeploy does not know are carried through unchanged.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"server_version", "compiled_version"})

	unsupportedFieldsDesc = metrics.NewDesc("kubedeploy_deployment_unsupported_fields",
		"Deployments kubedeploy does not manage because their spec has a field outside the pod template that its compiled API does not know "+
			"(1 per namespace, deployment and field); event UnsupportedDeploymentField.",
		[]string{"namespace", "deployment", "field"}, nil, metrics.ALPHA, "")
)

// apiVersion is the Kubernetes version an API server serves: name for logs and the metric, major and minor.
type apiVersion struct {
	name         string
	major, minor int
}

// parseServerVersion reads info: the emulated version when the server emulates an older one (its API is that
// version's), else its major and minor fields (the binary version; some distributions suffix the minor with "+"),
// else its gitVersion ("v1.37.2", "v1.31.4-eks-1a2b3c"). The name is the gitVersion, or "v<major>.<minor>" for a
// build not stamped with one (an unstamped kube-apiserver, such as `kubedeploy up`'s, reports gitVersion
// "v0.0.0-master+$Format:%H$" and the right major and minor). The error says the version cannot be read.
func parseServerVersion(info *version.Info) (apiVersion, error) {
	v := apiVersion{name: info.GitVersion}
	parsed := false
	for _, mm := range [][2]string{{info.EmulationMajor, info.EmulationMinor}, {info.Major, info.Minor}} {
		major, err1 := strconv.Atoi(strings.TrimSuffix(mm[0], "+"))
		minor, err2 := strconv.Atoi(strings.TrimSuffix(mm[1], "+"))
		if err1 == nil && err2 == nil {
			v.major, v.minor, parsed = major, minor, true
			break
		}
	}
	if !parsed {
		g, err := utilversion.ParseGeneric(info.GitVersion)
		if err != nil || g.Major() == 0 {
			return v, fmt.Errorf("cannot read the API server's version (gitVersion %q, major %q, minor %q)", info.GitVersion, info.Major, info.Minor)
		}
		v.major, v.minor = int(g.Major()), int(g.Minor())
	}
	if v.name == "" || strings.HasPrefix(v.name, "v0.0.0") {
		v.name = fmt.Sprintf("v%d.%d", v.major, v.minor)
	}
	return v, nil
}

// skewAgainst returns v's minor minus minor, and an error when a kubedeploy compiled against Kubernetes
// major.minor may not use a server of version v: another major version, or more than oldestSupportedMinorSkew
// minors older.
func (v apiVersion) skewAgainst(major, minor int) (int, error) {
	if v.major != major {
		return 0, fmt.Errorf("API server is Kubernetes %s, major version %d; this kubedeploy is built against Kubernetes v%d.%d", v.name, v.major, major, minor)
	}
	skew := v.minor - minor
	if skew < -oldestSupportedMinorSkew {
		return skew, fmt.Errorf("API server is Kubernetes %s; this kubedeploy is built against Kubernetes v%d.%d and supports API servers v%d.%d and newer "+
			"(an older server lacks Deployment, ReplicaSet and pod fields kubedeploy sends): upgrade the cluster or use a kubedeploy built for it",
			v.name, major, minor, major, minor-oldestSupportedMinorSkew)
	}
	return skew, nil
}

// serverVersionOf returns a function that GETs /version through rc once (no retries), giving up after timeout.
// Every authenticated user may read it (ClusterRole system:public-info-viewer). Its errors are client-go's, or
// the decoding error of an odd body.
func serverVersionOf(rc rest.Interface, timeout time.Duration) func(context.Context) (*version.Info, error) {
	return func(ctx context.Context) (*version.Info, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		body, err := rc.Get().AbsPath("/version").MaxRetries(0).DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var info version.Info
		if err := json.Unmarshal(body, &info); err != nil {
			return nil, fmt.Errorf("decoding /version: %w", err)
		}
		return &info, nil
	}
}

// skewReporter reads the API server's version and reports it (log line, metric) once per version seen.
type skewReporter struct {
	// serverVersion returns the API server's /version (serverVersionOf).
	serverVersion func(context.Context) (*version.Info, error)

	mu       sync.Mutex
	reported string // gitVersion last reported
}

// check reads the server's version and, when it is one not reported before, logs it and sets
// kubedeploy_api_server_version_skew. It returns the refusal of skewAgainst (the server is too old), or else the
// error reading the version (unreachable, or a version that does not parse: kubedeploy cannot tell, so it runs).
func (r *skewReporter) check(ctx context.Context) (refused, readErr error) {
	info, err := r.serverVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's version: %w", err)
	}
	v, err := parseServerVersion(info)
	if err != nil {
		return nil, err
	}
	skew, refused := v.skewAgainst(buildinfo.APIMajor, buildinfo.APIMinor)
	r.mu.Lock()
	fresh := r.reported != v.name
	r.reported = v.name
	r.mu.Unlock()
	if !fresh {
		return refused, nil
	}
	logger := klog.FromContext(ctx)
	compiled := buildinfo.KubernetesVersion()
	serverVersionSkew.Reset()
	serverVersionSkew.WithLabelValues(v.name, compiled).Set(float64(skew))
	switch {
	case refused != nil:
		logger.Error(refused, "Unsupported API server version", "serverVersion", v.name, "compiledVersion", compiled)
	case skew > 0:
		logger.Info("API server is newer than the Kubernetes API kubedeploy is compiled against: pod template fields kubedeploy does not know "+
			"are carried through unchanged; a Deployment with another unknown spec field is not managed (event UnsupportedDeploymentField)",
			"serverVersion", v.name, "compiledVersion", compiled, "minorVersionsNewer", skew)
	default:
		logger.Info("API server version", "serverVersion", v.name, "compiledVersion", compiled)
	}
	return refused, nil
}

// unsupportedFieldsCollector collects kubedeploy_deployment_unsupported_fields at scrape time from the stores the
// running Deployment controllers' informers fill (one per controller set; in sharded mode a process runs several,
// over disjoint namespaces); with none it reports nothing.
type unsupportedFieldsCollector struct {
	metrics.BaseStableCollector
	stores rolloutmetrics.Attached[rawtemplate.Store]
}

// unsupportedFields is the process's collector, registered by registerMetrics.
var unsupportedFields = &unsupportedFieldsCollector{}

// use makes the collector read store, beside the stores it reads already, until stop is called; stop removes
// store only and is harmless to call again.
func (c *unsupportedFieldsCollector) use(store *rawtemplate.Store) (stop func()) {
	return c.stores.Add(store)
}

// DescribeWithStability sends the one descriptor.
func (c *unsupportedFieldsCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- unsupportedFieldsDesc
}

// CollectWithStability sends 1 per Deployment and unknown field of the stores in use, each series once (two
// stores that both have a Deployment's field send one series, rolloutmetrics.Attached).
func (c *unsupportedFieldsCollector) CollectWithStability(ch chan<- metrics.Metric) {
	type series struct{ namespace, deployment, field string }
	sent := map[series]bool{}
	for _, store := range c.stores.All() {
		for _, u := range store.Unsupported() {
			for _, f := range u.Fields {
				if s := (series{u.Namespace, u.Name, f}); !sent[s] {
					sent[s] = true
					ch <- metrics.NewLazyConstMetric(unsupportedFieldsDesc, metrics.GaugeValue, 1, u.Namespace, u.Name, f)
				}
			}
		}
	}
}
