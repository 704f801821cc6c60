package nodecreds

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// RolloutKey is an admin's key for signing MaintenanceRollouts: the
// private key's file (kustodian-ctl rollout create --key) and a file with
// its public half as hosts trust it (rollouts.trustedKeys).
type RolloutKey struct {
	Private, Trusted string
	// Public is the trusted file's line.
	Public []byte
}

// NewRolloutKey makes an ed25519 key in OpenSSH's formats, in a
// directory of the test's.
func NewRolloutKey(t testing.TB) RolloutKey {
	t.Helper()
	k, err := WriteRolloutKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// WriteRolloutKey makes an ed25519 key in OpenSSH's formats in dir.
func WriteRolloutKey(dir string) (RolloutKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return RolloutKey{}, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "rollout admin")
	if err != nil {
		return RolloutKey{}, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return RolloutKey{}, err
	}
	k := RolloutKey{Private: filepath.Join(dir, "id_ed25519"), Trusted: filepath.Join(dir, "rollout-keys"), Public: ssh.MarshalAuthorizedKey(sshPub)}
	if err := os.WriteFile(k.Private, pem.EncodeToMemory(block), 0o600); err != nil {
		return RolloutKey{}, err
	}
	if err := os.WriteFile(k.Trusted, k.Public, 0o644); err != nil {
		return RolloutKey{}, err
	}
	return k, nil
}
