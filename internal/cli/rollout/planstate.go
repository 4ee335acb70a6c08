package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/controlplane/apidefaults"
	"github.com/kubedeploy/kubedeploy/internal/simulator"
)

// localState is --local: the first Deployment in the manifests is the
// current one, the last the new one, both with the API server's defaults
// (apidefaults); ReplicaSets it controls (by name: the manifests may carry
// no UID) are its current ReplicaSets, else one fully rolled-out
// ReplicaSet (simulator.SteadyReplicaSet).
func localState(ctx context.Context, m manifests, name, namespace string) (simulator.State, error) {
	ds, err := m.pick(name)
	if err != nil {
		return simulator.State{}, err
	}
	if len(ds) == 0 {
		if name == "" {
			return simulator.State{}, fmt.Errorf("--local: %w", errNoTarget)
		}
		return simulator.State{}, fmt.Errorf("--local: no Deployment %q in the -f manifests", name)
	}
	cur, err := typed[appsv1.Deployment](ds[0])
	if err != nil {
		return simulator.State{}, err
	}
	next, err := typed[appsv1.Deployment](ds[len(ds)-1])
	if err != nil {
		return simulator.State{}, err
	}
	for _, d := range []*appsv1.Deployment{cur, next} {
		apidefaults.Deployment(d)
		switch {
		case namespace != "":
			d.Namespace = namespace
		case d.Namespace == "":
			d.Namespace = metav1.NamespaceDefault
		}
		if d.UID == "" {
			d.UID = types.UID("local-" + d.Name)
		}
	}
	next.UID, next.Status, next.Generation = cur.UID, cur.Status, cur.Generation
	rss, err := localReplicaSets(m, cur)
	if err != nil {
		return simulator.State{}, err
	}
	if len(rss) == 0 {
		rs, err := simulator.SteadyReplicaSet(ctx, cur)
		if err != nil {
			return simulator.State{}, err
		}
		rss = []*appsv1.ReplicaSet{rs}
	}
	return simulator.State{Deployment: next, ReplicaSets: rss}, nil
}

// localReplicaSets returns the ReplicaSet manifests whose ControllerRef
// names the Deployment cur, owned by cur's UID, with the API server's
// defaults.
func localReplicaSets(m manifests, cur *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	var rss []*appsv1.ReplicaSet
	for _, mf := range m.replicaSets {
		rs, err := typed[appsv1.ReplicaSet](mf)
		if err != nil {
			return nil, err
		}
		ref := metav1.GetControllerOf(rs)
		if ref == nil || ref.Kind != "Deployment" || ref.Name != cur.Name {
			continue
		}
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cur, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		apidefaults.ReplicaSet(rs)
		rss = append(rss, rs)
	}
	return rss, nil
}

// clusterState reads the live Deployment (named by the argument or the -f
// manifest) and the ReplicaSets it controls; the new version is the live
// one, or the -f manifest as the API server would store it (a server-side
// apply dry run: defaulted and validated, nothing written).
func clusterState(ctx context.Context, c *clusterFlags, m manifests, name string, errOut io.Writer) (simulator.State, error) {
	ds, err := m.pick(name)
	if err != nil {
		return simulator.State{}, err
	}
	if name == "" {
		if len(ds) == 0 {
			return simulator.State{}, errNoTarget
		}
		name = ds[0].obj.GetName()
	}
	client, ns, err := c.client()
	if err != nil {
		return simulator.State{}, err
	}
	if len(ds) > 0 && ds[len(ds)-1].obj.GetNamespace() != "" && c.namespace() == "" {
		ns = ds[len(ds)-1].obj.GetNamespace()
	}
	cur, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return simulator.State{}, fmt.Errorf("deployment %s/%s not found: it has no rollout to plan (creating it scales one ReplicaSet up)", ns, name)
	}
	if err != nil {
		return simulator.State{}, err
	}
	list, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return simulator.State{}, err
	}
	rss := rolloutstate.ControlledReplicaSets(list, cur.UID)
	pods, err := selectedPods(ctx, client, ns, cur)
	if err != nil {
		return simulator.State{}, err
	}
	next := cur.DeepCopy()
	if len(ds) > 0 {
		if next, err = dryRunApply(ctx, client, ns, ds[len(ds)-1]); err != nil {
			return simulator.State{}, err
		}
		next.Status = cur.Status
	}
	stored, err := storedObjects(ctx, c, ns, name, len(ds) == 0)
	if err != nil {
		return simulator.State{}, err
	}
	// The pods' ages count to this machine's clock (raised to the latest
	// time the pods show, should it be behind the cluster's).
	return simulator.State{Deployment: next, ReplicaSets: rss, Pods: pods, Nodes: spreadNodes(ctx, client, next, errOut), Now: time.Now(), Stored: stored}, nil
}

// spreadNodes returns the cluster's nodes when d is annotated kubedeploy.io/scale-down-spread (EX-4), so
// that the plan places pods across its topology domains and shows the spread; nil otherwise, or when the
// nodes cannot be listed (said on errOut: the plan goes on without the spread).
func spreadNodes(ctx context.Context, client kubernetes.Interface, d *appsv1.Deployment, errOut io.Writer) []*v1.Node {
	if d.Annotations[rolloutstate.ScaleDownSpreadAnnotation] == "" {
		return nil
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(errOut, "Not planning the spread across %s: listing nodes: %v\n", d.Annotations[rolloutstate.ScaleDownSpreadAnnotation], err)
		return nil
	}
	return rolloutstate.Items(list.Items)
}

// selectedPods lists the pods of d's selector in ns; the simulator keeps
// those the ReplicaSets control, so that the plan deletes the pods RS-14
// would, by their nodes, ages and readiness.
func selectedPods(ctx context.Context, client kubernetes.Interface, ns string, d *appsv1.Deployment) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s: %w", ns, d.Name, err)
	}
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return rolloutstate.Items(list.Items), nil
}

// dryRunApply returns the manifest mf as the API server would store it in
// ns after a server-side apply (forced, as field manager kubedeploy-plan),
// in a dry run. The manifest goes as written, fields this build does not
// know included, less its namespace, resourceVersion, uid and status.
func dryRunApply(ctx context.Context, client kubernetes.Interface, ns string, mf manifest) (*appsv1.Deployment, error) {
	u := mf.obj.DeepCopy()
	u.SetNamespace(ns)
	u.SetResourceVersion("")
	u.SetUID("")
	delete(u.Object, "status")
	body, err := json.Marshal(u)
	if err != nil {
		return nil, err
	}
	applied, err := client.AppsV1().Deployments(ns).Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: "kubedeploy-plan", Force: ptr.To(true),
	})
	if err != nil {
		return nil, fmt.Errorf("the API server refused the new manifest (dry run): %w", err)
	}
	return applied, nil
}

// setImages applies CONTAINER=IMAGE settings to d's template, as kubectl
// set image: containers and init containers by name, * for all of them.
func setImages(d *appsv1.Deployment, settings []string) error {
	spec := &d.Spec.Template.Spec
	for _, s := range settings {
		container, image, ok := strings.Cut(s, "=")
		if !ok || container == "" || image == "" {
			return fmt.Errorf("--image %q: use CONTAINER=IMAGE", s)
		}
		found := false
		for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
			for i := range list {
				if container == "*" || list[i].Name == container {
					list[i].Image, found = image, true
				}
			}
		}
		if !found {
			var names []string
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				names = append(names, c.Name)
			}
			return fmt.Errorf("--image %q: Deployment %s has no container %q (it has %s)", s, d.Name, container, strings.Join(names, ", "))
		}
	}
	return nil
}
