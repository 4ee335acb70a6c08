// Command upstreamkcm is upstream kube-controller-manager, built from the
// k8s.io/kubernetes version kubedeploy embeds, for measurements that run it
// beside kubedeploy's controllers as a separate process (the RSS benchmark in
// test/e2e). It is test-only: nothing ships it, and it lives under
// internal/controlplane because only that tree may import k8s.io/kubernetes.
// It takes kube-controller-manager's own flags, e.g.
//
//	upstreamkcm --kubeconfig=<path> --controllers=deployment-controller,replicaset-controller --leader-elect=false --secure-port=0
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
