package ctl

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/status"
)

// The Kubernetes minors Kustodian supports: the oldest and the newest are
// the ones its tests run against (make test: the newest; make
// test-oldest, part of it: the oldest).
const (
	OldestKubeMinor = 34
	NewestKubeMinor = 37
)

// supportedServer refuses an API server older than OldestKubeMinor, with
// one line naming its version.
func supportedServer(client kubernetes.Interface) error {
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return status.Explain(err, "get", "version", "")
	}
	major, errMajor := strconv.Atoi(strings.TrimRight(v.Major, "+"))
	// Some providers say "34+".
	minor, errMinor := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if errMajor != nil || errMinor != nil {
		return fmt.Errorf("the API server says it is Kubernetes %q (major %q, minor %q), which Kustodian cannot read; it needs 1.%d or newer", v.GitVersion, v.Major, v.Minor, OldestKubeMinor)
	}
	if major < 1 || major == 1 && minor < OldestKubeMinor {
		return fmt.Errorf("the API server is Kubernetes %s; Kustodian needs 1.%d or newer (tested with 1.%d and 1.%d): upgrade the cluster first", v.GitVersion, OldestKubeMinor, OldestKubeMinor, NewestKubeMinor)
	}
	return nil
}
