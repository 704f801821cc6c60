package drain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// summary is the one line an operator needs while a drain runs.
func summary(pods map[types.UID]*podState, refused []string) string {
	left := len(pods) + len(refused)
	var blocked, terminating []string
	for _, st := range pods {
		if st.blocked != "" {
			blocked = append(blocked, st.key+" "+st.blocked)
		} else {
			terminating = append(terminating, st.key)
		}
	}
	sort.Strings(blocked)
	sort.Strings(terminating)
	msg := fmt.Sprintf("draining: %d %s left", left, plural(left, "pod", "pods"))
	switch {
	case len(refused) > 0:
		msg += ", " + refused[0]
		if len(refused) > 1 {
			msg += fmt.Sprintf(" (+%d more refused)", len(refused)-1)
		}
	case len(blocked) > 0:
		msg += ", " + blocked[0]
		if len(blocked) > 1 {
			msg += fmt.Sprintf(" (+%d more blocked)", len(blocked)-1)
		}
	case len(terminating) > 0:
		msg += ", waiting for " + terminating[0]
		if len(terminating) > 1 {
			msg += fmt.Sprintf(" and %d more to terminate", len(terminating)-1)
		} else {
			msg += " to terminate"
		}
	}
	return msg
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// pdbOf names the PodDisruptionBudget of a 429 from the Eviction API, whose
// cause reads "The disruption budget NAME needs 5 healthy pods...".
func pdbOf(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		if details := se.Status().Details; details != nil {
			for _, c := range details.Causes {
				if c.Type != policyv1.DisruptionBudgetCause {
					continue
				}
				if name, ok := strings.CutPrefix(c.Message, "The disruption budget "); ok {
					if i := strings.IndexByte(name, ' '); i > 0 {
						return "PDB " + name[:i]
					}
				}
			}
		}
	}
	return "a PodDisruptionBudget"
}

// kubectl's filters name their remedy as kubectl flags; ours are settings.
var remedies = strings.NewReplacer(
	"use --force to override", "set drain.force to override",
	"use --delete-emptydir-data to override", "set drain.deleteEmptyDirData to override",
	"use --ignore-daemonsets to ignore", "DaemonSet pods are ignored",
)

// refusedPods turns an error of kubectl's filters, "cannot delete WHY: ns/a,
// ns/b", into one entry per pod: "ns/a refused: WHY".
func refusedPods(err error) []string {
	msg := remedies.Replace(strings.TrimSpace(err.Error()))
	why, pods, ok := strings.Cut(strings.TrimPrefix(msg, "cannot delete "), "): ")
	if !ok {
		return []string{msg}
	}
	why += ")"
	var out []string
	for _, p := range strings.Split(pods, ",") {
		out = append(out, strings.TrimSpace(p)+" refused: cannot delete "+why)
	}
	return out
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// slogWriter turns kubectl's Out/ErrOut lines into log records.
type slogWriter struct {
	log   *slog.Logger
	level slog.Level
}

var _ io.Writer = slogWriter{}

func (w slogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			w.log.Log(context.Background(), w.level, line, "component", "kubectl-drain")
		}
	}
	return len(p), nil
}
