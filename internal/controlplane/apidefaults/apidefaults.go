// Package apidefaults sets the defaults kube-apiserver sets on apps/v1
// objects it stores (VA-1: replicas 1, RollingUpdate 25%/25%,
// revisionHistoryLimit 10, progressDeadlineSeconds 600, and every pod
// template default: restartPolicy, dnsPolicy, terminationMessagePath, ...),
// by calling the API server's own generated defaulters from the
// k8s.io/kubernetes version kubedeploy embeds, so that a manifest that never
// went through an API server (`rollout plan --local`) is read as one that
// did, pod-template-hash included.
//
// It lives under internal/controlplane because only that tree may import
// k8s.io/kubernetes; it starts nothing and reads nothing.
package apidefaults

import (
	appsv1 "k8s.io/api/apps/v1"
	appsdefaults "k8s.io/kubernetes/pkg/apis/apps/v1"
)

// Deployment sets, in place, every default kube-apiserver sets on an
// apps/v1 Deployment it stores; fields already set are kept.
func Deployment(d *appsv1.Deployment) {
	appsdefaults.SetObjectDefaults_Deployment(d)
}

// ReplicaSet sets, in place, every default kube-apiserver sets on an
// apps/v1 ReplicaSet it stores (replicas 1 and the pod template's);
// fields already set are kept.
func ReplicaSet(rs *appsv1.ReplicaSet) {
	appsdefaults.SetObjectDefaults_ReplicaSet(rs)
}
