package controlplane

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigContext is the cluster, user and context name used in every kubeconfig we write.
const kubeconfigContext = "kubedeploy"

// kubeconfigFor builds a kubeconfig for server that trusts caPEM and authenticates with the given client
// certificate and key files. It is pure.
func kubeconfigFor(server string, caPEM []byte, certFile, keyFile string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigContext] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[kubeconfigContext] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts[kubeconfigContext] = &clientcmdapi.Context{Cluster: kubeconfigContext, AuthInfo: kubeconfigContext}
	cfg.CurrentContext = kubeconfigContext
	return cfg
}

// writeKubeconfig serialises cfg with clientcmd and writes it atomically with mode 0600.
func writeKubeconfig(path string, cfg *clientcmdapi.Config) error {
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig %s: %w", path, err)
	}
	return writeFileAtomic(path, data, 0o600)
}

// embedCertificates returns a copy of cfg whose client certificate and key are inlined, so the file works when
// copied elsewhere (the admin kubeconfig).
func embedCertificates(cfg *clientcmdapi.Config) (*clientcmdapi.Config, error) {
	out := cfg.DeepCopy()
	for name, auth := range out.AuthInfos {
		if auth.ClientCertificate != "" {
			b, err := os.ReadFile(auth.ClientCertificate)
			if err != nil {
				return nil, fmt.Errorf("read client certificate for %s: %w", name, err)
			}
			auth.ClientCertificateData, auth.ClientCertificate = b, ""
		}
		if auth.ClientKey != "" {
			b, err := os.ReadFile(auth.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("read client key for %s: %w", name, err)
			}
			auth.ClientKeyData, auth.ClientKey = b, ""
		}
	}
	return out, nil
}

// restConfigFor turns a kubeconfig into a rest.Config.
func restConfigFor(cfg *clientcmdapi.Config) (*rest.Config, error) {
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("build client config: %w", err)
	}
	return rc, nil
}
