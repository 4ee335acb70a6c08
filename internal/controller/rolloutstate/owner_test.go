package rolloutstate

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The one pod → ReplicaSet → Deployment resolution: both links must be a ControllerRef of the apps group with
// the right kind, and the ReplicaSet must be the one the pod's ref names (name and UID, EH-5).
func TestDeploymentOfPod(t *testing.T) {
	ref := func(apiVersion, kind, name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}}
	}
	rsOwned := func(owners []metav1.OwnerReference) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", UID: "rs-uid", OwnerReferences: owners}}
	}
	cases := []struct {
		name    string
		podRefs []metav1.OwnerReference
		rs      *appsv1.ReplicaSet
		want    string
	}{
		{"a Deployment's pod", ref("apps/v1", "ReplicaSet", "web-1", "rs-uid"), rsOwned(ref("apps/v1", "Deployment", "web", "d-uid")), "web"},
		{"another apps version", ref("apps/v1beta2", "ReplicaSet", "web-1", "rs-uid"), rsOwned(ref("apps/v1beta2", "Deployment", "web", "d-uid")), "web"},
		{"an orphan pod", nil, rsOwned(ref("apps/v1", "Deployment", "web", "d-uid")), ""},
		{"a pod of a ReplicaSet of another group", ref("example.com/v1", "ReplicaSet", "web-1", "rs-uid"), rsOwned(ref("apps/v1", "Deployment", "web", "d-uid")), ""},
		{"a ReplicaSet replaced under the same name", ref("apps/v1", "ReplicaSet", "web-1", "old-uid"), rsOwned(ref("apps/v1", "Deployment", "web", "d-uid")), ""},
		{"a bare ReplicaSet", ref("apps/v1", "ReplicaSet", "web-1", "rs-uid"), rsOwned(nil), ""},
		{"a ReplicaSet of a Deployment of another group", ref("apps/v1", "ReplicaSet", "web-1", "rs-uid"), rsOwned(ref("example.com/v1", "Deployment", "web", "d-uid")), ""},
		{"a ReplicaSet of a bad apiVersion", ref("apps/v1", "ReplicaSet", "web-1", "rs-uid"), rsOwned(ref("a/b/c", "Deployment", "web", "d-uid")), ""},
		{"a ReplicaSet not in the cache", ref("apps/v1", "ReplicaSet", "web-2", "rs-uid"), rsOwned(ref("apps/v1", "Deployment", "web", "d-uid")), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1-abcde", OwnerReferences: c.podRefs}}
			get := func(name string) (*appsv1.ReplicaSet, error) {
				if name != c.rs.Name {
					return nil, errors.New("not found")
				}
				return c.rs, nil
			}
			rs, name, ok := DeploymentOfPod(pod, get)
			if name != c.want || ok != (c.want != "") || (ok && rs != c.rs) || (!ok && rs != nil) {
				t.Errorf("DeploymentOfPod = %v, %q, %v; want %q", rs, name, ok, c.want)
			}
		})
	}
}
