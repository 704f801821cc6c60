package nodecmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/jobs"
)

// newJobExecCommand is what the agent starts to run a job: it runs the
// command (or, once it failed, its rollback), copies its output to its own
// (the journal), and records the exit code and the last lines.
func newJobExecCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "job-exec JOB-ID",
		Short:  "Run a managed job's command (started by the agent)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
	}
	cf := addConfigFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := cf.Load()
		if err != nil {
			return err
		}
		store := jobs.StoreIn(cfg.StateDir)
		j, err := store.Get(args[0])
		if err != nil {
			return err
		}
		if j.State == jobs.RollingBack {
			// The command failed; its rollback runs, and its result is
			// kept apart from the command's.
			code, tail, runErr := runCommand(cmd.Context(), j.Rollback, j.Dir, cmd.OutOrStdout())
			j.RollbackExitCode, j.RollbackLastLines = &code, tail
			j.State = outcome(j, code, runErr, jobs.RolledBack, jobs.RollbackFailed)
			return saveResult(cmd.Context(), store, j, cmd.ErrOrStderr())
		}
		code, tail, runErr := runCommand(cmd.Context(), j.Command, j.Dir, cmd.OutOrStdout())
		j.ExitCode, j.LastLines, j.Finished = &code, tail, time.Now().UTC()
		j.Message = ""
		j.State = outcome(j, code, runErr, jobs.Succeeded, jobs.Failed)
		return saveResult(cmd.Context(), store, j, cmd.ErrOrStderr())
	}
	return cmd
}

// outcome is the state a run leaves the job in: ok for exit 0, failed
// otherwise; a command that could not run says why in the job's message.
func outcome(j *jobs.Job, code int, runErr error, ok, failed string) string {
	switch {
	case runErr != nil:
		j.Message = runErr.Error()
		return failed
	case code != 0:
		return failed
	}
	return ok
}

// resultRetry is how often job-exec tries again to record a result it
// could not write.
var resultRetry = 2 * time.Second

// saveResult records a job's result, trying again until it can: a result
// not recorded would look like a job that died, and the agent would run it
// again (a job that filled the disk, once more). Meanwhile the job counts
// as running, the node stays in maintenance, and the journal says why.
func saveResult(ctx context.Context, store jobs.Store, j *jobs.Job, log io.Writer) error {
	err := store.Save(j)
	if err == nil {
		return nil
	}
	fmt.Fprintf(log, "job %s ended (%s) but its result cannot be recorded: %v; trying again every %s until it can (free space in %s)\n",
		j.ID, j.Summary(), err, resultRetry, store.Dir)
	t := time.NewTicker(resultRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s: result not recorded: %w", j.ID, err)
		case <-t.C:
		}
		if err = store.Save(j); err == nil {
			fmt.Fprintf(log, "job %s: result recorded\n", j.ID)
			return nil
		}
	}
}

// runCommand runs argv in dir ("": this one) with its output copied to
// out, and returns the exit code and the last lines.
func runCommand(ctx context.Context, argv []string, dir string, out io.Writer) (int, []string, error) {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = dir
	pr, pw := io.Pipe()
	c.Stdout, c.Stderr = pw, pw
	var tail []string
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(out, line)
			mu.Lock()
			tail = append(tail, line)
			if len(tail) > lastLines {
				tail = tail[1:]
			}
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := c.Run()
	pw.Close()
	<-done
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), tail, nil
	}
	if err != nil {
		return 127, tail, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	return 0, tail, nil
}
