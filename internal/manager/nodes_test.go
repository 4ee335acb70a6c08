package manager

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A cluster whose kubedeploy RBAC predates EX-4 (no list on nodes) turns the node informer off instead of
// leaving the ReplicaSet controller waiting for a cache that cannot fill; other errors are left to the
// informer's retries.
func TestNodesReadable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"allowed", nil, true},
		{"forbidden", apierrors.NewForbidden(v1.Resource("nodes"), "", errors.New("RBAC: no rule")), false},
		{"unavailable", apierrors.NewServiceUnavailable("etcd is restarting"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
				return tc.err != nil, nil, tc.err
			})
			if got := nodesReadable(context.Background(), client); got != tc.want {
				t.Errorf("nodesReadable = %v, want %v", got, tc.want)
			}
		})
	}
}
