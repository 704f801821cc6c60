package nodecmd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func TestFindKubeletKubeconfig(t *testing.T) {
	dir := t.TempDir()
	missing, second, third := filepath.Join(dir, "kubelet.conf"), filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "k3s.kubeconfig")
	for _, p := range []string{second, third} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	candidates := []string{missing, second, third}
	for _, tc := range []struct {
		setting    string
		candidates []string
		want       string
		err        string
	}{
		{setting: "auto", candidates: candidates, want: second},
		{setting: "auto", candidates: []string{missing}, want: ""},
		{setting: "none", candidates: candidates, want: ""},
		{setting: third, candidates: nil, want: third},
		{setting: missing, candidates: candidates, err: "drain.kubeletKubeconfig: " + missing + " cannot be read"},
	} {
		got, err := findKubeletKubeconfig(tc.setting, tc.candidates)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.setting, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s over %v: %q %v, want %q", tc.setting, tc.candidates, got, err, tc.want)
		}
	}
}

// A kubelet kubeconfig naming its certificate by path (kubeadm's names
// /var/lib/kubelet/pki/kubelet-client-current.pem) keeps the path in the
// client's configuration: client-go then re-reads the file, so a rotated
// certificate is picked up. Inlined data would be read once.
func TestKubeletKubeconfigKeepsCertificatePaths(t *testing.T) {
	dir := t.TempDir()
	certFile := filepath.Join(dir, "kubelet-client-current.pem")
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	if err := os.WriteFile(certFile, selfSigned(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {client-certificate: `+certFile+`, client-key: `+certFile+`}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if c.CertFile != certFile || c.KeyFile != certFile || len(c.CertData) != 0 {
		t.Errorf("CertFile %q KeyFile %q CertData %d bytes: the certificate would not be re-read", c.CertFile, c.KeyFile, len(c.CertData))
	}
	if _, err := kubeletClient(kubeconfig); err != nil {
		t.Errorf("kubeletClient: %v", err)
	}
}

// selfSigned is a client certificate and its key, in one PEM file.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:n1"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
}
