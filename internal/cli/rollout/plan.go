package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
	"github.com/kubedeploy/kubedeploy/internal/simulator"
)

// planOptions are `rollout plan`'s flags.
type planOptions struct {
	images         []string
	files          []string
	local          bool
	podStartup     float64
	podTermination float64
	output         string
}

func newPlanCommand(c *clusterFlags) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan [deploy/NAME] [--image CONTAINER=IMAGE] [-f NEW.yaml] [--local]",
		Short: "Show, step by step, the rollout a change to a Deployment would start",
		Long: `Computes the rollout a change would start by running kubedeploy's Deployment and
ReplicaSet controllers' own code on a simulated copy of the Deployment, its ReplicaSets
and their pods: new pods become Ready --pod-startup seconds after they are created and
available minReadySeconds later; existing pods keep their nodes, ages, readiness and
deletion costs, so each step in -o json names the pods the ReplicaSet controller
deletes (deletedPods). It never writes to the cluster.

The change is --image CONTAINER=IMAGE (as kubectl set image; * for every container)
and/or -f with the Deployment's new manifest, which the API server defaults and
validates in a dry run. Without a change it plans the rest of the current rollout.

With --local no cluster is read: -f gives the current Deployment (and, if present,
its ReplicaSets with their status, as "kubectl get deploy,rs -o yaml" prints them);
a second -f with the same Deployment is the new version. Without ReplicaSets the
Deployment is taken as fully rolled out.

Each step is one write of ReplicaSet sizes by the controller; TOTAL is the sum of
the sizes (pods allowed, not counting terminating ones) and AVAILABLE the available
pods right after the step's scale-down. The simulation makes the pods of one step
available at the same instant. In a cluster they turn Ready some milliseconds apart,
and kubedeploy's ReplicaSet controller reports those that turn Ready within 250 ms of
the first together, so on a quiet "kubedeploy up" the controllers take exactly the
planned steps. Where the pods of one step turn Ready further apart (a busy scheduler
or node, slow image pulls), the controller splits a step into smaller ones within
the same bounds.
With --local, ReplicaSet names come from the manifests as written (an API
server's defaults change the pod-template-hash).`,
		Example: `  kubedeploy rollout plan deploy/nginx-deployment --image nginx-deployment=nginx:1.9.3
  kubedeploy rollout plan -f examples/nginx-deployment.yaml -o json
  kubedeploy rollout plan --local -f v1.yaml -f v2.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), c, args, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.images, "image", nil, "CONTAINER=IMAGE to set (repeatable; * for every container)")
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest with the Deployment's new version (repeatable; with --local, the current version first)")
	f.BoolVar(&o.local, "local", false, "read nothing from the cluster: plan from -f manifests alone")
	f.Float64Var(&o.podStartup, "pod-startup", 1, "seconds from a pod's creation to it being Ready")
	f.Float64Var(&o.podTermination, "pod-termination", 0, "seconds a deleted pod stays Terminating (Recreate waits for it)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

// run builds the current state and the change, simulates and prints.
func (o *planOptions) run(ctx context.Context, c *clusterFlags, args []string, out io.Writer) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: use table or json", o.output)
	}
	if o.podStartup <= 0 || o.podTermination < 0 {
		return errors.New("--pod-startup must be > 0 and --pod-termination >= 0 seconds")
	}
	name := ""
	if len(args) == 1 {
		n, err := deploymentName(args[0])
		if err != nil {
			return err
		}
		name = n
	}
	manifests, err := readManifests(o.files)
	if err != nil {
		return err
	}
	var from simulator.State
	if o.local {
		from, err = localState(ctx, manifests, name, c.namespace())
	} else {
		from, err = clusterState(ctx, c, manifests, name)
	}
	if err != nil {
		return err
	}
	next := from.Deployment
	if err := setImages(next, o.images); err != nil {
		return err
	}
	plan, err := simulator.Simulate(ctx, from, simulator.Config{
		PodStartup:     seconds(o.podStartup),
		PodTermination: seconds(o.podTermination),
	})
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	return printPlan(out, next, plan)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// manifests are the Deployments and ReplicaSets read from -f, in order.
type manifests struct {
	deployments []*appsv1.Deployment
	replicaSets []*appsv1.ReplicaSet
}

// readManifests reads every file (YAML or JSON, several documents, "List"
// kinds unpacked); anything but apps/v1 Deployments and ReplicaSets is an
// error naming the file and the kind.
func readManifests(files []string) (manifests, error) {
	var m manifests
	for _, file := range files {
		var data []byte
		var err error
		if file == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(file)
		}
		if err != nil {
			return m, err
		}
		for i, doc := range splitDocuments(data) {
			if err := m.add(doc); err != nil {
				return m, fmt.Errorf("%s, document %d: %w", file, i+1, err)
			}
		}
	}
	return m, nil
}

// splitDocuments splits YAML on "---" lines; empty documents are dropped.
func splitDocuments(data []byte) [][]byte {
	var out [][]byte
	var cur []string
	flush := func() {
		doc := strings.TrimSpace(strings.Join(cur, "\n"))
		cur = nil
		if doc != "" && !onlyComments(doc) {
			out = append(out, []byte(doc))
		}
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "---") && strings.TrimSpace(strings.TrimLeft(line, "-")) == "" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

func onlyComments(doc string) bool {
	for line := range strings.SplitSeq(doc, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

// add decodes one document into m.
func (m *manifests) add(doc []byte) error {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch {
	case head.Kind == "List" || strings.HasSuffix(head.Kind, "List") && head.Items != nil:
		for _, item := range head.Items {
			if err := m.add(item); err != nil {
				return err
			}
		}
		return nil
	case head.APIVersion == "apps/v1" && head.Kind == "Deployment":
		d := &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(doc, d); err != nil {
			return err
		}
		m.deployments = append(m.deployments, d)
		return nil
	case head.APIVersion == "apps/v1" && head.Kind == "ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		if err := yaml.UnmarshalStrict(doc, rs); err != nil {
			return err
		}
		m.replicaSets = append(m.replicaSets, rs)
		return nil
	}
	return fmt.Errorf("%s %s is not an apps/v1 Deployment or ReplicaSet", head.APIVersion, head.Kind)
}

// pick returns the Deployments in m named name (any name when "").
func (m manifests) pick(name string) ([]*appsv1.Deployment, error) {
	var out []*appsv1.Deployment
	for _, d := range m.deployments {
		if name == "" || d.Name == name {
			out = append(out, d)
		}
	}
	names := map[string]bool{}
	for _, d := range out {
		names[d.Name] = true
	}
	if len(names) > 1 {
		return nil, errors.New("the manifests hold several Deployments: name one, deploy/NAME")
	}
	return out, nil
}

// localState is --local: the first Deployment in the manifests is the
// current one, the last the new one; ReplicaSets it controls (by UID, or by
// name when the manifests carry no UID) are its current ReplicaSets, else
// one fully rolled-out ReplicaSet (simulator.SteadyReplicaSet).
func localState(ctx context.Context, m manifests, name, namespace string) (simulator.State, error) {
	var rss []*appsv1.ReplicaSet
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
	cur, next := ds[0].DeepCopy(), ds[len(ds)-1].DeepCopy()
	for _, d := range []*appsv1.Deployment{cur, next} {
		applyDefaults(d)
		if namespace != "" {
			d.Namespace = namespace
		}
		if d.UID == "" {
			d.UID = types.UID("local-" + d.Name)
		}
	}
	next.UID, next.Status, next.Generation = cur.UID, cur.Status, cur.Generation
	for _, rs := range m.replicaSets {
		ref := metav1.GetControllerOf(rs)
		if ref == nil || ref.Kind != "Deployment" || ref.Name != cur.Name {
			continue
		}
		rs = rs.DeepCopy()
		rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cur, appsv1.SchemeGroupVersion.WithKind("Deployment"))}
		if rs.Spec.Replicas == nil {
			rs.Spec.Replicas = ptr.To[int32](1)
		}
		rss = append(rss, rs)
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

// applyDefaults sets the apps/v1 Deployment defaults the controller reads
// (VA-1) on a manifest that did not go through an API server.
func applyDefaults(d *appsv1.Deployment) {
	if d.Namespace == "" {
		d.Namespace = metav1.NamespaceDefault
	}
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("25%"))
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			d.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("25%"))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
}

// clusterState reads the live Deployment (named by the argument or the -f
// manifest) and the ReplicaSets it controls; the new version is the live
// one, or the -f manifest as the API server would store it (a server-side
// apply dry run: defaulted and validated, nothing written).
func clusterState(ctx context.Context, c *clusterFlags, m manifests, name string) (simulator.State, error) {
	ds, err := m.pick(name)
	if err != nil {
		return simulator.State{}, err
	}
	if name == "" {
		if len(ds) == 0 {
			return simulator.State{}, errNoTarget
		}
		name = ds[0].Name
	}
	client, ns, err := c.client()
	if err != nil {
		return simulator.State{}, err
	}
	if len(ds) > 0 && ds[len(ds)-1].Namespace != "" && c.namespace() == "" {
		ns = ds[len(ds)-1].Namespace
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
	// The pods' ages count to this machine's clock (raised to the latest
	// time the pods show, should it be behind the cluster's).
	return simulator.State{Deployment: next, ReplicaSets: rss, Pods: pods, Now: time.Now()}, nil
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
	pods := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// dryRunApply returns d as the API server would store it after a
// server-side apply (forced, as field manager kubedeploy-plan), in a dry run.
func dryRunApply(ctx context.Context, client kubernetes.Interface, ns string, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	d = d.DeepCopy()
	d.Namespace, d.ResourceVersion, d.UID, d.Status = ns, "", "", appsv1.DeploymentStatus{}
	d.APIVersion, d.Kind = "apps/v1", "Deployment"
	body, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	applied, err := client.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.ApplyPatchType, body, metav1.PatchOptions{
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

// printPlan writes the plan as a table: a header, one row per step and a
// summary line.
func printPlan(out io.Writer, next *appsv1.Deployment, p *simulator.Plan) error {
	strategy := string(p.Strategy)
	if ru := next.Spec.Strategy.RollingUpdate; p.Strategy == appsv1.RollingUpdateDeploymentStrategyType && ru != nil {
		strategy += fmt.Sprintf(" (maxSurge %s, maxUnavailable %s)", ru.MaxSurge.String(), ru.MaxUnavailable.String())
	}
	fmt.Fprintf(out, "deployment/%s: %d replicas, %s\n", p.Deployment, p.Replicas, strategy)
	if p.Paused {
		fmt.Fprintf(out, "It is paused: nothing happens until `kubectl rollout resume deployment/%s`; then:\n", p.Deployment)
	}
	if len(p.Steps) == 0 {
		if p.Complete {
			fmt.Fprintln(out, "No rollout: the Deployment is complete and the change does not alter its pod template or size.")
			return nil
		}
		fmt.Fprintf(out, "No step: %s\n", p.Stopped)
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := []string{"STEP", "TIME", "NEW " + orDash(p.NewReplicaSet)}
	for _, name := range p.OldReplicaSets {
		header = append(header, "OLD "+name)
	}
	header = append(header, "TOTAL", "AVAILABLE")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i, s := range p.Steps {
		newSize := "-"
		if s.NewReplicaSetExists {
			newSize = fmt.Sprint(s.NewReplicas)
		}
		row := []string{fmt.Sprint(i + 1), fmt.Sprintf("%gs", s.Seconds), newSize}
		for _, n := range s.OldReplicas {
			row = append(row, fmt.Sprint(n))
		}
		row = append(row, fmt.Sprint(s.MaxTotal), fmt.Sprint(s.MinAvailable))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	end := fmt.Sprintf("complete after about %gs", p.EstimatedSeconds)
	switch {
	case p.Partitioned:
		end = fmt.Sprintf("%s after about %gs", p.Stopped, p.EstimatedSeconds)
	case !p.Complete:
		end = "not complete: " + p.Stopped
	}
	fmt.Fprintf(out, "%d steps; at most %d pods, at least %d available; %s.\n", len(p.Steps), p.PeakPods, p.MinAvailable, end)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
