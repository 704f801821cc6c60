package ctl

import (
	"strings"
	"testing"
)

// The command line's own mistakes are said in its terms, before any API
// server is asked (run has no kubeconfig: a command that reached for one
// would say so instead).
func TestCommandLineMistakesAreNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config"},
		{[]string{"release"}, "kustodian-ctl release needs NODE: kustodian-ctl release NODE"},
		{[]string{"release", "a", "b"}, "kustodian-ctl release takes one NODE, got 2 (a b)"},
		{[]string{"rollout", "status"}, "kustodian-ctl rollout status needs NAME: kustodian-ctl rollout status NAME"},
		{[]string{"pause", "a", "b"}, "kustodian-ctl pause takes at most one NODE, got 2 (a b)"},
		{[]string{"queue", "node-1"}, `kustodian-ctl queue takes no arguments, got "node-1"`},
		{[]string{"status", "--watc"}, "unknown flag: --watc; did you mean --watch?"},
		{[]string{"plan", "--polcy", "p"}, "did you mean --policy?"},
		{[]string{"plan", "--start", "yesterday"}, `--start "yesterday": give a time as`},
		{[]string{"plan", "node-1", "-l", "a=b"}, `-l "a=b" and nodes named (node-1): give one or the other`},
		{[]string{"plan", "-l", "a=(b"}, `-l "a=(b": `},
	} {
		_, err := run(t, "kustodian-ctl", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to say: %s", strings.Join(tc.args, " "), err, tc.want)
		}
		if err != nil && tc.want != "" && !strings.Contains(tc.want, "kubeconfig") && strings.Contains(err.Error(), "kubeconfig") {
			t.Errorf("%s: asked for the cluster before saying what is wrong: %v", strings.Join(tc.args, " "), err)
		}
	}
}
