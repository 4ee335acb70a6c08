package deployment

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubedeploy/kubedeploy/internal/controller/rolloutstate"
)

// syncContext is everything one sync of one Deployment works from, computed
// once (house style pattern 4). Strategy steps are its methods. After each
// write the affected object is replaced by the one the API server returned
// (IM-2), so later writes in the same sync carry a current resourceVersion.
type syncContext struct {
	c      *Controller
	key    cache.ObjectName
	logger klog.Logger
	now    time.Time
	// d is our working copy of the Deployment; d.Status is the stored status.
	d *appsv1.Deployment
	// f are d's rolloutstate.Fenceposts, resolved once (RU-1..RU-6).
	f rolloutstate.Fenceposts
	// rsList holds the ReplicaSets d owns after claiming (SD-3).
	rsList []*appsv1.ReplicaSet
	// newRS is the ReplicaSet with d's template (RV-1), or nil.
	newRS *appsv1.ReplicaSet
	// oldRSs holds every other owned ReplicaSet, oldest first.
	oldRSs []*appsv1.ReplicaSet
	// podsByRS maps each owned ReplicaSet's UID to the pods it controls (SD-4), read from the pod cache
	// the first time a step needs it (podMap): Recreate (RC-3), EX-3 and EX-6 do, a plain rolling update
	// does not, and reading every pod of every ReplicaSet on each of its syncs was 3.5% of the
	// controllers' CPU in a 1,000-replica rolling update (issue 48). nil until then.
	podsByRS map[types.UID][]*v1.Pod
	// pendingByRS maps a ReplicaSet's UID to the creations its controller has
	// in flight (read before podsByRS; only for EX-3 Deployments, else nil).
	pendingByRS map[types.UID]int
	// partition is d's EX-1 partition, read once (partitionOf), or the one
	// its current rollout step sets (EX-5, syncSteps).
	partition rolloutPartition
	// requeueAfter, when > 0, is when a timed pause step ends (EX-5): the
	// sync's result asks to be run again by then at the latest.
	requeueAfter time.Duration
}

// allRSs returns old ReplicaSets followed by the new one (if any).
func (sc *syncContext) allRSs() []*appsv1.ReplicaSet { return withNew(sc.oldRSs, sc.newRS) }

// podMap returns podsByRS (SD-4), reading it from the pod cache over rsList on the first call; the error is the
// pod index's (ByIndex: an index New did not add).
func (sc *syncContext) podMap() (map[types.UID][]*v1.Pod, error) {
	if sc.podsByRS == nil {
		m, err := sc.c.podsByReplicaSet(sc.rsList)
		if err != nil {
			return nil, err
		}
		sc.podsByRS = m
	}
	return sc.podsByRS, nil
}
