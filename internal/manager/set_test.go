package manager

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestControllerSetLifecycle: a set is built from the table without reaching the API server, is not synced
// before its informers list, attaches the Deployment controller's companions (the unsupported-fields gauge
// reads its template store) only when the Deployment controller is in it, and Stop returns once its workers
// have (the API server here never answers) and detaches them.
func TestControllerSetLifecycle(t *testing.T) {
	for _, tc := range []struct {
		controllers    []string
		wantCompanions bool
	}{
		{KnownControllers, true},
		{[]string{ReplicaSetController}, false},
	} {
		cfg := Config{
			RESTConfig:  &rest.Config{Host: unusedServerURL(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
			Controllers: tc.controllers,
		}
		cfg.Default()
		ctx, cancel := context.WithCancel(context.Background())
		set, err := NewControllerSet(ctx, cfg)
		if err != nil {
			t.Fatalf("%v: NewControllerSet: %v", tc.controllers, err)
		}
		if got := len(set.ctrls); got != len(tc.controllers) {
			t.Errorf("%v: %d controllers built", tc.controllers, got)
		}
		if attached := len(unsupportedFields.stores.All()) != 0; attached != tc.wantCompanions {
			t.Errorf("%v: unsupported-fields gauge attached = %v, want %v", tc.controllers, attached, tc.wantCompanions)
		}
		set.Start(ctx)
		if set.HasSynced() {
			t.Errorf("%v: HasSynced before any list answered", tc.controllers)
		}
		stopped := make(chan struct{})
		go func() { set.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: Stop did not return", tc.controllers)
		}
		cancel()
		if len(unsupportedFields.stores.All()) != 0 {
			t.Errorf("%v: the unsupported-fields gauge still reads the stopped set's store", tc.controllers)
		}
	}
}
