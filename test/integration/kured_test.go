package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

func kuredAnnotation(t *testing.T, e *cluster.Env) string {
	t.Helper()
	ds, err := e.Client.AppsV1().DaemonSets(e.Namespace).Get(e.Ctx, "kured", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Annotations[kured.LockAnnotation]
}

func setKuredAnnotation(t *testing.T, e *cluster.Env, value string) {
	t.Helper()
	dss := e.Client.AppsV1().DaemonSets(e.Namespace)
	// The DaemonSet controller writes the status meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := dss.Get(e.Ctx, "kured", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if value == "" {
			delete(ds.Annotations, kured.LockAnnotation)
		} else {
			ds.Annotations[kured.LockAnnotation] = value
		}
		_, err = dss.Update(e.Ctx, ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Kured's lock: the agent waits while a node holds it (Kured rebooting),
// and holds it as kustodian:<node> during its own maintenance, in Kured's
// single and maxOwners formats.
func TestAgentKuredLock(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	held := `{"nodeID":"` + nodes[1] + `","metadata":{"unschedulable":false},"created":"` + time.Now().UTC().Format(time.RFC3339) + `","TTL":0}`
	e.KuredDaemonSet(e.Namespace, held)
	a := newAgent(t, e, nodes[0], "--kured-namespace", e.Namespace)
	a.request("upgrade")
	a.start()
	waitRecord(e, nodes[0], "to wait for Kured", func(r *lock.Record) error {
		if err := inState(lock.Waiting)(r); err != nil {
			return err
		}
		// Kured's lock holds every node alike: it is not this node's own
		// gate, so the record is not Blocked.
		if !strings.Contains(r.Message, "Kured's lock is held by "+nodes[1]) || !strings.Contains(r.Gates, `"gate":"kured","verdict":"closed"`) {
			return fmt.Errorf("message %q, gates %s", r.Message, r.Gates)
		}
		return nil
	})
	if h := lockHolder(e); h != "" {
		t.Fatalf("lock taken by %q while Kured reboots a node", h)
	}

	setKuredAnnotation(t, e, "") // Kured's reboot is done
	a.waitInProgress(cluster.DefaultTimeout)
	var single kured.Holder
	if err := json.Unmarshal([]byte(kuredAnnotation(t, e)), &single); err != nil || single.NodeID != "kustodian:"+nodes[0] {
		t.Fatalf("during maintenance Kured's lock is %q (%v), want nodeID kustodian:%s", kuredAnnotation(t, e), err, nodes[0])
	}
	// kustodian-ctl reads Kured's lock where it is told, as the agent does.
	var st struct {
		Kured *struct {
			Holders []string `json:"holders"`
		} `json:"kured"`
	}
	if out := mustCtl(t, e, "status", "--kured-namespace", e.Namespace, "-o", "json"); json.Unmarshal([]byte(out), &st) != nil ||
		st.Kured == nil || fmt.Sprint(st.Kured.Holders) != "[kustodian:"+nodes[0]+"]" {
		t.Errorf("status --kured-namespace %s:\n%s", e.Namespace, out)
	}
	a.completes()
	if v := kuredAnnotation(t, e); v != "" {
		t.Errorf("Kured's lock left after maintenance: %s", v)
	}

	// maxOwners 2 with one holder: room for the agent, beside it.
	multi := `{"maxOwners":2,"locks":[{"nodeID":"` + nodes[1] + `","metadata":{"unschedulable":false},"created":"` + time.Now().UTC().Format(time.RFC3339) + `","TTL":0}]}`
	setKuredAnnotation(t, e, multi)
	a.request("upgrade again")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	var m struct {
		MaxOwners int
		Locks     []kured.Holder
	}
	if err := json.Unmarshal([]byte(kuredAnnotation(t, e)), &m); err != nil || m.MaxOwners != 2 || len(m.Locks) != 2 || m.Locks[1].NodeID != "kustodian:"+nodes[0] {
		t.Fatalf("Kured's lock during maintenance: %s (%v)", kuredAnnotation(t, e), err)
	}
	a.completes()
	if err := json.Unmarshal([]byte(kuredAnnotation(t, e)), &m); err != nil || len(m.Locks) != 1 || m.Locks[0].NodeID != nodes[1] {
		t.Errorf("after maintenance Kured's lock is %s, want only %s", kuredAnnotation(t, e), nodes[1])
	}
}
