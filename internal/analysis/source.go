package analysis

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Source is what the Deployment controller takes EX-6's measurements with (its Analyzer): templates read from
// the API server (a GET of each named ConfigMap when a step's analysis syncs: no cache of every ConfigMap in the
// cluster) and measurements by a Measurer. Safe for concurrent use.
type Source struct {
	client   kubernetes.Interface
	measurer *Measurer
}

// NewSource returns a Source reading templates with client and querying p (whose Validate the caller checked).
func NewSource(client kubernetes.Interface, p Prometheus) *Source {
	return &Source{client: client, measurer: NewMeasurer(p)}
}

// Templates returns the metrics of the templates names in namespace, in order (Resolve). Errors: a template
// that does not exist (`analysis template "NAME": no such ConfigMap in namespace NS …`), cannot be read (the API
// error), or that Resolve refuses.
func (s *Source) Templates(ctx context.Context, namespace string, names []string, args []Arg) ([]Metric, error) {
	get := func(name string) (*corev1.ConfigMap, error) {
		cm, err := s.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no such ConfigMap in namespace %s (a template is a ConfigMap labelled %s: \"true\")", namespace, TemplateLabel)
		}
		return cm, err
	}
	return Resolve(names, get, args)
}

// Measure takes one measurement of m (Measurer.Measure).
func (s *Source) Measure(ctx context.Context, m Metric, args QueryArgs, pods []*corev1.Pod) Measurement {
	return s.measurer.Measure(ctx, m, args, pods)
}
