package controlplane

import (
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "sigs.k8s.io/kwok/pkg/kwok/controllers"
	_ "k8s.io/kubectl/pkg/cmd"
	_ "github.com/spf13/cobra"
)
