package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

func kuredAnnotation(t *testing.T, e *cluster.Env) string {
	t.Helper()
	return kuredKey(t, e, kured.LockAnnotation)
}

func kuredKey(t *testing.T, e *cluster.Env, key string) string {
	t.Helper()
	ds, err := e.Client.AppsV1().DaemonSets(e.Namespace).Get(e.Ctx, "kured", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Annotations[key]
}

func setKuredAnnotation(t *testing.T, e *cluster.Env, value string) {
	t.Helper()
	setKuredKey(t, e, kured.LockAnnotation, value)
}

// setKuredKey sets Kured's lock under key ("" removes it), as Kured does.
func setKuredKey(t *testing.T, e *cluster.Env, key, value string) {
	t.Helper()
	updateKured(t, e, func(ds *appsv1.DaemonSet) {
		if value == "" {
			delete(ds.Annotations, key)
		} else {
			ds.Annotations[key] = value
		}
	})
}

func updateKured(t *testing.T, e *cluster.Env, change func(*appsv1.DaemonSet)) {
	t.Helper()
	dss := e.Client.AppsV1().DaemonSets(e.Namespace)
	// The DaemonSet controller writes the status meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := dss.Get(e.Ctx, "kured", metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(ds)
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
	t.Parallel()
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

// Kured after its rewrite keeps its lock under kured.dev/kured-node-lock:
// the agent waits while a node holds it there, in either of Kured's forms,
// and holds its lock under both keys during its maintenance (a key it
// creates in the form Kured's --concurrency says), so that a Kured on
// either side of the upgrade sees it.
func TestAgentKuredNextLock(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	next := kured.NextLockAnnotation
	entry := func(node string) string {
		return `{"nodeID":"` + node + `","metadata":{"unschedulable":false},"created":"` + time.Now().UTC().Format(time.RFC3339) + `","TTL":0}`
	}
	e.KuredDaemonSet(e.Namespace, "")
	setKuredKey(t, e, next, entry(nodes[1]))
	a := newAgent(t, e, nodes[0], "--kured-namespace", e.Namespace)
	a.request("upgrade")
	a.start()
	waitRecord(e, nodes[0], "to wait for Kured's lock under "+next, func(r *lock.Record) error {
		if err := inState(lock.Waiting)(r); err != nil {
			return err
		}
		if !strings.Contains(r.Message, "Kured's lock is held by "+nodes[1]) {
			return fmt.Errorf("message %q", r.Message)
		}
		return nil
	})
	if h := lockHolder(e); h != "" {
		t.Fatalf("lock taken by %q while Kured reboots a node under %s", h, next)
	}
	setKuredKey(t, e, next, "") // Kured's reboot is done
	a.waitInProgress(cluster.DefaultTimeout)
	for _, key := range kured.LockAnnotations {
		var single kured.Holder
		if v := kuredKey(t, e, key); json.Unmarshal([]byte(v), &single) != nil || single.NodeID != kured.HolderID(nodes[0]) {
			t.Errorf("during maintenance Kured's lock under %s is %q, want nodeID %s", key, v, kured.HolderID(nodes[0]))
		}
	}
	a.completes()
	for _, key := range kured.LockAnnotations {
		if v := kuredKey(t, e, key); v != "" {
			t.Errorf("Kured's lock under %s left after maintenance: %s", key, v)
		}
	}

	// Kured with --concurrency=2 holds one place of two under the new key;
	// the old key, absent, is created in the same form.
	updateKured(t, e, func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Args = []string{"--concurrency=2", "--lock-annotation=" + next}
	})
	setKuredKey(t, e, next, `{"maxOwners":2,"locks":[`+entry(nodes[1])+`]}`)
	a.request("upgrade again")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	for key, want := range map[string][]string{next: {nodes[1], kured.HolderID(nodes[0])}, kured.LockAnnotation: {kured.HolderID(nodes[0])}} {
		var m struct {
			MaxOwners int
			Locks     []kured.Holder
		}
		v := kuredKey(t, e, key)
		if err := json.Unmarshal([]byte(v), &m); err != nil || m.MaxOwners != 2 || len(m.Locks) != len(want) || m.Locks[len(want)-1].NodeID != want[len(want)-1] {
			t.Errorf("during maintenance Kured's lock under %s is %s (%v), want maxOwners 2 and holders %v", key, v, err, want)
		}
	}
	a.completes()
	if v := kuredKey(t, e, next); !strings.Contains(v, `"nodeID":"`+nodes[1]+`"`) || strings.Contains(v, "kustodian:") {
		t.Errorf("after maintenance Kured's lock under %s is %s, want only %s", next, v, nodes[1])
	}
}
