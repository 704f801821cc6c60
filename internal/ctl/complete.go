package ctl

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/policy"
)

// completionTimeout bounds the API request behind a completion: a shell
// waiting on an unreachable API server must get its prompt back.
const completionTimeout = 5 * time.Second

// completeNodes completes node names (the Nodes the API server lists),
// leaving out those already given.
func (o *options) completeNodes(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	client, err := o.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return matching(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completePolicies completes the names of the namespace's MaintenancePolicies.
func (o *options) completePolicies(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	dyn, err := o.dynamicClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	list, err := dyn.Resource(policy.GVR).Namespace(o.namespace()).List(ctx, metav1.ListOptions{})
	names := []string{policy.DefaultName}
	switch {
	case apierrors.IsNotFound(err): // no CRD: the built-in policy alone
		return matching(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	case err != nil:
		return nil, cobra.ShellCompDirectiveError
	}
	for _, p := range list.Items {
		names = append(names, p.GetName())
	}
	return matching(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// matching are the names that start with prefix and are not in given,
// sorted.
func matching(names, given []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !slices.Contains(given, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
