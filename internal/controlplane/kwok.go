package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwokclient "sigs.k8s.io/kwok/pkg/utils/client"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

const (
	// NodeNamePrefix prefixes the fake nodes' names: kwok-node-0, kwok-node-1, …
	NodeNamePrefix = "kwok-node-"
	// NodeAnnotation marks a node as fake and managed by the embedded KWOK.
	NodeAnnotation = "kwok.x-k8s.io/node"
	// NodeLabelType is the label key ("type") and NodeLabelValue its value ("kwok") set on every fake node.
	NodeLabelType  = "type"
	NodeLabelValue = "kwok"
	// podCIDR is the range KWOK assigns pod IPs from; nodeIP is every fake node's InternalIP.
	podCIDR = "10.244.0.0/16"
	nodeIP  = "10.1.0.1"
	// nodeLeaseDurationSeconds is the fake nodes' lease duration (seconds); KWOK renews it.
	nodeLeaseDurationSeconds = 40
	// podIPWatchTimeout bounds how long KWOK's start waits for the pod IP watch's first list (podIPs.watch).
	podIPWatchTimeout = time.Minute
	// nodesReadyTimeout bounds how long Start waits for every fake node to be Ready.
	nodesReadyTimeout = time.Minute
)

// Zone labels (issue 26): the well-known topology labels a cloud provider sets on its nodes.
const (
	// ZoneLabel and RegionLabel are corev1.LabelTopologyZone and corev1.LabelTopologyRegion.
	ZoneLabel   = corev1.LabelTopologyZone
	RegionLabel = corev1.LabelTopologyRegion
	// RegionName is the region every zoned fake node is in.
	RegionName = "region-1"
	// MaxZones is the most zones Config.Zones may ask for: zone-a … zone-z.
	MaxZones = 26
)

// ZoneName returns the name of zone i (0-based): zone-a, zone-b, …
func ZoneName(i int) string { return "zone-" + string(rune('a'+i)) }

// zoneLabels returns the topology labels of fake node i among zones zones: none for zones <= 1.
func zoneLabels(i, zones int) map[string]string {
	if zones <= 1 {
		return nil
	}
	return map[string]string{ZoneLabel: ZoneName(i % zones), RegionLabel: RegionName}
}

// nodeName returns the name of fake node i.
func nodeName(i int) string { return NodeNamePrefix + strconv.Itoa(i) }

// fakeNode builds fake node i of a cluster of zones zones: labelled type=kwok and with zoneLabels, annotated
// kwok.x-k8s.io/node=fake, with capacity for NodePodCapacity pods, 1000 CPUs and 1000Gi of memory. It is pure.
func fakeNode(i, zones int) *corev1.Node {
	name := nodeName(i)
	resources := corev1.ResourceList{
		corev1.ResourcePods:   *resource.NewQuantity(NodePodCapacity, resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1000Gi"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				NodeLabelType:            NodeLabelValue,
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
			Annotations: map[string]string{NodeAnnotation: "fake"},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
			Phase:       corev1.NodeRunning,
		},
	}
	maps.Copy(node.Labels, zoneLabels(i, zones))
	return node
}

// ensureNodes creates fake nodes 0…n-1 that do not exist yet, gives those that do the zone labels of zones
// zones (an earlier run may have had other zones), and deletes fake nodes left over from an earlier run with
// more nodes.
func ensureNodes(ctx context.Context, client kubernetes.Interface, n, zones int) error {
	for i := range n {
		_, err := client.CoreV1().Nodes().Create(ctx, fakeNode(i, zones), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = relabelZone(ctx, client, nodeName(i), zoneLabels(i, zones))
		}
		if err != nil {
			return fmt.Errorf("create node %s: %w", nodeName(i), err)
		}
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabelType + "=" + NodeLabelValue})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	want := map[string]bool{}
	for i := range n {
		want[nodeName(i)] = true
	}
	for _, node := range list.Items {
		if node.Annotations[NodeAnnotation] != "fake" || want[node.Name] {
			continue
		}
		err := client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete surplus node %s: %w", node.Name, err)
		}
	}
	return nil
}

