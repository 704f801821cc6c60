package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/rollout"
)

// errNotYet: a rollout's ConfigMap (or its key) is not there yet; the
// rollout is looked at again later, nothing is reported.
var errNotYet = errors.New("not there yet")

// refusal is why a host refuses a rollout: it is reported, and the
// revision is not run here.
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

// checkRollout checks a rollout this host is to run: its spec, its
// signature by a trusted key, and every script's and file's digest. It
// returns the contents by name (the scripts as rollout.ScriptName and
// rollout.RollbackName).
func (ro *rollouter) checkRollout(ctx context.Context, r *rollout.MaintenanceRollout) (map[string][]byte, error) {
	if err := rollout.Check(r.Name, r.Spec); err != nil {
		return nil, &refusal{err.Error()}
	}
	keys, err := rollout.ReadTrustedKeys(ro.cfg.TrustedKeys)
	if err != nil {
		return nil, &refusal{"this host's trusted keys: " + err.Error()}
	}
	if _, err := rollout.Verify(r.Spec.Signature, []byte(rollout.Manifest(r.Namespace, r.Name, r.Spec)), keys); err != nil {
		return nil, &refusal{err.Error()}
	}
	if r.Spec.Patch != nil {
		// What runs is this host's own package manager, on its own
		// repositories: nothing to read from the cluster.
		return map[string][]byte{}, checkPatchHost()
	}
	out := map[string][]byte{}
	get := func(name, field string, src rollout.Source) error {
		b, err := ro.rolloutSource(ctx, r.Namespace, field, src)
		if err != nil {
			return err
		}
		if got := rollout.SHA256(b); !strings.EqualFold(got, src.SHA256) {
			return &refusal{fmt.Sprintf("%s: its SHA-256 is %s, not %s as signed", field, got, strings.ToLower(src.SHA256))}
		}
		out[name] = b
		return nil
	}
	if err := get(rollout.ScriptName, "spec.script", r.Spec.Script); err != nil {
		return nil, err
	}
	if rb := r.Spec.RollbackScript; rb != nil {
		if err := get(rollout.RollbackName, "spec.rollbackScript", *rb); err != nil {
			return nil, err
		}
	}
	for i, f := range r.Spec.Files {
		if err := get(f.Name, fmt.Sprintf("spec.files[%d]", i), f.Source); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rolloutSource reads a script's or file's bytes.
func (ro *rollouter) rolloutSource(ctx context.Context, ns, field string, src rollout.Source) ([]byte, error) {
	if src.ConfigMap == nil {
		return []byte(src.Inline), nil
	}
	cm, err := ro.kube.CoreV1().ConfigMaps(ns).Get(ctx, src.ConfigMap.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s: ConfigMap %s/%s: %w", field, ns, src.ConfigMap.Name, errNotYet)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading ConfigMap %s/%s: %w", field, ns, src.ConfigMap.Name, err)
	}
	if v, ok := cm.Data[src.ConfigMap.Key]; ok {
		return []byte(v), nil
	}
	if v, ok := cm.BinaryData[src.ConfigMap.Key]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("%s: ConfigMap %s/%s has no key %s: %w", field, ns, src.ConfigMap.Name, src.ConfigMap.Key, errNotYet)
}

// writeRolloutFiles puts a revision's scripts and files in a directory of
// its own under the state directory, whole: written under a temporary name,
// then renamed into place.
func (ro *rollouter) writeRolloutFiles(name, rev string, files map[string][]byte) (string, error) {
	base := filepath.Join(ro.stateDir, "rollouts")
	dir := filepath.Join(base, name+"-"+rev)
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("rollout %s: %w", name, err)
	}
	for n, b := range files {
		mode := os.FileMode(0o600)
		if n == rollout.ScriptName || n == rollout.RollbackName {
			mode = 0o700
		}
		if err := os.WriteFile(filepath.Join(tmp, n), b, mode); err != nil {
			return "", fmt.Errorf("rollout %s: %w", name, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("rollout %s: %w", name, err)
	}
	return dir, nil
}
