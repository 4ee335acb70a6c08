package rollout

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
)

// manifests are the Deployments and ReplicaSets read from -f, in order, as
// written (unstructured: a field this build does not know is kept for the
// API server to judge).
type manifests struct {
	deployments []manifest
	replicaSets []manifest
}

// manifest is one object of a -f file.
type manifest struct {
	obj *unstructured.Unstructured
	// source is the file it came from ("STDIN" for -).
	source string
}

// readManifests reads files with cli-runtime's resource builder, as kubectl
// reads -f: YAML or JSON, several documents, List kinds unpacked, "-" for
// the standard input, directories by their .yaml/.yml/.json files; nothing
// is asked of a server. Anything but apps/v1 Deployments and ReplicaSets is
// an error naming the file and the kind.
func readManifests(files []string) (manifests, error) {
	var m manifests
	if len(files) == 0 {
		return m, nil
	}
	infos, err := resource.NewLocalBuilder().Unstructured().
		FilenameParam(false, &resource.FilenameOptions{Filenames: files}).
		Flatten().Do().Infos()
	if err != nil {
		return m, err
	}
	for _, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return m, fmt.Errorf("%s: %T is not an object", info.Source, info.Object)
		}
		switch u.GroupVersionKind() {
		case appsv1.SchemeGroupVersion.WithKind("Deployment"):
			m.deployments = append(m.deployments, manifest{u, info.Source})
		case appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):
			m.replicaSets = append(m.replicaSets, manifest{u, info.Source})
		default:
			return m, fmt.Errorf("%s: %s %s is not an apps/v1 Deployment or ReplicaSet", info.Source, u.GetAPIVersion(), u.GetKind())
		}
	}
	return m, nil
}

// typed converts a manifest to its apps/v1 type; a field the type does not
// have is an error naming the file (the manifest would not go through an
// API server of this version either).
func typed[T any, PT interface {
	*T
	runtime.Object
}](m manifest) (PT, error) {
	obj := PT(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m.obj.Object, obj, true); err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", m.source, m.obj.GetKind(), m.obj.GetName(), err)
	}
	return obj, nil
}

// pick returns the Deployment manifests named name (any name when ""); more
// than one name among them is an error asking for deploy/NAME.
func (m manifests) pick(name string) ([]manifest, error) {
	var out []manifest
	names := map[string]bool{}
	for _, d := range m.deployments {
		if name == "" || d.obj.GetName() == name {
			out = append(out, d)
			names[d.obj.GetName()] = true
		}
	}
	if len(names) > 1 {
		return nil, errors.New("the manifests hold several Deployments: name one, deploy/NAME")
	}
	return out, nil
}
