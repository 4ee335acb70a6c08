package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

const (
	// leafValidity is how long generated serving and client certificates are valid.
	leafValidity = 365 * 24 * time.Hour
	// renewBefore: a stored leaf certificate expiring sooner than this is regenerated at Start.
	renewBefore = 7 * 24 * time.Hour
	// adminUser is the CN of the admin client certificate written to <data-dir>/kubeconfig.
	adminUser = "kubedeploy-admin"
	// mastersGroup is the group that RBAC grants everything to.
	mastersGroup = "system:masters"
)

// certSpec describes one certificate signed by the cluster CA. It is pure data.
type certSpec struct {
	name   string // file base name under pki/: <name>.crt and <name>.key
	cn     string
	orgs   []string
	server bool
	dns    []string
	ips    []net.IP
}

// pkiSpecs lists every certificate the control plane needs, in a fixed order.
func pkiSpecs() []certSpec {
	return []certSpec{
		{
			name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceClusterIP)},
		},
		{name: "admin", cn: adminUser, orgs: []string{mastersGroup}},
		{name: "controller-manager", cn: "system:kube-controller-manager"},
		{name: "scheduler", cn: "system:kube-scheduler"},
		{name: "kwok", cn: "kubedeploy:kwok-controller", orgs: []string{mastersGroup}},
	}
}

// pki is the loaded (or freshly created) cluster CA plus the paths of everything under <data-dir>/pki.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// caFile is the cluster CA certificate; it signs every serving and client certificate.
func (p *pki) caFile() string { return p.path("ca.crt") }

// saKeyFile and saPubFile are the service-account token signing key pair.
func (p *pki) saKeyFile() string { return p.path("sa.key") }
func (p *pki) saPubFile() string { return p.path("sa.pub") }

func (p *pki) certFile(name string) string { return p.path(name + ".crt") }
func (p *pki) keyFile(name string) string  { return p.path(name + ".key") }

// ensurePKI loads the CA, the service-account key pair and every certificate of pkiSpecs from dir, creating those
// that are missing, unreadable, not signed by the CA or close to expiry. Keys are written with mode 0600.
func ensurePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	p := &pki{dir: dir}
	if err := p.ensureCA(); err != nil {
		return nil, err
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return nil, err
	}
	for _, spec := range pkiSpecs() {
		if err := p.ensureCert(spec); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pki) ensureCA() error {
	certs, certErr := certutil.CertsFromFile(p.caFile())
	key, keyErr := keyutil.PrivateKeyFromFile(p.keyFile("ca"))
	if certErr == nil && keyErr == nil {
		signer, ok := key.(crypto.Signer)
		if !ok {
			return fmt.Errorf("ca key %s is not a signing key", p.keyFile("ca"))
		}
		p.caCert, p.caKey = certs[0], signer
		p.caPEM, _ = os.ReadFile(p.caFile())
		return nil
	}
	if !errors.Is(certErr, os.ErrNotExist) && certErr != nil {
		return fmt.Errorf("read ca certificate: %w", certErr)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate ca key: %w", err)
	}
	caCert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "kubedeploy-ca"}, caKey)
	if err != nil {
		return fmt.Errorf("generate ca certificate: %w", err)
	}
	p.caCert, p.caKey = caCert, caKey
	p.caPEM = encodeCertPEM(caCert)
	if err := writeKey(p.keyFile("ca"), caKey); err != nil {
		return err
	}
	return writeFileAtomic(p.caFile(), p.caPEM, 0o644)
}

func (p *pki) ensureServiceAccountKey() error {
	if _, err := keyutil.PrivateKeyFromFile(p.saKeyFile()); err == nil {
		if _, err := keyutil.PublicKeysFromFile(p.saPubFile()); err == nil {
			return nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encode service account public key: %w", err)
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if err := writeKey(p.saKeyFile(), key); err != nil {
		return err
	}
	return writeFileAtomic(p.saPubFile(), pub, 0o644)
}

// ensureCert keeps a stored certificate that the CA signed and that is not close to expiry, else regenerates it.
func (p *pki) ensureCert(spec certSpec) error {
	if p.storedCertValid(spec) {
		return nil
	}
	certPEM, key, err := p.issue(spec)
	if err != nil {
		return err
	}
	if err := writeKey(p.keyFile(spec.name), key); err != nil {
		return err
	}
	return writeFileAtomic(p.certFile(spec.name), certPEM, 0o644)
}

func (p *pki) storedCertValid(spec certSpec) bool {
	certs, err := certutil.CertsFromFile(p.certFile(spec.name))
	if err != nil {
		return false
	}
	if _, err := keyutil.PrivateKeyFromFile(p.keyFile(spec.name)); err != nil {
		return false
	}
	c := certs[0]
	if c.Subject.CommonName != spec.cn || time.Until(c.NotAfter) < renewBefore {
		return false
	}
	return c.CheckSignatureFrom(p.caCert) == nil
}

// issue creates a new key and a certificate for spec signed by the CA, returning the certificate PEM.
func (p *pki) issue(spec certSpec) ([]byte, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %s: %w", spec.name, err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64))
	if err != nil {
		return nil, nil, fmt.Errorf("generate serial for %s: %w", spec.name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		DNSNames:              spec.dns,
		IPAddresses:           spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %s: %w", spec.name, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse certificate for %s: %w", spec.name, err)
	}
	return encodeCertPEM(c), key, nil
}

// clientCertPEM issues an in-memory client certificate for user (CN) and groups (O) signed by the CA and returns
// the certificate and key PEM.
func (p *pki) clientCertPEM(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	certPEM, key, err := p.issue(certSpec{name: user, cn: user, orgs: groups})
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key for %s: %w", user, err)
	}
	return certPEM, keyPEM, nil
}

func encodeCertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: c.Raw})
}

func writeKey(path string, key crypto.Signer) error {
	b, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	return writeFileAtomic(path, b, 0o600)
}

// writeFileAtomic writes data to a temporary file in the same directory with mode perm and renames it over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }()
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
