package agent

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/drain"
)

// simDrainer cordons through the model, and drains when the simulation
// says: a node without pods, whose drain takes as long as the simulation
// chooses.
type simDrainer struct {
	*drain.Drainer
	finish chan struct{}
}

func (d *simDrainer) Drain(ctx context.Context, _ string, _ func(drain.Progress)) ([]string, error) {
	select {
	case <-d.finish:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type noNotify struct{}

func (noNotify) Ready() {}

func (noNotify) Status(string) {}

func (noNotify) Stopping() {}

type traceWriter struct{ h *host }

func (t traceWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	// The trace stamps the simulated time; the log's own (the real clock)
	// is left out.
	if i := strings.Index(line, "level="); i >= 0 {
		line = line[i:]
	}
	t.h.w.tracef("%s: log %s", t.h.name, line)
	return len(p), nil
}

func simNode(name, zone string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}
