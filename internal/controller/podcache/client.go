package podcache

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// NewClient returns a clientset for the pod informers: its CoreV1 speaks protobuf to the API server (JSON when the
// server answers nothing else) and decodes Pods and PodLists with only the fields Transform keeps (issue 48), so a
// pod event costs the decoding of those fields, not of the whole pod. Use it only for lists and watches whose
// pods go through Transform: its pods lack every other field. Its other groups are not for use. cfg is copied, its
// rate limiter (if set) shared. The error is rest.RESTClientFor's (a configuration it rejects).
func NewClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1.SchemeGroupVersion
	c.APIPath = "/api"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = partialSerializer{rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building the core/v1 client of the pod informers: %w", err)
	}
	return kubernetes.New(rc), nil
}
