package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubedeploy/kubedeploy/internal/manager"
	"github.com/kubedeploy/kubedeploy/internal/shard"
)

// shardsOptions are the flags of `kubedeploy shards`.
type shardsOptions struct {
	cluster   *genericclioptions.ConfigFlags
	dataDir   string
	namespace string
	ring      string
	output    string
	// chosen is the data dir whose kubeconfig clients chose (useKubeconfig), to explain errors reading its
	// cluster; zero otherwise.
	chosen kubeconfigSource
}

// newShardsCommand returns `kubedeploy shards`: the ring of `kubedeploy controllers --sharding` as it is now.
// It reads the cluster as `kubedeploy rollout` does (--kubeconfig, else <--data-dir>/kubeconfig, else
// $KUBECONFIG, else <data dir>/kubeconfig when it exists, else ~/.kube/config) and never writes to it.
func newShardsCommand() *cobra.Command {
	o := &shardsOptions{cluster: genericclioptions.NewConfigFlags(true)}
	o.cluster.Namespace = nil // --namespace is the ring's, below
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Show the shard ring of sharded controllers: each replica, its buckets, namespaces and pods, and the balance",
		Long: `Reads the ring of "kubedeploy controllers --sharding" (the ConfigMap --ring in --namespace, the
replicas' --leader-elect-resource-namespace), the replicas' Leases, and the cluster's namespaces and pods (as
metadata), and prints each replica (its Lease, live or expired, its buckets, their namespaces and pods now, and
its share of the pods), each bucket (its hash range, owner, the replica it is being handed to, namespaces and
pods now), and the balance: the biggest replica's pods over the mean. It never writes to the cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runShards(cmd, o)
		},
	}
	f := cmd.Flags()
	o.cluster.AddFlags(f)
	f.StringVar(&o.dataDir, "data-dir", "", dataDirUsage)
	f.StringVarP(&o.namespace, "namespace", "n", manager.DefaultResourceNamespace, "namespace of the ring and the replicas' Leases (the controllers' --leader-elect-resource-namespace)")
	f.StringVar(&o.ring, "ring", shard.DefaultRingName, "name of the ring's ConfigMap (the controllers' --shard-ring-name)")
	f.StringVarP(&o.output, "output", "o", "", "output format: '' for tables, or json")
	return cmd
}

func runShards(cmd *cobra.Command, o *shardsOptions) error {
	if o.output != "" && o.output != "json" {
		return fmt.Errorf("--output must be json or empty, got %q", o.output)
	}
	client, meta, err := o.clients(cmd)
	if err != nil {
		return err
	}
	view, err := readShards(cmd.Context(), client, meta, o.namespace, o.ring, time.Now())
	if err != nil {
		return o.chosen.explain(err)
	}
	if o.output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return printShards(cmd.OutOrStdout(), view)
}

// clients returns a clientset and a metadata client for the cluster the flags name (see newShardsCommand).
func (o *shardsOptions) clients(cmd *cobra.Command) (kubernetes.Interface, metadata.Interface, error) {
	if _, err := chooseKubeconfig(cmd, o.dataDir, &o.chosen); err != nil {
		return nil, nil, err
	}
	if raw, err := o.cluster.ToRawKubeConfigLoader().RawConfig(); err == nil && len(raw.Clusters) == 0 && *o.cluster.APIServer == "" {
		return nil, nil, fmt.Errorf("no cluster to read: no kubeconfig in %s, $KUBECONFIG or ~/.kube/config; pass --kubeconfig",
			filepath.Join(defaultDataDir(), "kubeconfig"))
	}
	cfg, err := o.cluster.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("no cluster to read (pass --kubeconfig): %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, meta, nil
}

// shardsView is what `kubedeploy shards` shows (and -o json prints): the ring as it is now.
type shardsView struct {
	// Ring is the ring's ConfigMap, namespace/name.
	Ring string `json:"ring"`
	// Replicas are the replicas with a Lease labelled for the ring or named as a bucket's owner, by identity.
	Replicas []replicaView `json:"replicas"`
	// Unowned is the buckets no replica owns, and their namespaces and pods; nil when every bucket is owned.
	Unowned *replicaView `json:"unowned,omitempty"`
	// Buckets are the ring's buckets in hash order.
	Buckets []bucketView `json:"buckets"`
	// Namespaces and Pods are the cluster's now.
	Namespaces int `json:"namespaces"`
	Pods       int `json:"pods"`
	// Balance is the biggest replica's pods over the mean pods of the replicas that are live or own a bucket;
	// 0 when they hold no pods.
	Balance float64 `json:"balance"`
	// Biggest is the identity of that replica.
	Biggest string `json:"biggest,omitempty"`
	// Resplit, while the ring's bounds are being changed (SH-5), says to how many buckets; nil otherwise.
	Resplit *resplitView `json:"resplit,omitempty"`
}

// resplitView is a change of the ring's bounds under way: every owner releases its buckets, and once no live
// replica owns one the ring's buckets become Buckets new ones.
type resplitView struct {
	Buckets int          `json:"buckets"`
	AskedAt *metav1.Time `json:"askedAt,omitempty"`

	askedAgo time.Duration
}

// replicaView is one replica of the ring.
type replicaView struct {
	Identity string `json:"identity,omitempty"`
	// Lease is the replica's Lease (shard.MemberLeaseName), "" when it has none; RenewTime its last renewal.
	Lease     string       `json:"lease,omitempty"`
	RenewTime *metav1.Time `json:"renewTime,omitempty"`
	// Live: the Lease was renewed less than its leaseDurationSeconds ago (by this machine's clock).
	Live       bool    `json:"live"`
	Buckets    []int   `json:"buckets"`
	Namespaces int     `json:"namespaces"`
	Pods       int     `json:"pods"`
	Share      float64 `json:"sharePercent"`

	renewedAgo time.Duration
}

// bucketView is one bucket of the ring.
type bucketView struct {
	Index       int    `json:"index"`
	Start       string `json:"start"`
	End         string `json:"end"`
	Owner       string `json:"owner,omitempty"`
	ReleasingTo string `json:"releasingTo,omitempty"`
	Namespaces  int    `json:"namespaces"`
	Pods        int    `json:"pods"`
	// MeasuredPods is what the ring holds for the bucket (its weight when the bounds were measured).
	MeasuredPods int `json:"measuredPods"`

	rangeText string
}

// readShards reads the ring namespace/name, its replicas' Leases, and the cluster's namespaces and pods (as
// metadata, from the API server's cache), and returns the view at now. It returns an error saying so when the
// ring does not exist, DecodeRing's when it does not decode, and the API server's otherwise.
func readShards(ctx context.Context, client kubernetes.Interface, meta metadata.Interface, namespace, name string, now time.Time) (shardsView, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return shardsView{}, fmt.Errorf("no shard ring %s/%s: is kubedeploy controllers running with --sharding?", namespace, name)
	}
	if err != nil {
		return shardsView{}, fmt.Errorf("reading the shard ring %s/%s: %w", namespace, name, err)
	}
	ring, err := shard.DecodeRing(cm)
	if err != nil {
		return shardsView{}, err
	}
	leases, err := client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{shard.MemberLabel: name}.String()})
	if err != nil {
		return shardsView{}, fmt.Errorf("listing the replicas' Leases: %w", err)
	}
	pods, err := shard.PodsByNamespace(ctx, client, meta)
	if err != nil {
		return shardsView{}, err
	}
	view := buildShardsView(ring, leases.Items, pods, now)
	view.Ring = namespace + "/" + name
	return view, nil
}

// buildShardsView returns the view of ring, with its replicas' leases and pods (namespace → pods) at now.
func buildShardsView(ring shard.Ring, leases []coordinationv1.Lease, pods map[string]int, now time.Time) shardsView {
	view := shardsView{Namespaces: len(pods), Buckets: make([]bucketView, len(ring.Buckets))}
	for i, b := range ring.Buckets {
		view.Buckets[i] = bucketView{Index: i, Start: b.Start, End: b.End, Owner: b.Owner, ReleasingTo: b.ReleasingTo,
			MeasuredPods: b.Pods, rangeText: b.Range().String()}
	}
	for ns, n := range pods {
		view.Pods += n
		if i := ring.Find(ns); i >= 0 {
			view.Buckets[i].Namespaces++
			view.Buckets[i].Pods += n
		}
	}
	byID := replicasOf(ring, leases, now)
	for _, b := range view.Buckets {
		r := byID[b.Owner]
		if r == nil {
			r = &replicaView{}
			byID[""] = r
		}
		r.Buckets = append(r.Buckets, b.Index)
		r.Namespaces += b.Namespaces
		r.Pods += b.Pods
	}
	view.Resplit = resplitOf(ring, now)
	view.Unowned = byID[""]
	delete(byID, "")
	for _, r := range byID {
		view.Replicas = append(view.Replicas, *r)
	}
	slices.SortFunc(view.Replicas, func(a, b replicaView) int { return cmp.Compare(a.Identity, b.Identity) })
	view.share()
	return view
}

// replicasOf returns the replicas of the ring by identity: one per Lease (the newest renewal wins for an
// identity with two) and one per owner without a Lease.
func replicasOf(ring shard.Ring, leases []coordinationv1.Lease, now time.Time) map[string]*replicaView {
	out := map[string]*replicaView{}
	for _, l := range leases {
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		id := *l.Spec.HolderIdentity
		r := &replicaView{Identity: id, Lease: l.Name}
		if rt := l.Spec.RenewTime; rt != nil {
			r.RenewTime = &metav1.Time{Time: rt.Time}
			r.renewedAgo = now.Sub(rt.Time)
			d := time.Duration(ptrOr(l.Spec.LeaseDurationSeconds, 0)) * time.Second
			r.Live = r.renewedAgo < d
		}
		if old := out[id]; old == nil || old.RenewTime == nil || (r.RenewTime != nil && r.RenewTime.After(old.RenewTime.Time)) {
			out[id] = r
		}
	}
	for _, b := range ring.Buckets {
		if b.Owner != "" && out[b.Owner] == nil {
			out[b.Owner] = &replicaView{Identity: b.Owner}
		}
	}
	return out
}

// resplitOf returns ring's re-split under way at now, or nil.
func resplitOf(ring shard.Ring, now time.Time) *resplitView {
	if !ring.Resplitting() {
		return nil
	}
	r := &resplitView{Buckets: len(ring.Resplit)}
	if ring.LastResplit != nil {
		r.AskedAt = &metav1.Time{Time: ring.LastResplit.Time}
		r.askedAgo = now.Sub(ring.LastResplit.Time)
	}
	return r
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// share fills each replica's share of the cluster's pods (%) and the balance: the biggest replica's pods over
// the mean of the replicas that are live or own a bucket.
func (v *shardsView) share() {
	counted, sum := 0, 0
	for i := range v.Replicas {
		r := &v.Replicas[i]
		if v.Pods > 0 {
			r.Share = 100 * float64(r.Pods) / float64(v.Pods)
		}
		if !r.Live && len(r.Buckets) == 0 {
			continue
		}
		counted++
		sum += r.Pods
		if v.Biggest == "" || r.Pods > v.podsOf(v.Biggest) {
			v.Biggest = r.Identity
		}
	}
	if v.Unowned != nil && v.Pods > 0 {
		v.Unowned.Share = 100 * float64(v.Unowned.Pods) / float64(v.Pods)
	}
	if sum == 0 {
		v.Biggest = ""
		return
	}
	v.Balance = float64(v.podsOf(v.Biggest)) / (float64(sum) / float64(counted))
}

func (v *shardsView) podsOf(identity string) int {
	for _, r := range v.Replicas {
		if r.Identity == identity {
			return r.Pods
		}
	}
	return 0
}

// printShards writes view as two tables, replicas then buckets, and the balance.
func printShards(w io.Writer, view shardsView) error {
	fmt.Fprintf(w, "Ring %s: %d buckets, %d replicas, %d namespaces, %d pods\n\n", view.Ring, len(view.Buckets),
		len(view.Replicas), view.Namespaces, view.Pods)
	if r := view.Resplit; r != nil {
		asked := ""
		if r.AskedAt != nil {
			asked = " (asked " + duration.HumanDuration(r.askedAgo) + " ago)"
		}
		fmt.Fprintf(w, "Re-split under way%s: every owner releases its buckets; once no live replica owns one, the ring's %d buckets become %d new ones\n\n",
			asked, len(view.Buckets), r.Buckets)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tLEASE\tBUCKETS\tNAMESPACES\tPODS\tSHARE")
	rows := view.Replicas
	if view.Unowned != nil {
		u := *view.Unowned
		u.Identity = "(unowned)"
		rows = append(slices.Clone(rows), u)
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f%%\n", r.Identity, leaseState(r), indexRanges(r.Buckets), r.Namespaces, r.Pods, r.Share)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "BUCKET\tRANGE\tOWNER\tRELEASING TO\tNAMESPACES\tPODS")
	for _, b := range view.Buckets {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\n", b.Index, b.rangeText, cmp.Or(b.Owner, "-"), cmp.Or(b.ReleasingTo, "-"), b.Namespaces, b.Pods)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\n"+balanceLine(view))
	return err
}

// leaseState says whether r's Lease is live and when it was last renewed.
func leaseState(r replicaView) string {
	switch {
	case r.Lease == "":
		return "no Lease"
	case r.RenewTime == nil:
		return "never renewed"
	case r.Live:
		return "live, renewed " + duration.HumanDuration(r.renewedAgo) + " ago"
	}
	return "expired, renewed " + duration.HumanDuration(r.renewedAgo) + " ago"
}

// balanceLine is the closing line: the biggest replica's pods over the mean.
func balanceLine(view shardsView) string {
	if view.Biggest == "" {
		return "Balance: no replica holds pods"
	}
	counted := 0
	for _, r := range view.Replicas {
		if r.Live || len(r.Buckets) > 0 {
			counted++
		}
	}
	line := fmt.Sprintf("Balance: %.2f (the biggest replica, %s, holds %d pods; the mean of %d replicas is %.1f)",
		view.Balance, view.Biggest, view.podsOf(view.Biggest), counted, float64(view.podsOf(view.Biggest))/view.Balance)
	if view.Unowned != nil && view.Unowned.Pods > 0 {
		line += fmt.Sprintf("; %d pods are in unowned buckets", view.Unowned.Pods)
	}
	return line
}

// indexRanges writes sorted bucket indices compactly: "0-3,7"; "-" for none.
func indexRanges(idx []int) string {
	if len(idx) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		part := strconv.Itoa(idx[i])
		if j > i {
			part += "-" + strconv.Itoa(idx[j])
		}
		parts = append(parts, part)
		i = j + 1
	}
	return strings.Join(parts, ",")
}
