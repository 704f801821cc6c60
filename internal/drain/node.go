package drain

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/nodemarks"
)

// The Node's marks are internal/nodemarks'; the drainer writes them with
// its client.

func (d *Drainer) marks() nodemarks.Marks { return nodemarks.Marks{Client: d.Client} }

// Cordon is nodemarks.Marks.Cordon.
func (d *Drainer) Cordon(ctx context.Context, n *corev1.Node) (byAdmin bool, err error) {
	return d.marks().Cordon(ctx, n)
}

// Uncordon is nodemarks.Marks.Uncordon.
func (d *Drainer) Uncordon(ctx context.Context, n *corev1.Node) error {
	return d.marks().Uncordon(ctx, n)
}

// Protect is nodemarks.Marks.Protect.
func (d *Drainer) Protect(ctx context.Context, n *corev1.Node) error {
	return d.marks().Protect(ctx, n)
}

// Unprotect is nodemarks.Marks.Unprotect.
func (d *Drainer) Unprotect(ctx context.Context, n *corev1.Node) error {
	return d.marks().Unprotect(ctx, n)
}
