package nodecmd

import (
	"bytes"
	"strings"
	"testing"
)

// The host's commands other than the agent list, in --help, the options
// they read, not all the agent's; the others are still accepted.
func TestHelpListsTheOptionsACommandReads(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want []string // shown
	}{
		{"credentials", []string{"--config", "--kubeconfig"}},
		{"reboot-gate", []string{"--config", "--request-file", "--in-progress-file", "--reboot-sentinel"}},
		{"reboot", []string{"--kubeconfig", "--node-name", "--namespace"}},
		{"run", []string{"--request-file", "--state-dir"}},
		{"doctor", []string{"--kubeconfig", "--kured-daemonset", "--drain-kubelet-kubeconfig"}},
	} {
		root := NewRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{tc.cmd, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatalf("%s --help: %v", tc.cmd, err)
		}
		help := out.String()
		for _, f := range tc.want {
			if !strings.Contains(help, f+" ") {
				t.Errorf("%s --help does not list %s", tc.cmd, f)
			}
		}
		if strings.Contains(help, "--notify-urls") || strings.Contains(help, "--drain-timeout") {
			t.Errorf("%s --help lists the agent's options it does not read:\n%s", tc.cmd, help)
		}
		if !strings.Contains(help, "kustodian agent --help lists them") {
			t.Errorf("%s --help does not say where the other options are", tc.cmd)
		}
		sub, _, err := root.Find([]string{tc.cmd})
		if err != nil || sub.Flags().Lookup("notify-urls") == nil {
			t.Errorf("%s no longer accepts --notify-urls: %v", tc.cmd, err)
		}
	}
	root := NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"agent", "--help"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "--notify-urls") || !strings.Contains(out.String(), "--drain-timeout") {
		t.Errorf("agent --help no longer lists every option: %v", err)
	}
}
