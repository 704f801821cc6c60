package ctl

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/rollout"
)

// signing is how a rollout gets its signature: a private key, or a
// signature made elsewhere (ssh-keygen -Y sign).
type signing struct {
	key, signature string
}

func (s *signing) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.key, "key", "", "OpenSSH private key to sign with (unencrypted, or KUSTODIAN_KEY_PASSPHRASE holds its passphrase)")
	cmd.Flags().StringVar(&s.signature, "signature", "", "a signature made elsewhere: ssh-keygen -Y sign -n kustodian-rollout over kustodian-ctl rollout manifest")
}

// sign signs the rollout, or checks and attaches a signature made
// elsewhere; neither given leaves it as it is.
func (s *signing) sign(r *rollout.MaintenanceRollout) error {
	message := []byte(rollout.Manifest(r.Namespace, r.Name, r.Spec))
	switch {
	case s.key != "" && s.signature != "":
		return errors.New("--key and --signature: give one")
	case s.key != "":
		signer, err := readSigner(s.key)
		if err != nil {
			return err
		}
		sig, err := rollout.Sign(signer, message)
		if err != nil {
			return err
		}
		r.Spec.Signature = sig
	case s.signature != "":
		b, err := os.ReadFile(s.signature)
		if err != nil {
			return fmt.Errorf("--signature: %w", err)
		}
		key, err := signatureKey(string(b), message)
		if err != nil {
			return fmt.Errorf("--signature %s: %w", s.signature, err)
		}
		fmt.Fprintf(os.Stderr, "signature by %s %s checks out\n", key.Type(), ssh.FingerprintSHA256(key))
		r.Spec.Signature = string(b)
	}
	return nil
}

// signatureKey checks a signature against the key it names itself: the
// signature is good, whoever made it (the hosts say whom they trust).
func signatureKey(armored string, message []byte) (ssh.PublicKey, error) {
	key, err := rollout.SignatureKey(armored)
	if err != nil {
		return nil, err
	}
	_, err = rollout.Verify(armored, message, []ssh.PublicKey{key})
	return key, err
}

func readSigner(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		pass := os.Getenv("KUSTODIAN_KEY_PASSPHRASE")
		if pass == "" {
			return nil, fmt.Errorf("--key %s is encrypted: put its passphrase in KUSTODIAN_KEY_PASSPHRASE, or sign with ssh-keygen -Y sign and --signature", path)
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(b, []byte(pass))
	}
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", path, err)
	}
	return signer, nil
}

// readRolloutFile reads a MaintenanceRollout from a YAML or JSON file ("-":
// stdin), filling in the digests of inline sources that lack one.
func readRolloutFile(path, namespace string) (*rollout.MaintenanceRollout, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	var r rollout.MaintenanceRollout
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("-f %s: not a MaintenanceRollout: %v", path, err)
	}
	if r.Kind != rollout.Kind {
		return nil, fmt.Errorf("-f %s: kind %q, not %s", path, r.Kind, rollout.Kind)
	}
	if r.Namespace == "" {
		r.Namespace = namespace
	}
	fill := func(s *rollout.Source) {
		if s.SHA256 == "" && s.ConfigMap == nil {
			s.SHA256 = rollout.SHA256([]byte(s.Inline))
		}
	}
	fill(&r.Spec.Script)
	if r.Spec.RollbackScript != nil {
		fill(r.Spec.RollbackScript)
	}
	for i := range r.Spec.Files {
		fill(&r.Spec.Files[i].Source)
	}
	return &r, rollout.Check(r.Name, r.Spec)
}

func newRolloutSignCommand(o *options) *cobra.Command {
	var file string
	s := &signing{}
	cmd := &cobra.Command{
		Use:   "sign -f FILE (--key KEY | --signature SIG)",
		Short: "Sign a MaintenanceRollout manifest file, or attach a signature made with ssh-keygen; print it",
		Long: `sign reads a MaintenanceRollout (YAML or JSON; -f - reads stdin), fills in the
SHA-256 of inline scripts and files that lack one, signs what runs (kustodian-ctl
rollout manifest prints it) and prints the rollout, signed, as YAML for kubectl
apply. A signature must be made over the rollout's namespace and name: sign it for
the namespace it goes to (-n).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if s.key == "" && s.signature == "" {
				return errors.New("give --key or --signature")
			}
			r, err := readRolloutFile(file, o.namespace())
			if err != nil {
				return err
			}
			if err := s.sign(r); err != nil {
				return err
			}
			u, err := toUnstructured(r)
			if err != nil {
				return err
			}
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return err
			}
			_, err = o.streams.Out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "the MaintenanceRollout (- for stdin)")
	_ = cmd.MarkFlagRequired("filename")
	s.add(cmd)
	return cmd
}

func newRolloutManifestCommand(o *options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "manifest (NAME | -f FILE)",
		Short: "Print what a rollout's signature covers, for ssh-keygen -Y sign -n kustodian-rollout",
		Args:  atMostOneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *rollout.MaintenanceRollout
			var err error
			switch {
			case file != "" && len(args) == 0:
				r, err = readRolloutFile(file, o.namespace())
			case file == "" && len(args) == 1:
				r, _, err = o.getRollout(cmd.Context(), args[0])
			default:
				return errors.New("give a rollout's NAME or -f FILE")
			}
			if err != nil {
				return err
			}
			fmt.Fprint(o.streams.Out, rollout.Manifest(r.Namespace, r.Name, r.Spec))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "a MaintenanceRollout file (- for stdin)")
	return cmd
}
