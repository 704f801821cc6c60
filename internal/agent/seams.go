package agent

import (
	"context"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/kured/kuredapi"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/login1"
)

// The agent's seams: what it asks of the world outside its own decisions.
// Each is an interface so that a test can put a fault exactly where it
// wants one (a lock write that fails, a reboot that is refused) while the
// rest of the world stays real. jobRunner, for managed jobs, is in jobs.go.

// lockStore is what the agent asks of the lock protocol's objects on the
// API server: internal/lock/lockapi.
type lockStore interface {
	Acquire(ctx context.Context, name string, group lock.GroupRef, node string, current *coordv1.Lease, p lock.Params, facts lockapi.FactsFunc) (*coordv1.Lease, lock.Verdict, error)
	Release(ctx context.Context, name, node string) (*coordv1.Lease, error)
	Renew(ctx context.Context, name, node string) (*coordv1.Lease, error)
	Holds(ctx context.Context, name, node string) (bool, error)
	Locks(ctx context.Context) ([]coordv1.Lease, error)
	SetDisrupted(ctx context.Context, name, node string, controllers []string) (*coordv1.Lease, error)
	HandOff(ctx context.Context, node, by string, leases []*coordv1.Lease, staleAfter time.Duration) ([]*coordv1.Lease, error)
	LeaveQueues(ctx context.Context, node string, leases []*coordv1.Lease, staleAfter time.Duration) ([]*coordv1.Lease, error)

	Summarize(ctx context.Context, group lock.GroupRef, self string, staleAfter time.Duration) (lock.Summary, error)
	Renominate(ctx context.Context, group lock.GroupRef, by string, staleAfter time.Duration) (lock.Summary, *coordv1.Lease, error)
	TouchSummary(ctx context.Context, current *coordv1.Lease, by string) (*coordv1.Lease, error)
}

var _ lockStore = (*lockapi.Client)(nil)

// recordStore is what the agent asks of the nodes' records on the API
// server: internal/lock/lockapi.
type recordStore interface {
	GetRecord(ctx context.Context, node string) (*lock.Record, error)
	PutRecord(ctx context.Context, base *coordv1.Lease, r lock.Record) (*coordv1.Lease, error)
	DeleteRecord(ctx context.Context, node string) error
}

var _ recordStore = (*lockapi.Client)(nil)

// kuredLocker takes and gives back a holder's place in Kured's lock (the
// annotation on Kured's DaemonSet): internal/kured/kuredapi.
type kuredLocker interface {
	// Acquire adds id to the lock's holders; false, with the holders, when
	// the lock is full.
	Acquire(ctx context.Context, id string) (bool, string, error)
	Release(ctx context.Context, id string) error
}

var _ kuredLocker = (*kuredapi.Locker)(nil)

// rebooter reboots the host: logind over D-Bus (internal/login1).
type rebooter interface {
	Reboot(ctx context.Context) error
}

var _ rebooter = (*login1.Manager)(nil)

// nodeDrainer is what the agent asks of internal/drain.
type nodeDrainer interface {
	Cordon(ctx context.Context, n *corev1.Node) (byAdmin bool, err error)
	Uncordon(ctx context.Context, n *corev1.Node) error
	Protect(ctx context.Context, n *corev1.Node) error
	Unprotect(ctx context.Context, n *corev1.Node) error
	Drain(ctx context.Context, node string, progress func(drain.Progress)) ([]string, error)
}

var _ nodeDrainer = (*drain.Drainer)(nil)
