package nodecmd

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/version"
)

// findKubeletKubeconfig resolves drain.kubeletKubeconfig: "" for none
// (none set, or auto and no candidate exists), else the path. A path set
// explicitly must exist.
func findKubeletKubeconfig(setting string, candidates []string) (string, error) {
	switch setting {
	case config.KubeletKubeconfigNone:
		return "", nil
	case config.KubeletKubeconfigAuto:
		for _, p := range candidates {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			} else if !errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("drain.kubeletKubeconfig: %s cannot be read: %w; set drain.kubeletKubeconfig to the kubelet's kubeconfig, or none", p, err)
			}
		}
		return "", nil
	}
	if _, err := os.Stat(setting); err != nil {
		return "", fmt.Errorf("drain.kubeletKubeconfig: %s cannot be read: %w; give the kubelet's kubeconfig, auto or none", setting, err)
	}
	return setting, nil
}

// kubeletClient is a client with the kubelet's identity, from its
// kubeconfig. client-go re-reads client certificate files (a kubeadm
// kubelet.conf names /var/lib/kubelet/pki/kubelet-client-current.pem) when
// the kubelet rotates them.
func kubeletClient(path string) (kubernetes.Interface, error) {
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("drain.kubeletKubeconfig %s: %w", path, err)
	}
	c.UserAgent = "kustodian-agent/" + version.Version + " (kubelet identity)"
	c.QPS, c.Burst = 50, 100
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("drain.kubeletKubeconfig %s: %w", path, err)
	}
	return k, nil
}
