package controlplane

import (
	"bytes"
	"crypto/x509"
	"net"
	"os"
	"slices"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

func TestEnsurePKICreatesAndReuses(t *testing.T) {
	dir := t.TempDir()
	p, err := ensurePKI(dir)
	if err != nil {
		t.Fatalf("ensurePKI: %v", err)
	}
	files := []string{"ca", "sa", "apiserver", "admin", "controller-manager", "scheduler", "kwok"}
	before := map[string][]byte{}
	for _, name := range files {
		key := p.keyFile(name)
		info, err := os.Stat(key)
		if err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("key %s mode = %o, want 600", key, info.Mode().Perm())
		}
		before[name], _ = os.ReadFile(key)
	}

	serving, err := certutil.CertsFromFile(p.certFile("apiserver"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := serving[0].Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("serving cert not valid for %s: %v", host, err)
		}
	}
	if !slices.ContainsFunc(serving[0].IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("127.0.0.1")) }) {
		t.Errorf("serving cert IPs = %v", serving[0].IPAddresses)
	}
	admin, _ := certutil.CertsFromFile(p.certFile("admin"))
	if admin[0].Subject.CommonName != "kubedeploy-admin" || !slices.Equal(admin[0].Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject = %v", admin[0].Subject)
	}
	if _, err := admin[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin cert not a client cert of the CA: %v", err)
	}

	again, err := ensurePKI(dir)
	if err != nil {
		t.Fatalf("ensurePKI again: %v", err)
	}
	if !again.caCert.Equal(p.caCert) {
		t.Errorf("CA regenerated on reuse")
	}
	for _, name := range files {
		after, _ := os.ReadFile(again.keyFile(name))
		if !bytes.Equal(before[name], after) {
			t.Errorf("key %s regenerated on reuse", name)
		}
	}
}

func TestClientCertPEM(t *testing.T) {
	p, err := ensurePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := p.clientCertPEM("kubedeploy:deployment-controller", []string{"kubedeploy:controllers"})
	if err != nil {
		t.Fatal(err)
	}
	if len(keyPEM) == 0 {
		t.Fatal("empty key")
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.Subject.CommonName != "kubedeploy:deployment-controller" || !slices.Equal(c.Subject.Organization, []string{"kubedeploy:controllers"}) {
		t.Errorf("subject = %v", c.Subject)
	}
	if err := c.CheckSignatureFrom(p.caCert); err != nil {
		t.Errorf("not signed by CA: %v", err)
	}
}

func TestNodeFake(t *testing.T) {
	n := fakeNode(2, 1)
	if n.Name != "kwok-node-2" || n.Labels["type"] != "kwok" || n.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Errorf("node meta = %+v", n.ObjectMeta)
	}
	if pods := n.Status.Allocatable.Pods().Value(); pods < 1000 {
		t.Errorf("allocatable pods = %d", pods)
	}
	if cpu := n.Status.Capacity.Cpu().Value(); cpu != 1000 {
		t.Errorf("cpu = %d", cpu)
	}
}
