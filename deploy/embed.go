// Package deploy holds the manifests that run kubedeploy's controllers in a
// cluster (namespace, ServiceAccount, least-privilege RBAC, a StatefulSet and
// its headless Service) and embeds them, so `kubedeploy up` can bind its
// controllers to exactly these roles; and, in deploy/observe, those of
// observe mode (read-only). It must not hold anything but those manifests and the code to decode
// and apply them.
package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Namespace, ServiceAccount and the user name the controllers run as.
const (
	Namespace      = "kubedeploy-system"
	ServiceAccount = "kubedeploy"
	// User is the ServiceAccount's user name; `kubedeploy up` issues a client
	// certificate for it so the RoleBindings below apply unchanged.
	User = "system:serviceaccount:" + Namespace + ":" + ServiceAccount
)

//go:embed *.yaml observe/*.yaml sharded/*.yaml
var manifests embed.FS

// Files returns the names of the embedded manifests of the controllers, in apply order.
func Files() []string { return files("*.yaml") }

// ObserveFiles returns the names of the embedded manifests of observe mode (deploy/observe: a read-only
// ClusterRole, its ServiceAccount and binding, a Deployment running `kubedeploy-controllers observe`), in apply
// order.
func ObserveFiles() []string { return files("observe/*.yaml") }

// ShardedFiles returns the names of the embedded manifests of sharded mode (deploy/sharded: the Role for the
// ring and the replicas' Leases, the ClusterRole for listing namespaces, their bindings, and a StatefulSet running
// `kubedeploy-controllers --sharding`), in apply order. They add to Files' identity and RBAC; its StatefulSet is
// replaced, never joined.
func ShardedFiles() []string { return files("sharded/*.yaml") }

func files(pattern string) []string {
	names, _ := fs.Glob(manifests, pattern) // the patterns are valid
	sort.Strings(names)
	return names
}

// Objects decodes every embedded manifest of the controllers with client-go's scheme, in file order then
// document order. It returns an error naming the file of a document that does not decode.
func Objects() ([]runtime.Object, error) { return objects(Files()) }

// ObserveObjects decodes observe mode's manifests as Objects decodes the controllers'.
func ObserveObjects() ([]runtime.Object, error) { return objects(ObserveFiles()) }

// ShardedObjects decodes sharded mode's manifests as Objects decodes the controllers'.
func ShardedObjects() ([]runtime.Object, error) { return objects(ShardedFiles()) }

func objects(names []string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, name := range names {
		data, err := manifests.ReadFile(name)
		if err != nil {
			return nil, err
		}
		objs, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("deploy/%s: %w", name, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decode(data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// stripComments drops whole-line YAML comments, to detect empty documents.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
