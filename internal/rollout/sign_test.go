package rollout

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keygen makes an ed25519 key pair with OpenSSH's ssh-keygen and returns
// the private key's path, its signer and its public key.
func keygen(t *testing.T, dir, name string) (string, ssh.Signer) {
	t.Helper()
	path := filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return path, signer
}

// Our signatures and OpenSSH's are the same thing: ssh-keygen -Y verify
// accepts ours, we accept ssh-keygen -Y sign's, and each refuses a changed
// message, another namespace and an untrusted key.
func TestSignaturesAreOpenSSHs(t *testing.T) {
	dir := t.TempDir()
	keyPath, signer := keygen(t, dir, "admin")
	_, other := keygen(t, dir, "intruder")
	message := []byte(Manifest("kustodian", "fix", Spec{Script: Source{SHA256: SHA256([]byte("echo hi\n"))}}))
	msgPath := filepath.Join(dir, "manifest")
	if err := os.WriteFile(msgPath, message, 0o644); err != nil {
		t.Fatal(err)
	}
	trusted := []ssh.PublicKey{signer.PublicKey()}

	// ssh-keygen signs, we verify.
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", keyPath, "-n", SignatureNamespace, msgPath).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	theirs, err := os.ReadFile(msgPath + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(string(theirs), message, trusted); err != nil {
		t.Fatalf("ssh-keygen's signature refused: %v", err)
	}

	// We sign, ssh-keygen verifies.
	ours, err := Sign(signer, message)
	if err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(dir, "allowed_signers")
	line := "admin@example namespaces=\"" + SignatureNamespace + "\" " + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err := os.WriteFile(allowed, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	// The message comes on stdin, the signature from a file.
	sigPath := filepath.Join(dir, "ours.sig")
	if err := os.WriteFile(sigPath, []byte(ours), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "admin@example", "-n", SignatureNamespace, "-s", sigPath)
	cmd.Stdin = strings.NewReader(string(message))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify refused our signature: %v: %s", err, out)
	}
	if _, err := Verify(ours, message, trusted); err != nil {
		t.Fatalf("our own signature refused: %v", err)
	}

	// Refusals.
	changed := []byte(strings.Replace(string(message), "reboot never", "reboot auto", 1))
	for _, tc := range []struct {
		name, sig string
		message   []byte
		trusted   []ssh.PublicKey
		want      string
	}{
		{"a changed manifest", ours, changed, trusted, "does not match"},
		{"ssh-keygen's, changed manifest", string(theirs), changed, trusted, "does not match"},
		{"an untrusted key", ours, message, []ssh.PublicKey{other.PublicKey()}, "does not trust"},
		{"no signature", "", message, trusted, "not signed"},
		{"not armored", "hello", message, trusted, "not an SSH signature"},
	} {
		if _, err := Verify(tc.sig, tc.message, tc.trusted); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	// Signed for another namespace (a git commit signature, say).
	if err := os.Remove(msgPath + ".sig"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", keyPath, "-n", "git", msgPath).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign -n git: %v: %s", err, out)
	}
	gitSig, err := os.ReadFile(msgPath + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(string(gitSig), message, trusted); err == nil || !strings.Contains(err.Error(), `made for "git"`) {
		t.Errorf("a git signature: %v", err)
	}
}

func TestReadTrustedKeys(t *testing.T) {
	dir := t.TempDir()
	_, signer := keygen(t, dir, "admin")
	good := filepath.Join(dir, "keys")
	content := "# the admins\n\n" + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err := os.WriteFile(good, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := ReadTrustedKeys(good)
	if err != nil || len(keys) != 1 {
		t.Fatalf("ReadTrustedKeys: %d keys, %v", len(keys), err)
	}
	for name, content := range map[string]string{
		"garbage": "ssh-ed25519 not-base64\n",
		"options": `restrict ` + string(ssh.MarshalAuthorizedKey(signer.PublicKey())),
		"empty":   "# nobody\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadTrustedKeys(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming %s", name, err, p)
		}
	}
}

