package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
)

// The exit codes of `kustodian-ctl wait` besides 0 (every node there) and
// 1 (an error: bad arguments, the API server).
const (
	ExitTimeout = 3 // --timeout passed first
	ExitFailed  = 4 // a node's maintenance Failed: it will not get there without an admin
)

// exitError makes the program exit with code after printing its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// ExitCode is the program's exit code for err (nil: 0).
func ExitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	if err != nil {
		return 1
	}
	return 0
}

// The conditions of --for.
const (
	forIdle        = "idle"
	forWaiting     = "waiting"
	forMaintenance = "maintenance"
	forDone        = "done"
)

// waitPoll is how often wait reads the status (two LISTs).
var waitPoll = 2 * time.Second

func newWaitCommand(o *options) *cobra.Command {
	var cond, selector, since string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait (NODE... | -l SELECTOR) --for=idle|waiting|maintenance|done [--timeout 1h]",
		Short: "Wait until nodes reach a maintenance state; exit codes a script can branch on",
		Long: `wait reads the status every 2 s until every node named (or selected by -l) meets
the condition of --for, printing a line for each node whose state changes:

  idle         the node is Idle: nothing requested, or back in service
  waiting      a maintenance of the node is requested: it waits in its queue or is
               past that (any state but Idle)
  maintenance  the node is drained and its maintenance runs (InMaintenance,
               Rebooting, Completing), or one succeeded since --since
  done         a maintenance of the node succeeded since --since (its history says
               so) and the node is Idle again; a request withdrawn before its
               maintenance began is not one

--since (default: when wait starts) is an RFC 3339 time or a duration ago (10m):
give it when the maintenance may have ended before wait started.

Exit codes: 0 every node meets the condition; 1 an error (bad arguments, a node
that does not exist, the API server); 3 --timeout passed first (the nodes not
there are named); 4 a node is Failed (its maintenance failed and it holds its
lock, cordoned, until an admin steps in: kustodian-ctl release), or, for
maintenance and done, the node's last maintenance since --since failed. An
interrupted wait (Ctrl-C) exits 1.`,
		Example: `  kustodian-ctl wait node-1 --for=done --timeout 2h
  kustodian-ctl wait -l pool=blue --for=idle
  ssh node-1 'kustodian run --id patch -- /root/patch.sh' && kustodian-ctl wait node-1 --for=done
  kustodian-ctl wait node-1 --for=done --since 30m; case $? in 3) echo late;; 4) echo failed;; esac`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch cond {
			case forIdle, forWaiting, forMaintenance, forDone:
			case "":
				return fmt.Errorf("--for is required: idle, waiting, maintenance or done")
			default:
				return fmt.Errorf("--for %q: use idle, waiting, maintenance or done", cond)
			}
			if (len(args) == 0) == (selector == "") {
				return fmt.Errorf("name the nodes, or select them with -l SELECTOR (not both)")
			}
			start := time.Now()
			from, err := parseSince(since, start)
			if err != nil {
				return err
			}
			r, err := o.reader()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			nodes := args
			if selector != "" {
				if nodes, err = selectedNodes(ctx, r, selector); err != nil {
					return err
				}
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return waitFor(ctx, r, nodes, cond, from, o.streams.Out)
		},
	}
	cmd.Flags().StringVar(&cond, "for", "", "idle, waiting, maintenance or done")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "the nodes whose labels match this selector (as kubectl get nodes -l)")
	cmd.Flags().StringVar(&since, "since", "", "for maintenance and done: count maintenances that ended after this (RFC 3339, or a duration ago like 10m; default: now)")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Hour, "give up after this long (exit 3); 0: never")
	_ = cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{forIdle, forWaiting, forMaintenance, forDone}, cobra.ShellCompDirectiveNoFileComp))
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: give an RFC 3339 time (2026-11-25T10:00:00Z) or a duration ago (10m)", s)
	}
	return t, nil
}

