package rollout

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
)

// SignatureNamespace is the namespace of rollout signatures, as
// `ssh-keygen -Y sign -n kustodian-rollout` makes them: a signature made for
// anything else (git commits, files) is not one of a rollout.
const SignatureNamespace = "kustodian-rollout"

// The signature format is OpenSSH's (PROTOCOL.sshsig): what ssh-keygen -Y
// sign writes and -Y verify reads.
const (
	sigMagic    = "SSHSIG"
	sigVersion  = 1
	armorBegin  = "-----BEGIN SSH SIGNATURE-----"
	armorEnd    = "-----END SSH SIGNATURE-----"
	armorColumn = 70
)

// signedData is what the key signs: the preamble, the namespace, and the
// message's hash.
type signedData struct {
	Namespace string
	Reserved  string
	HashAlg   string
	Hash      string
}

// sigBlob is the signature as written, after the preamble.
type sigBlob struct {
	Version   uint32
	PublicKey string
	Namespace string
	Reserved  string
	HashAlg   string
	Signature string
}

func hashOf(alg string) (hash.Hash, error) {
	switch alg {
	case "sha512":
		return sha512.New(), nil
	case "sha256":
		return sha256.New(), nil
	}
	return nil, fmt.Errorf("hash algorithm %q: want sha512 or sha256", alg)
}

func toSign(alg string, message []byte) ([]byte, error) {
	h, err := hashOf(alg)
	if err != nil {
		return nil, err
	}
	h.Write(message)
	return append([]byte(sigMagic), ssh.Marshal(signedData{Namespace: SignatureNamespace, HashAlg: alg, Hash: string(h.Sum(nil))})...), nil
}

// Sign signs message as ssh-keygen -Y sign -n kustodian-rollout does, and
// returns the armored signature.
func Sign(signer ssh.Signer, message []byte) (string, error) {
	const alg = "sha512"
	data, err := toSign(alg, message)
	if err != nil {
		return "", err
	}
	var sig *ssh.Signature
	if as, ok := signer.(ssh.AlgorithmSigner); ok && signer.PublicKey().Type() == ssh.KeyAlgoRSA {
		sig, err = as.SignWithAlgorithm(rand.Reader, data, ssh.KeyAlgoRSASHA512) // as ssh-keygen: never SHA-1
	} else {
		sig, err = signer.Sign(rand.Reader, data)
	}
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	blob := append([]byte(sigMagic), ssh.Marshal(sigBlob{Version: sigVersion, PublicKey: string(signer.PublicKey().Marshal()),
		Namespace: SignatureNamespace, HashAlg: alg, Signature: string(ssh.Marshal(sig))})...)
	enc := base64.StdEncoding.EncodeToString(blob)
	var b strings.Builder
	b.WriteString(armorBegin + "\n")
	for len(enc) > armorColumn {
		b.WriteString(enc[:armorColumn] + "\n")
		enc = enc[armorColumn:]
	}
	b.WriteString(enc + "\n" + armorEnd + "\n")
	return b.String(), nil
}

// Verify checks an armored signature over message: made in the rollout
// namespace by one of trusted. It returns the key that made it.
func Verify(armored string, message []byte, trusted []ssh.PublicKey) (ssh.PublicKey, error) {
	b, key, err := parseSignature(armored)
	if err != nil {
		return nil, err
	}
	if !trustedKey(key, trusted) {
		return nil, fmt.Errorf("signed by %s %s, which this host does not trust", key.Type(), ssh.FingerprintSHA256(key))
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal([]byte(b.Signature), &sig); err != nil {
		return nil, fmt.Errorf("the signature does not parse: %w", err)
	}
	if sig.Format == ssh.KeyAlgoRSA {
		return nil, errors.New("the signature is an RSA signature over SHA-1, which OpenSSH refuses too: sign with rsa-sha2-512 (ssh-keygen does) or an ed25519 key")
	}
	data, err := toSign(b.HashAlg, message)
	if err != nil {
		return nil, err
	}
	if err := key.Verify(data, &sig); err != nil {
		return nil, fmt.Errorf("the signature by %s does not match the rollout's manifest (a script, a file or the reboot setting changed since it was signed)", ssh.FingerprintSHA256(key))
	}
	return key, nil
}

// SignatureKey is the key an armored signature says made it (unchecked).
func SignatureKey(armored string) (ssh.PublicKey, error) {
	_, key, err := parseSignature(armored)
	return key, err
}

// parseSignature reads an armored signature of the rollout namespace.
func parseSignature(armored string) (sigBlob, ssh.PublicKey, error) {
	var b sigBlob
	s := strings.TrimSpace(armored)
	if !strings.HasPrefix(s, armorBegin) || !strings.HasSuffix(s, armorEnd) {
		if s == "" {
			return b, nil, errors.New("the rollout is not signed")
		}
		return b, nil, errors.New("the signature is not an SSH signature (-----BEGIN SSH SIGNATURE-----)")
	}
	body := strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimPrefix(s, armorBegin), armorEnd)), "")
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return b, nil, fmt.Errorf("the signature is not base64: %w", err)
	}
	if !bytes.HasPrefix(raw, []byte(sigMagic)) {
		return b, nil, errors.New("the signature lacks the SSHSIG preamble")
	}
	if err := ssh.Unmarshal(raw[len(sigMagic):], &b); err != nil {
		return b, nil, fmt.Errorf("the signature does not parse: %w", err)
	}
	if b.Version != sigVersion {
		return b, nil, fmt.Errorf("signature version %d: want %d", b.Version, sigVersion)
	}
	if b.Namespace != SignatureNamespace {
		return b, nil, fmt.Errorf("the signature was made for %q, not %q (ssh-keygen -Y sign -n %s)", b.Namespace, SignatureNamespace, SignatureNamespace)
	}
	key, err := ssh.ParsePublicKey([]byte(b.PublicKey))
	if err != nil {
		return b, nil, fmt.Errorf("the signature's key does not parse: %w", err)
	}
	return b, key, nil
}

func trustedKey(key ssh.PublicKey, trusted []ssh.PublicKey) bool {
	m := key.Marshal()
	for _, t := range trusted {
		if bytes.Equal(t.Marshal(), m) {
			return true
		}
	}
	return false
}

// ReadTrustedKeys reads the keys a host trusts, one OpenSSH public key per
// line as in authorized_keys (comments and blank lines skipped; options
// before a key are refused). An error names the file and line.
func ReadTrustedKeys(path string) ([]ssh.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []ssh.PublicKey
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not an OpenSSH public key (ssh-ed25519 AAAA... comment): %v", path, n, err)
		}
		if len(options) > 0 {
			return nil, fmt.Errorf("%s:%d: options before the key (%s) mean nothing here: remove them", path, n, strings.Join(options, ","))
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no key in it: a host that trusts no key runs no rollout", path)
	}
	return keys, nil
}
