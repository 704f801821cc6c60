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
)

// KubeletConfig is a client of the API server with a kubelet's identity
// for node: a client certificate for system:node:<node> in group
// system:nodes, signed by the cluster's CA, as a kubelet's is. The Node
// authorizer and NodeRestriction hold it to that node.
func (e *Env) KubeletConfig(node string) *rest.Config {
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
	c := rest.AnonymousClientConfig(e.Config)
	c.CertData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	c.KeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if len(c.CAData) == 0 && c.CAFile != "" {
		if c.CAData, err = os.ReadFile(c.CAFile); err != nil {
			e.T.Fatal(err)
		}
	}
	return c
}
