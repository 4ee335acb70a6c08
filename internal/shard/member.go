package shard

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// MemberLabel labels the replicas' Leases with the name of their ring, so each replica lists its peers.
const MemberLabel = "kubedeploy.io/shard-ring"

// MemberLeaseName returns the name of identity's Lease: "kubedeploy-shard-" and 16 hex digits of its FNV-1a
// hash (an identity such as "host_uuid" is not a valid object name; HolderIdentity keeps it whole).
func MemberLeaseName(identity string) string {
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("kubedeploy-shard-%016x", h.Sum64())
}

// Durations are the sharded mode's lease timings, leader election's (CM-7) applied to each replica's
// membership: a replica acts only within RenewDeadline of starting its last successful renewal; a peer takes
// its buckets once its Lease has not changed for LeaseDuration; it renews every RetryPeriod (SH-2, SH-6).
type Durations struct {
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Membership keeps this replica's Lease (one write per RetryPeriod, SH-6) and observes its peers'. Its epoch
// counts unbroken runs of renewals: a renewal that ends after the previous one's RenewDeadline starts a new
// epoch, and every claim of an older epoch stays invalid (SH-2). Build it with NewMembership.
type Membership struct {
	client    kubernetes.Interface
	namespace string
	ring      string
	identity  string
	d         Durations
	clock     clock.WithTicker

	mu         sync.Mutex
	lease      *coordinationv1.Lease // as last written, nil to read it again
	validUntil time.Time
	epoch      int64
	observed   map[string]observation
}

// observation is a peer's Lease as this replica last saw it change: whether it exists, its resourceVersion,
// and when (this replica's clock), as leader election observes a leader.
type observation struct {
	present bool
	rv      string
	// resourceVersion is the Lease's own, for a delete conditioned on it.
	resourceVersion string
	at              time.Time
}

// NewMembership returns the membership of identity in the ring named ring, its Lease in namespace.
func NewMembership(client kubernetes.Interface, namespace, ring, identity string, d Durations, clk clock.WithTicker) *Membership {
	return &Membership{client: client, namespace: namespace, ring: ring, identity: identity, d: d, clock: clk,
		observed: map[string]observation{}}
}

// Identity is this replica's identity.
func (m *Membership) Identity() string { return m.identity }

// Epoch returns the current epoch (≥ 1) while this replica is within RenewDeadline of its last renewal's
// start, else 0.
func (m *Membership) Epoch() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.epoch == 0 || !m.clock.Now().Before(m.validUntil) {
		return 0
	}
	return m.epoch
}

// ValidUntil returns when a claim won in epoch stops being valid unless the Lease is renewed before (SH-2): the
// start of the last renewal + RenewDeadline while epoch is the current one, else the zero time.
func (m *Membership) ValidUntil(epoch int64) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if epoch == 0 || m.epoch != epoch {
		return time.Time{}
	}
	return m.validUntil
}

// Valid reports whether a claim won in epoch may still be acted on (SH-2).
func (m *Membership) Valid(epoch int64) bool { return epoch != 0 && m.Epoch() == epoch }

// Run renews the Lease every RetryPeriod until ctx ends. Failures are logged; the epoch lapses by itself.
func (m *Membership) Run(ctx context.Context, changed func()) {
	t := m.clock.NewTicker(m.d.RetryPeriod)
	defer t.Stop()
	for {
		before := m.Epoch()
		if err := m.Renew(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Info("Could not renew the shard membership Lease", "lease", klog.KRef(m.namespace, MemberLeaseName(m.identity)), "err", err)
		}
		if m.Epoch() != before {
			changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Renew writes the Lease once (creating it if needed) and, on success, extends validity to the write's start
// + RenewDeadline, starting a new epoch if the previous validity had run out by the time the write returned.
// The error is the API server's.
func (m *Membership) Renew(ctx context.Context) error {
	start := m.clock.Now()
	written, err := m.writeLease(ctx, start)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.lease = nil
		return err
	}
	m.lease = written
	if m.epoch == 0 || !m.clock.Now().Before(m.validUntil) {
		m.epoch++
	}
	m.validUntil = start.Add(m.d.RenewDeadline)
	return nil
}

// writeLease updates the Lease as last written, or reads it first (creating it when missing).
func (m *Membership) writeLease(ctx context.Context, now time.Time) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	leases := m.client.CoordinationV1().Leases(m.namespace)
	if lease == nil {
		got, err := leases.Get(ctx, MemberLeaseName(m.identity), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return leases.Create(ctx, m.newLease(now), metav1.CreateOptions{})
		}
		if err != nil {
			return nil, err
		}
		lease = got
	}
	lease = lease.DeepCopy()
	lease.Spec.HolderIdentity = ptr.To(m.identity)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(m.d.LeaseDuration / time.Second))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if lease.Labels[MemberLabel] != m.ring {
		lease.Labels = map[string]string{MemberLabel: m.ring}
	}
	return leases.Update(ctx, lease, metav1.UpdateOptions{})
}

