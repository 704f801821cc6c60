package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kustodian/kustodian/internal/rollout"
)

// The report lists every package each node changed, from the set and
// each node's entry: the canary's (exactly the set), a node that had an
// older version, one that did not have a package of the set, and a node
// that rolled back (no row of a package).
func TestRolloutReportListsEveryPackageEachNodeChanged(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "cve"},
		Spec: rollout.Spec{Patch: &rollout.PatchSpec{Updates: rollout.UpdatesSecurity}, Signature: "sig"}}
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	at := metav1.NewTime(t0)
	set := []rollout.PackageChange{{Name: "openssl", From: "3.0.1", To: "3.0.2"}, {Name: "libssl3", From: "3.0.1", To: "3.0.2"}}
	r.Status.Patch = &rollout.PatchStatus{Revision: rev, Signature: "sig", ResolvedOn: "n1", ResolvedAt: &at, Packages: set}
	r.Status.Nodes = []rollout.NodeStatus{
		{Name: "n1", Revision: rev, State: rollout.Succeeded, Started: &at, Finished: &at, NodePatch: rollout.NodePatch{Changed: ptr.To(2), Rebooted: true}},
		{Name: "n2", Revision: rev, Stage: 1, State: rollout.Succeeded, Finished: &at,
			NodePatch: rollout.NodePatch{Changed: ptr.To(2), Packages: []rollout.PackageChange{{Name: "openssl", From: "3.0.0", To: "3.0.2"}}}},
		{Name: "n3", Revision: rev, Stage: 1, State: rollout.Succeeded, Finished: &at, NodePatch: rollout.NodePatch{Changed: ptr.To(1), Skipped: []string{"libssl3"}}},
		{Name: "n4", Revision: rev, Stage: 1, State: rollout.RolledBack, Finished: &at},
		{Name: "old", Revision: "another", State: rollout.Succeeded},
	}
	var b bytes.Buffer
	if err := printReportCSV(&b, reportOf(r), true); err != nil {
		t.Fatal(err)
	}
	want := `NODE,STAGE,STATE,STARTED,FINISHED,REBOOTED,PACKAGE,FROM,TO
n1,1,Succeeded,2026-11-29T10:00:00Z,2026-11-29T10:00:00Z,true,openssl,3.0.1,3.0.2
n1,1,Succeeded,2026-11-29T10:00:00Z,2026-11-29T10:00:00Z,true,libssl3,3.0.1,3.0.2
n2,2,Succeeded,,2026-11-29T10:00:00Z,false,openssl,3.0.0,3.0.2
n2,2,Succeeded,,2026-11-29T10:00:00Z,false,libssl3,3.0.1,3.0.2
n3,2,Succeeded,,2026-11-29T10:00:00Z,false,openssl,3.0.1,3.0.2
n4,2,RolledBack,,2026-11-29T10:00:00Z,false,,,
`
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printReport(&b, reportOf(r), true)
	if !strings.Contains(b.String(), "the set of 2 packages resolved on n1, proven 2026-11-29T10:00:00Z") {
		t.Errorf("the table does not say the set:\n%s", b.String())
	}
}