// The manifest covers what runs and how often, not where or when.
func TestManifestCoversWhatRuns(t *testing.T) {
	base := Spec{Script: Source{Inline: "true\n", SHA256: SHA256([]byte("true\n"))}}
	rev := Revision("kustodian", "fix", base)
	for name, change := range map[string]func(*Spec){
		"script":  func(s *Spec) { s.Script.SHA256 = SHA256([]byte("false\n")) },
		"reboot":  func(s *Spec) { s.Reboot = RebootAuto },
		"retries": func(s *Spec) { s.OnFailure = OnFailure{Action: FailureRetry, Retries: 10} },
		"a file":  func(s *Spec) { s.Files = []File{{Name: "a", Source: base.Script}} },
	} {
		s := base
		change(&s)
		if Revision("kustodian", "fix", s) == rev {
			t.Errorf("a change of %s keeps the revision", name)
		}
	}
	for name, change := range map[string]func(*Spec){
		"stages":  func(s *Spec) { s.Stages = []Stage{{All: true}} },
		"backoff": func(s *Spec) { s.OnFailure.Backoff = &metav1.Duration{Duration: time.Hour} },
		"promote": func(s *Spec) { s.Promoted = 1 },
	} {
		s := base
		change(&s)
		if Revision("kustodian", "fix", s) != rev {
			t.Errorf("a change of %s makes a new revision", name)
		}
	}
	// A patch campaign: what it installs is what runs; when is not.
	campaign := Spec{Patch: &PatchSpec{}}
	crev := Revision("kustodian", "fix", campaign)
	if crev == rev {
		t.Error("a patch campaign has the revision of a script")
	}
	for name, change := range map[string]func(*PatchSpec){
		"updates":             func(p *PatchSpec) { p.Updates = UpdatesSecurity },
		"include":             func(p *PatchSpec) { p.Include = []string{"openssl"} },
		"exclude":             func(p *PatchSpec) { p.Exclude = []string{"kubelet"} },
		"include and exclude": func(p *PatchSpec) { p.Include = []string{"openssl"}; p.Exclude = []string{"openssl"} },
		"reboot":              func(p *PatchSpec) { p.Reboot = PatchRebootNever },
	} {
		p := PatchSpec{}
		change(&p)
		if Revision("kustodian", "fix", Spec{Patch: &p}) == crev {
			t.Errorf("a change of the patch's %s keeps the revision", name)
		}
	}
	if Revision("kustodian", "fix", Spec{Patch: &PatchSpec{Updates: UpdatesAll, Reboot: PatchRebootIfRequired}}) != crev {
		t.Error("the patch's defaults written out make a new revision")
	}
	later := campaign
	later.Deadline, later.MaxConcurrency = &metav1.Time{Time: time.Unix(1e9, 0)}, new(int)
	if Revision("kustodian", "fix", later) != crev {
		t.Error("a deadline or a concurrency makes a new revision")
	}
	if Revision("other", "fix", base) == rev || Revision("kustodian", "fix2", base) == rev {
		t.Error("the revision does not name the rollout")
	}
}

// An RSA signature over SHA-1 (ssh-rsa) is refused, as OpenSSH refuses
// it in SSHSIG.
func TestRSASHA1SignatureRefused(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	message := []byte("manifest\n")
	data, err := toSign("sha512", message)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.(ssh.AlgorithmSigner).SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSA)
	if err != nil {
		t.Fatal(err)
	}
	blob := append([]byte(sigMagic), ssh.Marshal(sigBlob{Version: sigVersion, PublicKey: string(signer.PublicKey().Marshal()),
		Namespace: SignatureNamespace, HashAlg: "sha512", Signature: string(ssh.Marshal(sig))})...)
	armored := armorBegin + "\n" + base64.StdEncoding.EncodeToString(blob) + "\n" + armorEnd + "\n"
	if _, err := Verify(armored, message, []ssh.PublicKey{signer.PublicKey()}); err == nil || !strings.Contains(err.Error(), "SHA-1") {
		t.Fatalf("an ssh-rsa signature: %v", err)
	}
	good, err := Sign(signer, message)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(good, message, []ssh.PublicKey{signer.PublicKey()}); err != nil {
		t.Fatalf("an rsa-sha2-512 signature refused: %v", err)
	}
}