func selectedNodes(ctx context.Context, r status.Reader, selector string) ([]string, error) {
	list, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, status.Explain(err, "list", "nodes", "")
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no node matches -l %s", selector)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// waitFor polls until every node meets cond.
func waitFor(ctx context.Context, r status.Reader, nodes []string, cond string, since time.Time, out io.Writer) error {
	last := map[string]string{}
	for {
		in, err := r.Inputs(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return stopped(ctx, nodes, last, cond)
			}
			return err
		}
		s := status.Build(in)
		byName := map[string]status.Node{}
		for _, n := range s.Nodes {
			byName[n.Name] = n
		}
		ended := lastEnded(in.Nodes, since)
		pending := 0
		for _, name := range nodes {
			n, ok := byName[name]
			if !ok {
				return fmt.Errorf("node %q not found: there is no such Node and no Kustodian record for it in namespace %s", name, s.Namespace)
			}
			met, verdict := meets(n, cond, ended[name])
			if line := fmt.Sprintf("%s: %s", name, verdict); line != last[name] {
				fmt.Fprintln(out, line)
				last[name] = line
			}
			if n.State == lock.Failed {
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("node %s is Failed: %s; it stays so until an admin repairs it and removes its request, or releases it (kustodian-ctl release %s)", name, status.Printable(n.Message), name)}
			}
			if e := ended[name]; (cond == forDone || cond == forMaintenance) && e != nil && e.Result == history.Failed {
				return &exitError{code: ExitFailed, msg: fmt.Sprintf("the maintenance of node %s that ended %s failed: %s", name, e.Ended.UTC().Format(time.RFC3339), status.Printable(e.Message))}
			}
			if !met {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return stopped(ctx, nodes, last, cond)
		case <-time.After(waitPoll):
		}
	}
}

// stopped is why a wait stopped before the nodes got there: its --timeout
// (exit 3), or an interruption (the error, exit 1).
func stopped(ctx context.Context, nodes []string, last map[string]string, cond string) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("wait --for=%s interrupted: %w", cond, ctx.Err())
	}
	var where []string
	for _, n := range nodes {
		if last[n] != "" {
			where = append(where, last[n])
		}
	}
	return &exitError{code: ExitTimeout, msg: fmt.Sprintf("timed out waiting for --for=%s; last seen: %s", cond, strings.Join(where, "; "))}
}

// meets tells whether a node meets cond, and says where it stands. ended
// is its last maintenance that ended since --since (nil: none).
func meets(n status.Node, cond string, ended *history.Entry) (bool, string) {
	state := string(n.State)
	if n.State == lock.Waiting && n.QueuePosition > 0 {
		state += fmt.Sprintf(" (position %d)", n.QueuePosition)
	}
	succeeded := ended != nil && ended.Result == history.Succeeded
	switch cond {
	case forIdle:
		return n.State == lock.Idle, state
	case forWaiting:
		return n.State != lock.Idle, state
	case forMaintenance:
		switch n.State {
		case lock.InMaintenance, lock.Rebooting, lock.Completing:
			return true, state
		}
		if succeeded {
			return true, state + ", a maintenance succeeded " + ended.Ended.UTC().Format(time.RFC3339)
		}
		return false, state
	default: // done
		if n.State == lock.Idle && succeeded {
			return true, "done (succeeded " + ended.Ended.UTC().Format(time.RFC3339) + ")"
		}
		return false, state
	}
}

// lastEnded is each node's last maintenance that ended at since or later,
// from its history.
func lastEnded(nodes []corev1.Node, since time.Time) map[string]*history.Entry {
	out := map[string]*history.Entry{}
	for _, n := range nodes {
		entries, err := history.Parse(n.Annotations[history.Annotation])
		if err != nil || len(entries) == 0 {
			continue
		}
		if e := entries[len(entries)-1]; !e.Ended.Before(since) {
			out[n.Name] = &e
		}
	}
	return out
}
