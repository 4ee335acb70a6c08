package controlplane

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"time"

	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

// stageFiles holds KWOK's node and pod stages as data; see stages/*.yaml.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

const (
	// StagePodReady is the stage that makes a scheduled pod Running and Ready.
	StagePodReady = "pod-ready"
	// StagePodImagePullBackOff is the stage that keeps a pod with an image tag "broken*" or "404" Pending in
	// ImagePullBackOff.
	StagePodImagePullBackOff = "pod-image-pull-backoff"
	// StagePodComplete is the stage that makes a Ready pod owned by a Job succeed (phase Succeeded).
	StagePodComplete = "pod-complete"
	// StagePodCrashLoopCrash is the stage that crashes a Running and Ready pod's containers whose image tag
	// starts with "crashloop" CrashLoopRunTime after it became Ready: each one's restartCount goes up by one and it
	// waits in CrashLoopBackOff (last state: terminated, exit code 1, reason Error), so the pod is not Ready.
	StagePodCrashLoopCrash = "pod-crashloop-crash"
	// StagePodCrashLoopRestart is the stage that starts a pod's containers waiting in CrashLoopBackOff again,
	// Config.PodStartupDelay after they crashed, making the pod Ready again with their restartCount kept.
	StagePodCrashLoopRestart = "pod-crashloop-restart"
	// StagePodDelete is the stage that removes a pod with a deletionTimestamp.
	StagePodDelete = "pod-delete"
	// StageNodeInitialize makes a fake node Ready.
	StageNodeInitialize = "node-initialize"
	// StageNodeHeartbeat keeps a fake node's conditions fresh (its Lease is renewed separately).
	StageNodeHeartbeat = "node-heartbeat-with-lease"
)

// CrashLoopRunTime is how long a container whose image tag starts with "crashloop" runs, Ready, before it crashes
// (StagePodCrashLoopCrash); it is not Ready again until Config.PodStartupDelay later (StagePodCrashLoopRestart),
// so its restartCount goes up by one every CrashLoopRunTime + PodStartupDelay (6 s with `up`'s default 1 s).
const CrashLoopRunTime = 5 * time.Second

var (
	nodeStageRef = internalversion.StageResourceRef{APIGroup: "v1", Kind: "Node"}
	podStageRef  = internalversion.StageResourceRef{APIGroup: "v1", Kind: "Pod"}
)

// stages decodes the embedded stage files and sets the pod stages' delays: PodStartupDelay for pod-ready,
// pod-image-pull-backoff, pod-complete and pod-crashloop-restart, CrashLoopRunTime for pod-crashloop-crash,
// PodTerminationDelay for pod-delete (milliseconds, no jitter). It returns them grouped by resource, as KWOK's
// controller expects, each group sorted by name.
func stages(podStartupDelay, podTerminationDelay time.Duration) (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	entries, err := stageFiles.ReadDir("stages")
	if err != nil {
		return nil, fmt.Errorf("read embedded stages: %w", err)
	}
	delays := map[string]time.Duration{
		StagePodReady:            podStartupDelay,
		StagePodImagePullBackOff: podStartupDelay,
		StagePodComplete:         podStartupDelay,
		StagePodCrashLoopRestart: podStartupDelay,
		StagePodCrashLoopCrash:   CrashLoopRunTime,
		StagePodDelete:           podTerminationDelay,
	}
	out := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, e := range entries {
		data, err := stageFiles.ReadFile(path.Join("stages", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read embedded stage %s: %w", e.Name(), err)
		}
		stage, err := decodeStage(data)
		if err != nil {
			return nil, fmt.Errorf("decode embedded stage %s: %w", e.Name(), err)
		}
		if d, ok := delays[stage.Name]; ok {
			stage.Spec.Delay = &internalversion.StageDelay{DurationMilliseconds: new(d.Milliseconds())}
		}
		ref := stage.Spec.ResourceRef
		out[ref] = append(out[ref], stage)
	}
	for _, group := range out {
		slices.SortFunc(group, func(a, b *internalversion.Stage) int {
			switch {
			case a.Name < b.Name:
				return -1
			case a.Name > b.Name:
				return 1
			}
			return 0
		})
	}
	return out, nil
}

// decodeStage decodes one v1alpha1 Stage from YAML and converts it to KWOK's internal version, as KWOK's own
// config loader does (we avoid importing that loader: it pulls in image and download code we do not need).
func decodeStage(data []byte) (*internalversion.Stage, error) {
	var v1 v1alpha1.Stage
	if err := yaml.UnmarshalStrict(data, &v1); err != nil {
		return nil, err
	}
	if v1.Kind != v1alpha1.StageKind {
		return nil, fmt.Errorf("kind %q is not %s", v1.Kind, v1alpha1.StageKind)
	}
	return internalversion.ConvertToInternalStage(&v1)
}
