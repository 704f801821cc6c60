package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeletConfig is a client of the API server with a kubelet's identity
// for node: a client certificate for system:node:<node> in group
// system:nodes, signed by the cluster's CA, as a kubelet's is. The Node
// authorizer and NodeRestriction hold it to that node.
func (e *Env) KubeletConfig(node string) *rest.Config {
	e.T.Helper()
	certPEM, keyPEM := e.kubeletCert(node)
	c := rest.AnonymousClientConfig(e.Config)
	c.CertData, c.KeyData = certPEM, keyPEM
	c.CAData = e.caData()
	return c
}

// KubeletKubeconfig writes a kubeconfig with node's kubelet identity as
// kubeadm writes kubelet.conf (see KubeletFiles) into a temporary
// directory and returns its path.
func (e *Env) KubeletKubeconfig(node string) string {
	e.T.Helper()
	dir := e.T.TempDir()
	pemFile := filepath.Join(dir, "kubelet-client-current.pem")
	kubeconfig, certKey := e.KubeletFiles(node, pemFile)
	if err := os.WriteFile(pemFile, certKey, 0o600); err != nil {
		e.T.Fatal(err)
	}
	path := filepath.Join(dir, "kubelet.conf")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		e.T.Fatal(err)
	}
	return path
}

// KubeletFiles are a kubelet's kubeconfig for node and the client
// certificate and key it names by path pemFile, in one file, as kubeadm
// has them (/etc/kubernetes/kubelet.conf naming
// /var/lib/kubelet/pki/kubelet-client-current.pem, which a rotation
// replaces).
func (e *Env) KubeletFiles(node, pemFile string) (kubeconfig, certKey []byte) {
	e.T.Helper()
	certPEM, keyPEM := e.kubeletCert(node)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.caData()}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificate: pemFile, ClientKey: pemFile}
	cfg.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "kubelet"}
	cfg.CurrentContext = "kubelet"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	return b, append(certPEM, keyPEM...)
}

func (e *Env) caData() []byte {
	if len(e.Config.CAData) > 0 {
		return e.Config.CAData
	}
	b, err := os.ReadFile(e.Config.CAFile)
	if err != nil {
		e.T.Fatal(err)
	}
	return b
}

// kubeletCert is a client certificate and key for system:node:<node>,
// signed by the cluster's CA, valid for an hour.
func (e *Env) kubeletCert(node string) (certPEM, keyPEM []byte) {
	e.T.Helper()
	pki := filepath.Join(filepath.Dir(e.Kubeconfig), "pki")
	pair, err := tls.LoadX509KeyPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		e.T.Fatalf("the cluster's CA: %v", err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		e.T.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.T.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, pair.PrivateKey)
	if err != nil {
		e.T.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		e.T.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