func (m *Membership) newLease(now time.Time) *coordinationv1.Lease {
	t := &metav1.MicroTime{Time: now}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(m.identity), Namespace: m.namespace, Labels: map[string]string{MemberLabel: m.ring}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(m.identity), LeaseDurationSeconds: ptr.To(int32(m.d.LeaseDuration / time.Second)),
			AcquireTime: t, RenewTime: t},
	}
}

// Leave deletes the Lease, after the replica has released its buckets, so peers need not wait for it to
// expire. NotFound is not an error.
func (m *Membership) Leave(ctx context.Context) error {
	m.mu.Lock()
	m.epoch, m.lease = 0, nil
	m.mu.Unlock()
	err := m.client.CoordinationV1().Leases(m.namespace).Delete(ctx, MemberLeaseName(m.identity), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Observe records a peer's Lease as seen now (nil: deleted); an unchanged resourceVersion keeps the time it
// was first seen.
func (m *Membership) Observe(identity string, lease *coordinationv1.Lease) {
	now := observation{present: lease != nil, at: m.clock.Now()}
	if lease != nil {
		now.rv, now.resourceVersion = lease.ResourceVersion, lease.ResourceVersion
		if lease.Spec.RenewTime != nil { // renewTime too: a renewal shows even where resourceVersions are not kept
			now.rv += "/" + lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.observed[identity]; !ok || o.present != now.present || o.rv != now.rv {
		m.observed[identity] = now
	}
}

// Known starts the clock on identities never observed (a ring's owners without a Lease this replica has
// seen): they are not live, but ConfirmExpired counts their LeaseDuration from now, as a new standby counts a
// leader's.
func (m *Membership) Known(identities ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range identities {
		if _, ok := m.observed[id]; !ok && id != "" && id != m.identity {
			m.observed[id] = observation{at: m.clock.Now()}
		}
	}
}

// Live returns, sorted, this replica (while its epoch is valid) and every peer whose Lease changed within
// LeaseDuration and is not deleted.
func (m *Membership) Live() []string {
	var live []string
	if m.Epoch() != 0 {
		live = append(live, m.identity)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	for id, o := range m.observed {
		if id != m.identity && o.present && now.Sub(o.at) < m.d.LeaseDuration {
			live = append(live, id)
		}
	}
	slices.Sort(live)
	return live
}

// ConfirmExpired reads identity's Lease from the API server (a quorum read, not the cache a lagging watch
// feeds) and reports whether it is unchanged, or absent, since it was observed LeaseDuration ago or more: only
// then may a peer take its buckets (SH-7). A changed Lease is observed now. The error is the API server's.
func (m *Membership) ConfirmExpired(ctx context.Context, identity string) (bool, error) {
	lease, err := m.client.CoordinationV1().Leases(m.namespace).Get(ctx, MemberLeaseName(identity), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err = nil, nil
	}
	if err != nil {
		return false, err
	}
	m.Known(identity)
	m.Observe(identity, lease)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clock.Now().Sub(m.observed[identity].at) >= m.d.LeaseDuration, nil
}

// Peers returns, sorted, the identities other than this replica's whose Lease this replica has seen and not
// seen deleted.
func (m *Membership) Peers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, o := range m.observed {
		if id != m.identity && o.present {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Silent reports whether identity's Lease (or its absence) has not changed for LeaseDuration by this
// replica's observation: the cheap check before ConfirmExpired's read. An identity never observed is not.
func (m *Membership) Silent(identity string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.observed[identity]
	return ok && m.clock.Now().Sub(o.at) >= m.d.LeaseDuration
}

// DeleteLease deletes identity's Lease, conditioned on the resourceVersion last observed (a replica that
// renewed since keeps it: the API server answers Conflict), after ConfirmExpired said so: a dead replica's
// Lease, which nothing else would ever delete (each process has a new identity). NotFound is not an error;
// other errors are the API server's.
func (m *Membership) DeleteLease(ctx context.Context, identity string) error {
	m.mu.Lock()
	o := m.observed[identity]
	m.mu.Unlock()
	if !o.present {
		return nil
	}
	err := m.client.CoordinationV1().Leases(m.namespace).Delete(ctx, MemberLeaseName(identity),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &o.resourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.observed[identity]; cur.rv == o.rv {
		m.observed[identity] = observation{at: o.at} // deleted; the time it last changed stays
	}
	return nil
}

// LastSeen returns when identity's Lease was last seen to change (zero if never).
func (m *Membership) LastSeen(identity string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.observed[identity].at
}
