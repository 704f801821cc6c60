// Package gates reads what a policy's gates depend on beyond the agent's
// own watches (docs/policy.md): the host's gate command, Prometheus, the
// availability of disrupted workloads and of the policy's nodes. The head
// of a queue calls these every gates.poll; the decision itself is
// internal/decide's.
package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/alertmanager"
	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/hostcmd"
	"github.com/kustodian/kustodian/internal/httpx"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// Command runs the host's gate command through /bin/sh -c: exit 0 opens the
// gate; otherwise its last line of output says why it is closed.
func Command(ctx context.Context, command string, timeout time.Duration) decide.CommandResult {
	out, code, err := hostcmd.Run(ctx, timeout, "/bin/sh", "-c", command)
	switch last := hostcmd.LastLine(out); {
	case err == nil && code == 0:
		return decide.CommandResult{OK: true}
	case err != nil && strings.HasPrefix(err.Error(), "did not finish"):
		return decide.CommandResult{Reason: err.Error()}
	case last != "":
		return decide.CommandResult{Reason: last}
	case err != nil:
		return decide.CommandResult{Reason: err.Error()}
	default:
		return decide.CommandResult{Reason: fmt.Sprintf("exit status %d", code)}
	}
}

// Nodes reads every Node's readiness and schedulability, and its policy
// among policies (resolved from its labels as its agent resolves it): from
// the API server's watch cache, or with fresh, a consistent read.
func Nodes(ctx context.Context, kube kubernetes.Interface, fresh bool, policies []*policy.MaintenancePolicy) ([]lock.NodeHealth, error) {
	opts := metav1.ListOptions{ResourceVersion: "0"}
	if fresh {
		opts.ResourceVersion = ""
	}
	list, err := kube.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing nodes for health.maxUnavailable: %w", err)
	}
	out := make([]lock.NodeHealth, 0, len(list.Items))
	for _, n := range list.Items {
		h := lock.NodeHealth{Name: n.Name, Policy: policy.Resolve(policies, n.Labels).Name, Unschedulable: n.Spec.Unschedulable}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				h.Ready = c.Status == corev1.ConditionTrue
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// Workloads reads the availability of controllers named kind/namespace/name
// (Deployment, StatefulSet, ReplicaSet, DaemonSet). One that is gone no
// longer needs waiting for.
func Workloads(ctx context.Context, kube kubernetes.Interface, refs []string) ([]decide.Workload, error) {
	var out []decide.Workload
	for _, ref := range refs {
		parts := strings.SplitN(ref, "/", 3)
		if len(parts) != 3 {
			continue
		}
		kind, ns, name := parts[0], parts[1], parts[2]
		w := decide.Workload{Ref: ref}
		var err error
		apps := kube.AppsV1()
		switch kind {
		case "Deployment":
			d, e := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err = e; e == nil {
				w.Desired, w.Available = replicas(d.Spec.Replicas), d.Status.AvailableReplicas
				if d.Status.ObservedGeneration < d.Generation {
					w.Available = min(w.Available, d.Status.UpdatedReplicas)
				}
			}
		case "StatefulSet":
			s, e := apps.StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err = e; e == nil {
				w.Desired, w.Available = replicas(s.Spec.Replicas), s.Status.AvailableReplicas
			}
		case "ReplicaSet":
			r, e := apps.ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err = e; e == nil {
				w.Desired, w.Available = replicas(r.Spec.Replicas), r.Status.AvailableReplicas
				// A Deployment's pods: its availability is what counts (the
				// ReplicaSet may be replaced by a rollout meanwhile).
				if c := metav1.GetControllerOf(r); c != nil && c.Kind == "Deployment" {
					d, e := apps.Deployments(ns).Get(ctx, c.Name, metav1.GetOptions{})
					if err = e; e == nil {
						w.Ref = "Deployment/" + ns + "/" + c.Name
						w.Desired, w.Available = replicas(d.Spec.Replicas), d.Status.AvailableReplicas
					}
				}
			}
		default:
			continue
		}
		if apierrors.IsNotFound(err) {
			w.Gone = true
		} else if err != nil {
			return nil, fmt.Errorf("reading %s for health.workloadsRecovered: %w", ref, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// Prometheus asks Prometheus: with a query, whether the instant query has
// results; otherwise which alerts fire (and are pending, unless firingOnly),
// filtered by alertFilterRegexp as Kured filters them. Any failure to get an
// answer is reported in Err: it blocks.
func Prometheus(ctx context.Context, client *http.Client, auth config.Auth, p *policy.Prometheus) *decide.PrometheusResult {
	if p.Query != "" {
		return query(ctx, client, auth, p)
	}
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := get(ctx, client, auth, strings.TrimSuffix(p.URL, "/")+"/api/v1/alerts", &body); err != nil {
		return &decide.PrometheusResult{Err: err.Error()}
	}
	if body.Status != "success" {
		return &decide.PrometheusResult{Err: "Prometheus answered " + body.Status + ": " + body.Error}
	}
	var names []string
	for _, a := range body.Data.Alerts {
		if a.State != "firing" && (p.FiringOnly || a.State != "pending") {
			continue
		}
		names = append(names, a.Labels["alertname"])
	}
	names = blockingNames(names, p.AlertFilterRegexp, p.AlertFilterMatchOnly)
	return &decide.PrometheusResult{Blocking: names}
}

func query(ctx context.Context, client *http.Client, auth config.Auth, p *policy.Prometheus) *decide.PrometheusResult {
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	u := strings.TrimSuffix(p.URL, "/") + "/api/v1/query?query=" + url.QueryEscape(p.Query)
	if err := get(ctx, client, auth, u, &body); err != nil {
		return &decide.PrometheusResult{Err: err.Error()}
	}
	if body.Status != "success" {
		return &decide.PrometheusResult{Err: "Prometheus answered " + body.Status + ": " + body.Error}
	}
	if body.Data.ResultType != "vector" && body.Data.ResultType != "matrix" {
		// A scalar or string always has a value: it says nothing.
		return &decide.PrometheusResult{Err: fmt.Sprintf("query %q gives a %s, not a vector: write a query whose result is empty when all is well", p.Query, body.Data.ResultType)}
	}
	if n := len(body.Data.Result); n > 0 {
		return &decide.PrometheusResult{Blocking: []string{fmt.Sprintf("%d series", n)}}
	}
	return &decide.PrometheusResult{}
}

func get(ctx context.Context, client *http.Client, auth config.Auth, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	auth.Apply(req)
	resp, b, err := httpx.Exchange(client, req, u)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", u, resp.Status)
		}
		return fmt.Errorf("%s answered something that is not Prometheus' JSON: %v", u, err)
	}
	return nil
}

// Alertmanager asks Alertmanager which alerts are active, neither silenced
// nor inhibited, and match b's matchers, then filters their names by
// alertFilterRegexp as Kured filters them. Any failure to get an answer is
// reported in Err: it blocks.
func Alertmanager(ctx context.Context, client *alertmanager.Client, b *policy.AlertmanagerBlocker) *decide.PrometheusResult {
	alerts, err := client.ActiveAlerts(ctx, b.Matchers)
	if err != nil {
		return &decide.PrometheusResult{Err: err.Error()}
	}
	var names []string
	for _, a := range alerts {
		names = append(names, a.Labels["alertname"])
	}
	names = blockingNames(names, b.AlertFilterRegexp, b.AlertFilterMatchOnly)
	return &decide.PrometheusResult{Blocking: names}
}

// blockingNames are the alert names that block, each once and sorted, as
// Kured filters them: filterRegexp names alerts to ignore, or with
// matchOnly the only alerts that block (checked by policy.Validate).
func blockingNames(names []string, filterRegexp string, matchOnly bool) []string {
	var filter *regexp.Regexp
	if filterRegexp != "" {
		filter = regexp.MustCompile(filterRegexp)
	}
	seen := map[string]bool{}
	var out []string
	for _, name := range names {
		if filter != nil && filter.MatchString(name) != matchOnly {
			continue
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
