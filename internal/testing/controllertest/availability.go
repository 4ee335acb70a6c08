package controllertest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AvailabilityCase is one vector of the availability rule (RS-15, rolloutstate.PodAvailable): a pod Ready (or
// not) since ReadyFor before now (0 with UnknownSince: no transition time), under MinReady, is Available or not.
// The ReplicaSet controller's status and observe mode's shadow check both run every case, so that neither can
// change the rule alone.
type AvailabilityCase struct {
	Name         string
	Ready        bool
	ReadyFor     time.Duration
	UnknownSince bool
	MinReady     time.Duration
	Available    bool
}

// AvailabilityCases are the vectors of the rule: upstream's podutil.IsPodAvailable.
var AvailabilityCases = []AvailabilityCase{
	{Name: "not ready", Ready: false, ReadyFor: time.Hour, MinReady: 0, Available: false},
	{Name: "ready, no minReadySeconds", Ready: true, ReadyFor: 0, MinReady: 0, Available: true},
	{Name: "ready, unknown since, no minReadySeconds", Ready: true, UnknownSince: true, MinReady: 0, Available: true},
	{Name: "ready for exactly minReadySeconds", Ready: true, ReadyFor: 10 * time.Second, MinReady: 10 * time.Second, Available: true},
	{Name: "ready for less than minReadySeconds", Ready: true, ReadyFor: 9 * time.Second, MinReady: 10 * time.Second, Available: false},
	{Name: "ready, unknown since, with minReadySeconds", Ready: true, UnknownSince: true, MinReady: 10 * time.Second, Available: false},
	{Name: "ready for longer", Ready: true, ReadyFor: time.Hour, MinReady: 10 * time.Second, Available: true},
}

// Pod returns a running pod named name with the case's Ready condition, as seen at now.
func (c AvailabilityCase) Pod(name string, now time.Time) *v1.Pod {
	status := v1.ConditionFalse
	if c.Ready {
		status = v1.ConditionTrue
	}
	cond := v1.PodCondition{Type: v1.PodReady, Status: status}
	if !c.UnknownSince {
		cond.LastTransitionTime = metav1.NewTime(now.Add(-c.ReadyFor))
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond}},
	}
}
