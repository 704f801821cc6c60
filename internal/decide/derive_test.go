package decide

import (
	"testing"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/lock"
)

func TestDerive(t *testing.T) {
	req := &hostfiles.Request{ID: "r1"}
	held := []string{"lock-default-0"}
	for _, tc := range []struct {
		name string
		o    Observed
		want lock.State
	}{
		{"nothing", Observed{}, lock.Idle},
		{"request, no lock", Observed{Request: req}, lock.Waiting},
		{"request, no lock, in-progress left over", Observed{Request: req, InProgress: true}, lock.Waiting},
		{"request, lock", Observed{Request: req, HeldLocks: held}, lock.Draining},
		{"request, lock, cordoned", Observed{Request: req, HeldLocks: held, CordonedByUs: true}, lock.Draining},
		{"request, lock, in-progress", Observed{Request: req, HeldLocks: held, InProgress: true, CordonedByUs: true}, lock.InMaintenance},
		{"request, lock, drain failed for this request", Observed{Request: req, HeldLocks: held, FailedRequest: "r1"}, lock.Failed},
		{"request, lock, drain failed for an older request", Observed{Request: req, HeldLocks: held, FailedRequest: "r0"}, lock.Draining},
		{"request, lock released by an admin", Observed{Request: req, ReleasedRequest: "r1", CordonedByUs: true, InProgress: true}, lock.Failed},
		{"request, lock released by an admin for an older request", Observed{Request: req, ReleasedRequest: "r0"}, lock.Waiting},
		{"request, lock released by an admin, lock taken again by hand", Observed{Request: req, ReleasedRequest: "r1", HeldLocks: held}, lock.Draining},
		{"released, then the request removed", Observed{ReleasedRequest: "r1", CordonedByUs: true}, lock.Completing},
		{"no request, in-progress", Observed{InProgress: true}, lock.Completing},
		{"no request, lock", Observed{HeldLocks: held}, lock.Completing},
		{"no request, our cordon", Observed{CordonedByUs: true}, lock.Completing},
		{"no request, all of it", Observed{InProgress: true, HeldLocks: held, CordonedByUs: true}, lock.Completing},
	} {
		if got := Derive(tc.o); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
