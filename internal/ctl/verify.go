package ctl

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/manifests"
)

func newVerifyCommand(o *options) *cobra.Command {
	var kubeletEvictions bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Prove that the admission policies hold each node to itself, on a cluster where something else applied the manifests",
		Long: `verify does what install does after it applied the manifests, and nothing
else: on a cluster where Argo CD, Flux or kubectl apply -k deploy/kustomize put
Kustodian's objects, it proves that the API server enforces each admission
policy (docs/security.md). Each must refuse a dry run of a request it exists to
refuse, made with the agents' own ServiceAccount (a token bound to no Node, and
one bound to the first Node listed), within --timeout. It changes nothing.
Give --kubelet-evictions when the manifests were made with it. Exit 0 and one
line when every policy is enforced; otherwise the policies that are not, with
the API server's last answer.`,
		Example: `  kubectl apply -k deploy/kustomize
  kustodian-ctl verify`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, rc, err := o.admissionClients()
			if err != nil {
				return err
			}
			mo := manifests.Options{Namespace: o.namespace(), KuredNamespace: o.kuredNamespace, KuredDaemonSet: o.kuredDaemonSet, KuredLockAnnotations: o.kuredKeys, KubeletEvictions: kubeletEvictions}
			return proveEnforced(cmd.Context(), o.streams.Out, client, rc, mo, timeout, nil)
		},
	}
	cmd.Flags().BoolVar(&kubeletEvictions, "kubelet-evictions", false, "the manifests give the agents no right to evict (install --kubelet-evictions): do not probe the policy of tokens bound to no Node")
	cmd.Flags().DurationVar(&timeout, "timeout", enforcementTimeout, "how long to wait for the API server to enforce the policies (it loads new ones within seconds)")
	return cmd
}
