package nodecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/metrics"
	"github.com/kustodian/kustodian/internal/status"
)

// lastLines is how much of a job's output its record keeps.
const lastLines = 10

func newRunCommand() *cobra.Command {
	var id, reboot string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run [--id ID] [--reboot auto|never] [--wait] -- CMD [ARGS...]",
		Short: "Submit a maintenance job: the agent runs it once this node's turn comes",
		Long: `run records a managed job under the state directory and requests maintenance.
Once the node holds the lock and is drained, the agent runs CMD (output to the
journal, exit code and last lines in the node record). Exit 0 with no reboot
pending completes the maintenance. Exit 0 with the reboot sentinel present and
--reboot auto (default) reboots the node through logind, keeping the lock, and
runs CMD again after the boot: jobs must be idempotent. A non-zero exit leaves the
node Failed, cordoned, with the lock held. --wait follows the job to its end and
exits with its exit code.

With --id, run is idempotent: when a job of that ID exists already (with the
same command), it is not submitted again; run prints its state and exits 0
once it succeeded and the node is given back, with the job's exit code once
it failed (1 for a job's own 75 or 76), 75 while it is pending or running, and
76 when it is pending behind a lock that a Failed node holds (--wait follows it
instead). Automation polls it that way, across the job's reboots.

--wait prints a line at each change of the job's state and, while it is
pending, of why (the agent's place in the queue, the gates that hold it, the
API server unreachable); it exits 76 as soon as the job is blocked behind a
Failed node, and with --timeout D, 75 when the job is still going after D.`,
		Args: cobra.MinimumNArgs(1),
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "kubeconfig", "node-name", "namespace", "request-file", "state-dir")
	cmd.Flags().StringVar(&id, "id", "", "the job's ID (default: job-<time>)")
	cmd.Flags().StringVar(&reboot, "reboot", jobs.RebootAuto, "reboot when the job leaves the reboot sentinel: auto or never")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the job to end and exit with its exit code")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait: exit 75 when the job is still going after this long (0: wait for its end)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := cf.Load()
		if err != nil {
			return err
		}
		if reboot != jobs.RebootAuto && reboot != jobs.RebootNever {
			return fmt.Errorf("--reboot %q: use auto or never", reboot)
		}
		if timeout < 0 || (timeout > 0 && !wait) {
			return fmt.Errorf("--timeout %s: give a positive duration, with --wait", timeout)
		}
		store := jobs.StoreIn(cfg.StateDir)
		f := follower{store: store, request: cfg.RequestFile, out: cmd.OutOrStdout(), timeout: timeout,
			pending: func(ctx context.Context) (string, string) {
				var submitted time.Time
				if j, err := store.Get(id); err == nil {
					submitted = j.Created
				}
				return whyPending(ctx, cfg, submitted, time.Now())
			}}
		if id == "" {
			id = "job-" + time.Now().UTC().Format("20060102-150405")
		} else if existing, err := store.Get(id); err == nil {
			// Submitted before (a re-run of a playbook): report, or follow, it.
			return f.existing(cmd.Context(), existing, args, wait)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		files := hostfiles.Files{Request: cfg.RequestFile}
		if _, err := os.Stat(cfg.RequestFile); err == nil {
			return fmt.Errorf("%w on this node (%s exists); wait for it to end", hostfiles.ErrRequested, cfg.RequestFile)
		}
		job := &jobs.Job{ID: id, Command: args, Reboot: reboot, Created: time.Now().UTC(), State: jobs.Pending}
		if err := store.Create(job); err != nil {
			return err
		}
		// The request is made whole and only if there is none: of two runs
		// at once, the one that lost the request takes its job back.
		if _, err := files.CreateRequest(fmt.Sprintf("job %s: %s\n", id, strings.Join(args, " "))); err != nil {
			if derr := store.Discard(id); derr != nil {
				return fmt.Errorf("%w (and job %s could not be removed: %v)", err, id, derr)
			}
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "job %s submitted; maintenance requested (%s)\n", id, cfg.RequestFile)
		if !wait {
			return nil
		}
		return f.wait(cmd.Context(), id)
	}
	return cmd
}