// relabelZone sets node name's zone and region labels to want's (removing them when want has none), with a
// merge patch, unless they already are.
func relabelZone(ctx context.Context, client kubernetes.Interface, name string, want map[string]string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	labels := map[string]any{}
	for _, k := range []string{ZoneLabel, RegionLabel} {
		v, wanted := want[k]
		cur, has := node.Labels[k]
		switch {
		case wanted && (!has || cur != v):
			labels[k] = v
		case !wanted && has:
			labels[k] = nil // a merge patch's null removes the label
		}
	}
	if len(labels) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// kwokIdentity is the holder identity of KWOK's node leases. It is the same
// in every process: the data-dir lock guarantees one KWOK per cluster, and a
// per-process identity (KWOK's default) would leave a restarted `up` unable
// to touch its nodes' pods until the previous process's 40s leases expired.
const kwokIdentity = "kubedeploy-kwok"

// kwokConfig builds KWOK's controller configuration for our fake nodes and stages. It is pure apart from the
// clients it is given.
func kwokConfig(id string, stages map[internalversion.StageResourceRef][]*internalversion.Stage) controllers.Config {
	return controllers.Config{
		Clock:                             clock.RealClock{},
		ManageNodesWithAnnotationSelector: NodeAnnotation + "=fake",
		CIDR:                              podCIDR,
		NodeIP:                            nodeIP,
		LocalStages:                       stages,
		PodPlayStageParallelism:           4,
		NodePlayStageParallelism:          4,
		NodeLeaseParallelism:              4,
		NodeLeaseDurationSeconds:          nodeLeaseDurationSeconds,
		PodsOnNodeSyncParallelism:         1,
		EnablePodsOnNodeSyncListPager:     true,
		ID:                                id,
	}
}

// newKWOK builds the KWOK controller talking to the API server through kubeconfig, logging to logOut, with
// podIPs in place of KWOK's pod IP pool. The returned function starts it (once the pod IP watch has listed
// every pod) and blocks until ctx is cancelled.
func newKWOK(kubeconfig string, logOut io.Writer, stages map[internalversion.StageResourceRef][]*internalversion.Stage) (func(context.Context) error, error) {
	conf := kwokConfig(kwokIdentity, stages)
	if err := kwokClients(&conf, kubeconfig); err != nil {
		return nil, err
	}
	ips, err := newPodIPs(podCIDR)
	if err != nil {
		return nil, err
	}
	conf.FuncMap = gotpl.FuncMap{"PodIPWith": ips.podIPWith}
	ctr, err := controllers.NewController(conf)
	if err != nil {
		return nil, fmt.Errorf("kwok controller: %w", err)
	}
	logger := kwoklog.NewLogger(logOut, kwoklog.LevelInfo)
	return func(ctx context.Context) error {
		ctx = kwoklog.NewContext(ctx, logger)
		if err := warmStages(ctx, stages); err != nil {
			return err
		}
		if err := ips.watch(ctx, conf.TypedClient, podIPWatchTimeout); err != nil {
			if ctx.Err() != nil {
				return nil // stopped before the first list
			}
			return err
		}
		if err := ctr.Start(ctx); err != nil {
			return fmt.Errorf("start kwok controller: %w", err)
		}
		<-ctx.Done()
		return nil
	}, nil
}

// warmStages matches an empty Pod and an empty Node against fresh copies of
// their stages, one after the other, before KWOK's controllers start. A
// stage builds its CEL environment on its first match, and that fills
// process-wide type caches in github.com/wzshiming/easycel (v0.6.0) that are
// plain maps without a lock; KWOK's node and pod controllers then match
// their first objects at the same moment, which once crashed a restarted
// `kubedeploy up` with "fatal error: concurrent map writes" (nodes and pods
// already present, both controllers busy at once). Once the caches hold the
// Pod and Node types, later environments only read them. It returns a
// stage's match error.
func warmStages(ctx context.Context, stages map[internalversion.StageResourceRef][]*internalversion.Stage) error {
	samples := map[internalversion.StageResourceRef]any{podStageRef: &corev1.Pod{}, nodeStageRef: &corev1.Node{}}
	for _, ref := range []internalversion.StageResourceRef{nodeStageRef, podStageRef} {
		lc, err := lifecycle.NewLifecycle(stages[ref])
		if err != nil {
			return fmt.Errorf("kwok %s stages: %w", ref.Kind, err)
		}
		if _, err := lc.ListAllPossible(ctx, &lifecycle.Event{Data: samples[ref]}); err != nil {
			return fmt.Errorf("kwok %s stages: %w", ref.Kind, err)
		}
	}
	return nil
}

// kwokClients fills conf's clients the way the kwok command does, from kubeconfig.
func kwokClients(conf *controllers.Config, kubeconfig string) error {
	cs, err := kwokclient.NewClientset("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	restConfig, err := cs.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	if conf.DynamicClient, err = cs.ToDynamicClient(); err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	if conf.RESTMapper, err = cs.ToRESTMapper(); err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	conf.ImpersonatingDynamicClient = cs.ToImpersonatingDynamicClient()
	conf.ImpersonatingTypedClient = cs.ToImpersonatingTypedClient()
	// restConfig is KWOK's unstructured-serializer config; RESTClientFor needs exactly that.
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	conf.RESTClient = restClient
	if conf.TypedClient, err = kubernetes.NewForConfig(restConfig); err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	if conf.TypedKwokClient, err = versioned.NewForConfig(restConfig); err != nil {
		return fmt.Errorf("kwok clients: %w", err)
	}
	return nil
}

// waitForNodesReady polls until fake nodes 0…n-1 all have condition Ready=True.
func waitForNodesReady(ctx context.Context, client kubernetes.Interface, n int, failed <-chan struct{}) error {
	logger := klog.FromContext(ctx)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, nodesReadyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-failed:
			return false, errControlPlaneFailed
		default:
		}
		for i := range n {
			node, err := client.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
			if err != nil {
				logger.V(4).Info("Waiting for node", "node", klog.KRef("", nodeName(i)), "err", err)
				return false, nil
			}
			if !nodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes not Ready within %s: %w", nodesReadyTimeout, err)
	}
	return nil
}

// nodeReady reports whether node has condition Ready=True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
