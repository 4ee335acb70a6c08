package replicaset

import (
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func TestNewValidatesConfig(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if _, err := New(ctx, Config{BurstReplicas: -1}); err == nil || !strings.Contains(err.Error(), "Client is required") || !strings.Contains(err.Error(), "BurstReplicas") {
		t.Errorf("err = %v", err)
	}
}