// ExitPending is the exit code of `kustodian run --id ID` for a job that
// is still pending or running (EX_TEMPFAIL): ask again later. ExitBlocked:
// the job waits for a lock that a Failed node holds, so it will not run
// until an admin steps in.
const (
	ExitPending = 75
	ExitBlocked = 76
)

// whyPending says why this node's pending job has not run yet: what the
// agent last saw (metrics.json in the state directory: its state, its place
// in the queue, the gates that hold it, its failing steps), whether the
// agent still runs, and whether this node reaches the API server. blocked
// is not "" when every slot of its group is held by another node whose
// maintenance Failed: the job will not run until an admin steps in.
func whyPending(ctx context.Context, cfg config.Agent, submitted, now time.Time) (why, blocked string) {
	var parts []string
	if d, at, err := metrics.Read(cfg.StateDir); err == nil {
		parts = append(parts, agentView(d, at, submitted, now))
	} else if errors.Is(err, os.ErrNotExist) {
		parts = append(parts, "the agent has not run yet on this node (systemctl status kustodian.path kustodian.service)")
	}
	nc, err := connectWith(ctx, cfg, false, nil, nil)
	if err != nil {
		return strings.Join(append(parts, "from here: "+err.Error()), "; "), ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	held, err := (&lockapi.Client{Kube: nc.kube, Namespace: nc.cfg.Namespace}).FailedHolders(ctx, nc.node)
	if err != nil {
		return strings.Join(append(parts, "from here: "+err.Error()), "; "), ""
	}
	var holders []string
	for _, h := range held {
		holders = append(holders, fmt.Sprintf("%s holds %s and Failed: %s", status.Printable(h.Node), h.Lock, status.Printable(h.Message)))
	}
	return strings.Join(parts, "; "), strings.Join(holders, "; ")
}

// agentStale is how long the agent may go without writing its state while
// it runs (it writes at every change and every minute) before it counts as
// stopped.
const agentStale = 150 * time.Second

// agentView puts what the agent last kept (at) into words. The agent exits
// when its node is Idle, so what it kept before the job was submitted is
// an earlier maintenance's: it has not picked the request up yet.
func agentView(d metrics.Data, at, submitted, now time.Time) string {
	if at.Before(submitted) {
		if waited := now.Sub(submitted).Round(time.Second); waited > agentStale {
			return fmt.Sprintf("the agent has not picked up the request in %s: is kustodian.path enabled? (systemctl status kustodian.path kustodian.service; journalctl -u kustodian.service)", waited)
		}
		return "the agent has not picked up the request yet (kustodian.path starts it)"
	}
	ago := now.Sub(at).Round(time.Second)
	if ago > agentStale {
		return fmt.Sprintf("the agent has written nothing since %s (%s ago), when it was %s: is it running? (systemctl status kustodian.service; journalctl -u kustodian.service)",
			at.UTC().Format(time.RFC3339), ago, d.State)
	}
	s := "the agent: " + d.State
	if !d.StateSince.IsZero() {
		s += " since " + d.StateSince.UTC().Format(time.RFC3339)
	}
	if d.QueuePosition > 0 {
		s += fmt.Sprintf(", position %d in its queue", d.QueuePosition)
	}
	var closed []string
	for gate, shut := range d.Blocked {
		if shut {
			closed = append(closed, gate)
		}
	}
	if len(closed) > 0 {
		sort.Strings(closed)
		s += ", held by " + strings.Join(closed, ", ") + " (kustodian-ctl status NODE says why)"
	}
	if d.StepFailures > 0 {
		s += fmt.Sprintf(", its steps failing since %s (%d in a row: the API server unreachable, or refusing; journalctl -u kustodian.service)",
			d.FailingSince.UTC().Format(time.RFC3339), d.StepFailures)
	}
	return s
}

// follower reports and follows a managed job.
type follower struct {
	store   jobs.Store
	request string
	out     io.Writer
	timeout time.Duration // of wait; 0: none
	// pending says why a pending job has not run, and blocked, when it
	// cannot run until an admin steps in.
	pending func(context.Context) (why, blocked string)
}

// existing reports a job submitted before under the same ID instead of
// submitting it again: exit 0 once it succeeded and the node is given
// back, its exit code once it failed, ExitPending meanwhile (ExitBlocked
// behind a Failed node); with wait, follows it to its end.
func (f follower) existing(ctx context.Context, j *jobs.Job, args []string, wait bool) error {
	if strings.Join(j.Command, "\x00") != strings.Join(args, "\x00") {
		return fmt.Errorf("job %s exists already with another command (%s); choose another --id", j.ID, strings.Join(j.Command, " "))
	}
	if wait {
		return f.wait(ctx, j.ID)
	}
	fmt.Fprintln(f.out, j.Summary())
	if ended, err := jobEnded(j, f.request); ended {
		return err
	}
	if j.State == jobs.Pending {
		if err := f.explain(ctx, new(string)); err != nil {
			return err
		}
	}
	fmt.Fprintln(f.out, "not done yet")
	return exitCode(ExitPending)
}

// explain prints why the pending job has not run, when that changed from
// *last, and returns ExitBlocked when it is blocked.
func (f follower) explain(ctx context.Context, last *string) error {
	why, blocked := f.pending(ctx)
	if blocked != "" {
		fmt.Fprintln(f.out, "blocked: "+blocked+"; the job runs once an admin repairs that node or releases its lock (kustodian-ctl release)")
		return exitCode(ExitBlocked)
	}
	if why != "" && why != *last {
		fmt.Fprintln(f.out, "pending: "+why)
	}
	*last = why
	return nil
}

// jobEnded tells whether a job has ended for good: failed (err is its exit
// code, see failedJobCode), or succeeded with the request gone, the node
// given back (nil).
func jobEnded(j *jobs.Job, request string) (ended bool, err error) {
	switch {
	case j.Held():
		return true, exitCode(failedJobCode(j.ExitCode))
	case j.State == jobs.Succeeded:
		_, err := os.Stat(request)
		return errors.Is(err, os.ErrNotExist), nil
	}
	return false, nil
}

// failedJobCode is what `kustodian run` exits with for a failed job: the
// job's own exit code, except 0 (no code: the command did not start) and
// the codes that mean something else here, ExitPending and ExitBlocked,
// which become 1, so that automation never reads a failed job as one to
// ask about again. The summary line keeps the job's real code.
func failedJobCode(code *int) int {
	if code == nil || *code == 0 || *code == ExitPending || *code == ExitBlocked {
		return 1
	}
	return *code
}

// exitCode makes the binary exit with a job's code.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("the job exited %d", int(e)) }

// explainEvery is how often wait asks again why a pending job waits.
var explainEvery = 15 * time.Second

// wait follows a job until it has ended (jobEnded), printing its state at
// each change and, while it is pending, why: nil for a success, the job's
// exit code (an exitCode) for a failure, ExitBlocked as soon as it is
// blocked, ExitPending at the timeout.
func (f follower) wait(ctx context.Context, id string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	for _, dir := range []string{f.store.Dir, filepath.Dir(f.request)} {
		if err := w.Add(dir); err != nil {
			return err
		}
	}
	var deadline <-chan time.Time
	if f.timeout > 0 {
		t := time.NewTimer(f.timeout)
		defer t.Stop()
		deadline = t.C
	}
	ask := time.NewTicker(explainEvery)
	defer ask.Stop()
	last, lastWhy := "", ""
	explain := true
	for {
		j, err := f.store.Get(id)
		if err != nil {
			return err
		}
		if s := j.Summary(); s != last {
			fmt.Fprintln(f.out, s)
			last = s
		}
		if ended, err := jobEnded(j, f.request); ended {
			return err
		}
		if j.State == jobs.Pending && explain {
			if err := f.explain(ctx, &lastWhy); err != nil {
				return err
			}
		}
		explain = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			fmt.Fprintf(f.out, "job %s not done after %s\n", id, f.timeout)
			return exitCode(ExitPending)
		case <-ask.C:
			explain = true
		case <-w.Events:
		case err := <-w.Errors:
			return err
		}
	}
}

// ExitCode is the job's exit code, for main.
func (e exitCode) ExitCode() int { return int(e) }
