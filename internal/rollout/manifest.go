package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Manifest is the text a rollout's signature covers: what runs on the
// nodes (the scripts and files, or what a patch campaign installs) and how
// often (reboot, retries), and nothing about where or when
// (the selector, the stages, the promotion and the backoff are an admin's
// to change without signing again). It binds
// the scripts to the rollout's namespace and name, so that a signed
// script cannot be replayed under another rollout. `kustodian-ctl rollout
// manifest` prints it for ssh-keygen -Y sign.
func Manifest(namespace, name string, s Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kustodian-rollout v1\nrollout %s/%s\nreboot %s\n", namespace, name, rebootOf(s))
	if p := s.Patch; p != nil {
		// What a patch campaign installs is what runs: the patterns (no
		// space in them, Validate says) in the order given.
		fmt.Fprintf(&b, "patch updates %s reboot %s\n", or(p.Updates, UpdatesAll), or(p.Reboot, PatchRebootIfRequired))
		for _, pat := range p.Include {
			fmt.Fprintf(&b, "patch include %s\n", pat)
		}
		for _, pat := range p.Exclude {
			fmt.Fprintf(&b, "patch exclude %s\n", pat)
		}
	} else {
		fmt.Fprintf(&b, "script sha256:%s\n", strings.ToLower(s.Script.SHA256))
	}
	if s.RollbackScript != nil {
		fmt.Fprintf(&b, "rollback sha256:%s\n", strings.ToLower(s.RollbackScript.SHA256))
	} else {
		b.WriteString("rollback none\n")
	}
	// How often a failed script runs again is what runs too.
	if s.OnFailure.Action == FailureRetry {
		fmt.Fprintf(&b, "on-failure retry %d\n", s.OnFailure.Retries)
	} else {
		b.WriteString("on-failure stop\n")
	}
	files := slices.Clone(s.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range files {
		fmt.Fprintf(&b, "file %s sha256:%s\n", f.Name, strings.ToLower(f.SHA256))
	}
	return b.String()
}

// Revision names what a rollout runs: a change of a script, a file or
// Reboot is a new revision, which every node runs again.
func Revision(namespace, name string, s Spec) string {
	sum := sha256.Sum256([]byte(Manifest(namespace, name, s)))
	return hex.EncodeToString(sum[:6])
}

// Reboot policies.
const (
	RebootAuto  = "auto"
	RebootNever = "never"
)

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func rebootOf(s Spec) string {
	if s.Reboot == "" {
		return RebootNever
	}
	return s.Reboot
}

// SHA256 is the hex digest the spec names for data.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
