package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// otherCA returns the PEM of a CA certificate that signed nothing: a kubeconfig trusting only it trusts no
// httptest server, as a data dir's kubeconfig trusts only its own `up`.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another up's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// writeTLSKubeconfig writes dir/kubeconfig for a cluster at server whose CA is caPEM, and returns its path.
func writeTLSKubeconfig(t *testing.T, dir, server string, caPEM []byte) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	content := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\", certificate-authority-data: " +
		base64.StdEncoding.EncodeToString(caPEM) + "}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: x}}]\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestShardsExplainsAnotherCluster: `shards --data-dir D` whose address another cluster answers (its certificate
// from another CA: another `up` on the same port) or nothing answers says so and asks whether `up --data-dir D`
// runs; a kubeconfig given with --kubeconfig gets client-go's error alone (issue 44: x509 "unknown authority" and
// no hint).
func TestShardsExplainsAnotherCluster(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	other := httptest.NewTLSServer(http.NotFoundHandler())
	defer other.Close()
	stopped := httptest.NewServer(http.NotFoundHandler())
	stoppedURL := strings.Replace(stopped.URL, "http:", "https:", 1)
	stopped.Close() // its port refuses connections now
	anotherUp, downUp := t.TempDir(), t.TempDir()
	writeTLSKubeconfig(t, anotherUp, other.URL, otherCA(t))
	writeTLSKubeconfig(t, downUp, stoppedURL, otherCA(t))
	for _, tc := range []struct {
		name     string
		args     []string
		want     string
		wantNone string
	}{
		{"another cluster answers", []string{"shards", "--data-dir", anotherUp},
			"the API server at " + other.URL + " is not the cluster of data dir " + anotherUp + ": its certificate is not signed by that data dir's CA, " +
				"so another cluster answers at that address; is `kubedeploy up --data-dir " + anotherUp + "` running? (", ""},
		{"nothing answers", []string{"shards", "--data-dir", downUp},
			"nothing answers at " + stoppedURL + ", the API server of data dir " + downUp + ": is `kubedeploy up --data-dir " + downUp + "` running?", ""},
		{"--kubeconfig", []string{"shards", "--kubeconfig", filepath.Join(anotherUp, "kubeconfig")},
			"x509: certificate signed by unknown authority", "is not the cluster of data dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := execute(t, NewRootCommand(), tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.wantNone != "" && strings.Contains(err.Error(), tc.wantNone)) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// apiRecorder is an HTTP server that answers every request 503 and records the paths it was asked for.
type apiRecorder struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func newAPIRecorder(t *testing.T) *apiRecorder {
	r := &apiRecorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.mu.Unlock()
		http.Error(w, "not a cluster", http.StatusServiceUnavailable)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *apiRecorder) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

// TestObserveFindsUpsKubeconfig: `kubedeploy observe --once` without --kubeconfig reads the cluster of `up` as
// rollout and shards do: --data-dir's, else KUBECONFIG, else KUBEDEPLOY_DATA_DIR's, else ~/.kubedeploy's (issue
// 44: it read only KUBECONFIG, in-cluster and ~/.kube/config). Each cluster is a server that records what it was
// asked: --once fails on its answer at once, naming it.
func TestObserveFindsUpsKubeconfig(t *testing.T) {
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists on this machine", clientcmd.RecommendedHomeFile)
	}
	// Every case applies observe's (same) logging flags: the first one only would, in a process.
	reapply := logsapi.ReapplyHandling
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	t.Cleanup(func() { logsapi.ReapplyHandling = reapply })
	flagUp, envUp, homeUp := newAPIRecorder(t), newAPIRecorder(t), newAPIRecorder(t)
	flagDir, envDir, home := t.TempDir(), t.TempDir(), t.TempDir()
	writeKubeconfig(t, flagDir, flagUp.URL)
	writeKubeconfig(t, envDir, envUp.URL)
	writeKubeconfig(t, filepath.Join(home, ".kubedeploy"), homeUp.URL)
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		name                      string
		kubeconfigEnv, dataDirEnv string
		args                      []string
		want                      *apiRecorder
	}{
		{"~/.kubedeploy", "", "", nil, homeUp},
		{"KUBEDEPLOY_DATA_DIR", "", envDir, nil, envUp},
		{"KUBECONFIG", filepath.Join(envDir, "kubeconfig"), "", nil, envUp},
		{"--data-dir before KUBECONFIG", filepath.Join(envDir, "kubeconfig"), "", []string{"--data-dir", flagDir}, flagUp},
		{"--kubeconfig before --data-dir", "", "", []string{"--data-dir", envDir, "--kubeconfig", filepath.Join(flagDir, "kubeconfig")}, flagUp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfigEnv)
			t.Setenv(dataDirEnv, tc.dataDirEnv)
			before := len(tc.want.asked())
			_, err := execute(t, NewRootCommand(), append([]string{"observe", "--once"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), "reading the cluster at "+tc.want.URL) {
				t.Fatalf("error %v, want one reading %s", err, tc.want.URL)
			}
			if asked := tc.want.asked(); len(asked) == before {
				t.Errorf("%s was asked nothing", tc.want.URL)
			}
		})
	}
}
