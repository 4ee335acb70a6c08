package simulator

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// SteadyReplicaSet returns the ReplicaSet the Deployment controller makes
// for d's current template (RV-9: name, labels, selector, annotations) once
// d's rollout completed: spec.replicas = d's replicas (Replicas), every pod
// available, at the revision in d's revision annotation (1 if none), created
// an hour before the simulated change. Plans made from manifests alone (no
// cluster) start from it. It is made by one sync of the Deployment
// controller on a simulated cluster holding d alone (resumed). It returns
// Simulate's errors for an invalid d, or the sync's.
func SteadyReplicaSet(ctx context.Context, d *appsv1.Deployment) (*appsv1.ReplicaSet, error) {
	if err := validate(d); err != nil {
		return nil, err
	}
	d = d.DeepCopy()
	d.Spec.Paused = false
	if d.Namespace == "" {
		d.Namespace = metav1.NamespaceDefault
	}
	if d.UID == "" {
		d.UID = "simulated-deployment"
	}
	c, err := newCluster(klog.NewContext(ctx, logr.Discard()), Config{PodStartup: DefaultPodStartup}, defaultStart, d)
	if err != nil {
		return nil, err
	}
	s := &simulation{cluster: c, key: cache.ObjectName{Namespace: d.Namespace, Name: d.Name}}
	if err := s.newSyncers(nil); err != nil {
		return nil, err
	}
	if err := s.observe(); err != nil {
		return nil, err
	}
	if _, err := s.deployments(s.ctx, s.key); err != nil {
		return nil, fmt.Errorf("simulate: Deployment sync: %w", err)
	}
	st, err := s.state()
	if err != nil {
		return nil, err
	}
	size := rolloutstate.Replicas(d)
	if st.newRS == nil || len(st.rss) != 1 || rolloutstate.ReplicaSetReplicas(st.newRS) != size {
		return nil, fmt.Errorf("simulate: the Deployment controller made %d ReplicaSets for Deployment %s, not one of %d replicas", len(st.rss), d.Name, size)
	}
	rs := st.newRS.DeepCopy()
	revision := int64(1)
	if r, err := strconv.ParseInt(d.Annotations[rolloutstate.RevisionAnnotation], 10, 64); err == nil && r > 0 {
		revision = r
	}
	rs.Annotations[rolloutstate.RevisionAnnotation] = strconv.FormatInt(revision, 10)
	rs.UID, rs.ResourceVersion, rs.Generation = "", "", 1
	rs.CreationTimestamp = metav1.NewTime(defaultStart.Add(-time.Hour))
	rs.Status = appsv1.ReplicaSetStatus{
		Replicas: size, FullyLabeledReplicas: size, ReadyReplicas: size, AvailableReplicas: size, ObservedGeneration: 1,
	}
	return rs, nil
}
