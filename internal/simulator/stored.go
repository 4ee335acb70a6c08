package simulator

import (
	"fmt"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubedeploy/kubedeploy/internal/controller/rawtemplate"
)

// storedTemplates returns the rawtemplate store the simulated controllers sync with (IM-8): it knows, of the
// Deployment and ReplicaSets the cluster holds (UIDs set, the Deployment's generation raised), the fields
// kubedeploy's API does not know that their counterparts in stored (State.Stored: the same kind and name, as the
// API server stores them) have, carried onto them (rawtemplate.Carry: a change made to the typed Deployment, such
// as `rollout plan --image`, is kept). So the simulated Deployment controller finds the new ReplicaSet and names
// the one it creates (pod-template-hash) as the controller on the cluster does, and the created ReplicaSets and
// pods carry the template as stored. Objects without a counterpart, and all of them when stored is empty, are
// taken as typed. The error says an object does not convert or cannot be read.
func (s *simulation) storedTemplates(stored []*unstructured.Unstructured) (*rawtemplate.Store, error) {
	store := rawtemplate.NewStore(logr.Discard(), nil)
	byKind := map[string]map[string]any{}
	for _, u := range stored {
		if u != nil && u.GetAPIVersion() == appsv1.SchemeGroupVersion.String() {
			byKind[u.GetKind()+"/"+u.GetName()] = u.Object
		}
	}
	note := func(obj runtime.Object, key string) error {
		raw, ok := byKind[key]
		if !ok {
			return nil
		}
		u, err := rawtemplate.Carry(obj, raw)
		if err == nil {
			_, err = store.Note(u)
		}
		if err != nil {
			return fmt.Errorf("simulate: %s as stored: %w", key, err)
		}
		return nil
	}
	w := world{s.tracker}
	d, err := w.GetDeployment(s.ctx, s.key.Namespace, s.key.Name)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	rss, err := w.ListReplicaSets(s.ctx, s.key.Namespace)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if err := note(d, "Deployment/"+d.Name); err != nil {
		return nil, err
	}
	for i := range rss.Items {
		if err := note(&rss.Items[i], "ReplicaSet/"+rss.Items[i].Name); err != nil {
			return nil, err
		}
	}
	return store, nil
}
