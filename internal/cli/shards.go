package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
metadata), and prints each replica (live, joining or dead as the replicas themselves judge it, its buckets,
their namespaces and pods now, and its share of the pods), each bucket (its hash range, owner, the replica it is
being handed to, namespaces, pods now and steady pods), the balance (the biggest live replica's pods over the
mean of the live replicas), and the moves counted by cause. It never writes to the cluster.`,
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
	// Live is the number of live replicas (Replicas' Live), the header's count and the balance's.
	Live int `json:"live"`
	// Balance is the biggest live replica's pods over the mean pods of the live replicas; 0 when they hold no
	// pods.
	Balance float64 `json:"balance"`
	// Biggest is the identity of that replica.
	Biggest string `json:"biggest,omitempty"`
	// Waiting is the pods in buckets no live replica owns (unowned, or their owner dead).
	Waiting int `json:"waiting"`
	// Resplit, while the ring's bounds are being changed (SH-5), says to how many buckets; nil otherwise.
	Resplit *resplitView `json:"resplit,omitempty"`
	// Moves counts the buckets that changed owner since the ring was made, by cause (SH-8).
	Moves map[shard.MoveCause]int64 `json:"moves"`
	// LastRebalance is when the last rebalancing move started; nil if none did.
	LastRebalance *metav1.Time `json:"lastRebalance,omitempty"`

	lastRebalanceAgo time.Duration
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
	// Joined is when it joined the ring's members, Expired when a peer confirmed its Lease expired (SH-8).
	Joined  *metav1.Time `json:"joined,omitempty"`
	Expired *metav1.Time `json:"expired,omitempty"`
	// Live: it has a Lease, its peers have not found it expired (they judge by the Lease's changes as they see
	// them, SH-7), and it was renewed within its lease duration and a minute (stale) by this machine's clock.
	Live bool `json:"live"`
	// State is Live in words: live, joining (a Lease, not a member yet), dead (expired, no Lease, or stale).
	State      string  `json:"state"`
	Buckets    []int   `json:"buckets"`
	Namespaces int     `json:"namespaces"`
	Pods       int     `json:"pods"`
	Share      float64 `json:"sharePercent"`

	renewedAgo, joinedAgo, expiredAgo time.Duration
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
	// MeasuredPods is what the ring holds for the bucket: its steady pods as its owner last recorded them
	// (its weight in the plan, SH-8).
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
	view := shardsView{Namespaces: len(pods), Buckets: make([]bucketView, len(ring.Buckets)), Moves: map[shard.MoveCause]int64{}}
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
	maps.Copy(view.Moves, ring.Moves)
	if ring.LastRebalance != nil {
		view.LastRebalance = &metav1.Time{Time: ring.LastRebalance.Time}
		view.lastRebalanceAgo = now.Sub(ring.LastRebalance.Time)
	}
	view.share()
	return view
}

// staleMargin is how long past its lease duration, by this machine's clock, a Lease no peer has found
// expired is shown dead all the same: its peers would have found it expired long before, were any live.
const staleMargin = time.Minute

// replicasOf returns the replicas of the ring by identity: one per Lease (the newest renewal wins for an
// identity with two), one per member and one per owner without a Lease; each live or not as liveOf says.
func replicasOf(ring shard.Ring, leases []coordinationv1.Lease, now time.Time) map[string]*replicaView {
	out := map[string]*replicaView{}
	durations := map[string]time.Duration{}
	for _, l := range leases {
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		id := *l.Spec.HolderIdentity
		r := &replicaView{Identity: id, Lease: l.Name}
		if rt := l.Spec.RenewTime; rt != nil {
			r.RenewTime = &metav1.Time{Time: rt.Time}
			r.renewedAgo = now.Sub(rt.Time)
		}
		if old := out[id]; old == nil || old.RenewTime == nil || (r.RenewTime != nil && r.RenewTime.After(old.RenewTime.Time)) {
			out[id] = r
			durations[id] = time.Duration(ptrOr(l.Spec.LeaseDurationSeconds, 0)) * time.Second
		}
	}
	for _, m := range ring.Members {
		if out[m.Identity] == nil {
			out[m.Identity] = &replicaView{Identity: m.Identity}
		}
		r := out[m.Identity]
		r.Joined, r.joinedAgo = &metav1.Time{Time: m.Joined.Time}, now.Sub(m.Joined.Time)
		if m.Expired != nil {
			r.Expired, r.expiredAgo = &metav1.Time{Time: m.Expired.Time}, now.Sub(m.Expired.Time)
		}
	}
	for _, b := range ring.Buckets {
		if b.Owner != "" && out[b.Owner] == nil {
			out[b.Owner] = &replicaView{Identity: b.Owner}
		}
	}
	for id, r := range out {
		r.Live, r.State = liveOf(*r, durations[id])
	}
	return out
}

// liveOf judges r as its peers do: live while it has a Lease and no peer has found it expired (SH-7's check,
// recorded in the ring's members, SH-8), joining while it has a Lease and is not a member yet; dead once a
// peer found it expired, when it has no Lease, or when its Lease, of duration d, has not been renewed for
// d + staleMargin by this machine's clock (no live peer to find it expired). It returns the state in words.
func liveOf(r replicaView, d time.Duration) (bool, string) {
	switch {
	case r.Expired != nil:
		return false, "dead: expired " + duration.HumanDuration(r.expiredAgo) + " ago"
	case r.Lease == "":
		return false, "dead: no Lease"
	case r.RenewTime == nil:
		return false, "dead: never renewed"
	case r.renewedAgo > d+staleMargin:
		return false, "dead: not renewed for " + duration.HumanDuration(r.renewedAgo)
	case r.Joined == nil:
		return true, "joining"
	}
	return true, "live, joined " + duration.HumanDuration(r.joinedAgo) + " ago"
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

// share fills each replica's share of the cluster's pods (%), the live replicas' count, the balance (the
// biggest live replica's pods over the mean of the live replicas) and the pods waiting in buckets no live
// replica owns.
func (v *shardsView) share() {
	sum := 0
	for i := range v.Replicas {
		r := &v.Replicas[i]
		if v.Pods > 0 {
			r.Share = 100 * float64(r.Pods) / float64(v.Pods)
		}
		if !r.Live {
			v.Waiting += r.Pods
			continue
		}
		v.Live++
		sum += r.Pods
		if v.Biggest == "" || r.Pods > v.podsOf(v.Biggest) {
			v.Biggest = r.Identity
		}
	}
	if v.Unowned != nil {
		v.Waiting += v.Unowned.Pods
		if v.Pods > 0 {
			v.Unowned.Share = 100 * float64(v.Unowned.Pods) / float64(v.Pods)
		}
	}
	if sum == 0 {
		v.Biggest = ""
		return
	}
	v.Balance = float64(v.podsOf(v.Biggest)) / (float64(sum) / float64(v.Live))
}

func (v *shardsView) podsOf(identity string) int {
	for _, r := range v.Replicas {
		if r.Identity == identity {
			return r.Pods
		}
	}
	return 0
}

// printShards writes view as two tables, replicas then buckets, the balance and the moves.
func printShards(w io.Writer, view shardsView) error {
	dead := ""
	if n := len(view.Replicas) - view.Live; n > 0 {
		dead = fmt.Sprintf(" (%d dead)", n)
	}
	fmt.Fprintf(w, "Ring %s: %d buckets, %d live replicas%s, %d namespaces, %d pods\n\n", view.Ring, len(view.Buckets),
		view.Live, dead, view.Namespaces, view.Pods)
	if r := view.Resplit; r != nil {
		asked := ""
		if r.AskedAt != nil {
			asked = " (asked " + duration.HumanDuration(r.askedAgo) + " ago)"
		}
		fmt.Fprintf(w, "Re-split under way%s: every owner releases its buckets; once no live replica owns one, the ring's %d buckets become %d new ones\n\n",
			asked, len(view.Buckets), r.Buckets)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tSTATE\tBUCKETS\tNAMESPACES\tPODS\tSHARE")
	rows := view.Replicas
	if view.Unowned != nil {
		u := *view.Unowned
		u.Identity, u.State = "(unowned)", "-"
		rows = append(slices.Clone(rows), u)
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f%%\n", r.Identity, r.State, indexRanges(r.Buckets), r.Namespaces, r.Pods, r.Share)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "BUCKET\tRANGE\tOWNER\tRELEASING TO\tNAMESPACES\tPODS\tSTEADY")
	for _, b := range view.Buckets {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\n", b.Index, b.rangeText, cmp.Or(b.Owner, "-"), cmp.Or(b.ReleasingTo, "-"), b.Namespaces, b.Pods, b.MeasuredPods)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\n"+balanceLine(view)+"\n"+movesLine(view))
	return err
}

// balanceLine is the balance: the biggest live replica's pods over the mean of the live replicas, from the
// pods that exist now.
func balanceLine(view shardsView) string {
	line := "Balance: no live replica holds pods"
	if view.Biggest != "" {
		line = fmt.Sprintf("Balance: %.2f (the biggest replica, %s, holds %d pods; the mean of %d live replicas is %.1f)",
			view.Balance, view.Biggest, view.podsOf(view.Biggest), view.Live, float64(view.podsOf(view.Biggest))/view.Balance)
	}
	if view.Waiting > 0 {
		line += fmt.Sprintf("; %d pods are in buckets no live replica owns", view.Waiting)
	}
	return line
}

// movesLine is the moves counted by cause since the ring was made, and when the last rebalance started.
func movesLine(view shardsView) string {
	parts := make([]string, 0, len(shard.MoveCauses))
	for _, c := range shard.MoveCauses {
		parts = append(parts, fmt.Sprintf("%s %d", c, view.Moves[c]))
	}
	line := "Moves: " + strings.Join(parts, ", ")
	if view.LastRebalance != nil {
		line += fmt.Sprintf(" (last rebalance %s ago; at most one every %s)", duration.HumanDuration(view.lastRebalanceAgo),
			duration.HumanDuration(shard.RebalanceInterval))
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
