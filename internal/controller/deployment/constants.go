package deployment

import (
	appsv1 "k8s.io/api/apps/v1"
)

// Limits.
const (
	// maxRevisionHistoryLength caps rolloutstate.RevisionHistoryAnnotation, in characters (RV-6).
	maxRevisionHistoryLength = 2000
)

// Event reasons emitted on Deployments (section 17) and condition reasons
// (ST-4, ST-13, ST-17, SD-6, RV-3, RV-12, RV-13); the reasons that end or
// hold a rollout are rolloutstate's.
const (
	// SelectingAll is the Warning event reason for an empty selector (SD-2).
	SelectingAll = "SelectingAll"
	// UnsupportedDeploymentField is the Warning event reason for a Deployment
	// with spec fields kubedeploy's API does not know, which it does not
	// manage (IM-8).
	UnsupportedDeploymentField = "UnsupportedDeploymentField"
	// ScalingReplicaSet is the Normal event reason for every ReplicaSet size
	// change (RU-15, RV-13).
	ScalingReplicaSet = "ScalingReplicaSet"
	// ReplicaSetCreateError is both the Warning event reason and the
	// Progressing=False condition reason when creating the new ReplicaSet
	// fails (RV-12).
	ReplicaSetCreateError = "ReplicaSetCreateError"
	// NewReplicaSetCreated is the Progressing=True reason after the new
	// ReplicaSet was created (RV-13).
	NewReplicaSetCreated = "NewReplicaSetCreated"
	// FoundNewReplicaSet is the Progressing=True reason when an existing new
	// ReplicaSet is found and no Progressing condition exists (RV-3).
	FoundNewReplicaSet = "FoundNewReplicaSet"
	// ReplicaSetUpdated is the Progressing=True reason while a rollout makes
	// progress (ST-13).
	ReplicaSetUpdated = "ReplicaSetUpdated"
	// DeploymentPaused is the Progressing=Unknown reason while paused (SD-6).
	DeploymentPaused = "DeploymentPaused"
	// DeploymentResumed is the Progressing=Unknown reason after a resume (SD-6).
	DeploymentResumed = "DeploymentResumed"
	// MinimumReplicasAvailable is the Available=True reason (ST-4).
	MinimumReplicasAvailable = "MinimumReplicasAvailable"
	// MinimumReplicasUnavailable is the Available=False reason (ST-4).
	MinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	// RollbackRevisionNotFound is the Warning event reason when the rollback
	// target does not exist (RB-3, RB-4).
	RollbackRevisionNotFound = "DeploymentRollbackRevisionNotFound"
	// RollbackTemplateUnchanged is the Warning event reason when the rollback
	// target has the current template (RB-7).
	RollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	// RollbackDone is the Normal event reason after a rollback (RB-5).
	RollbackDone = "DeploymentRollback"
)

// Messages with fixed text (section 17, ST-4, SD-6).
const (
	selectingAllMessage       = "This deployment is selecting all pods. A non-empty selector is required."
	minimumAvailableMessage   = "Deployment has minimum availability."
	minimumUnavailableMessage = "Deployment does not have minimum availability."
	pausedMessage             = "Deployment is paused"
	resumedMessage            = "Deployment is resumed"
)

// controllerKind is the GroupVersionKind written in ControllerRefs (OM-24).
var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")
