package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
)

// A job started without systemd runs in a process group of its own, and an
// agent that starts again finds it still running instead of starting it a
// second time; a recycled PID is not taken for it.
func TestExecRunnerFindsItsJobAfterARestart(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kustodian")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(jobs.DirIn(state), 0o700); err != nil {
		t.Fatal(err)
	}
	j := &jobs.Job{ID: "upgrade", Runs: 1}
	first := &execRunner{exe: exe, stateDir: state}
	if err := first.Start(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	var pid int
	b, err := os.ReadFile(first.pidFile(j))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(string(b), "%d", &pid); err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Errorf("job %d runs in process group %d (%v), want its own", pid, pgid, err)
	}

	again := &execRunner{exe: exe, stateDir: state} // the agent, started again
	if !again.alive(j) {
		t.Fatal("the restarted agent does not find the running job")
	}
	if again.alive(&jobs.Job{ID: "upgrade", Runs: 2}) {
		t.Error("another run of the job is taken for alive")
	}

	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for again.alive(j) {
		if time.Now().After(deadline) {
			t.Fatal("a killed job still counts as running")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A PID now used by another process (this test's) is not the job.
	if err := os.WriteFile(again.pidFile(j), fmt.Appendf(nil, "%d 1\n", os.Getpid()), 0o600); err != nil {
		t.Fatal(err)
	}
	if again.alive(j) {
		t.Error("a recycled PID is taken for the job")
	}
}

// stoppedRunner is a job runner whose jobs have all ended.
type stoppedRunner struct{}

func (stoppedRunner) Start(context.Context, *jobs.Job) error         { return nil }
func (stoppedRunner) Alive(context.Context, *jobs.Job) (bool, error) { return false, nil }

// A job that ends between the step's reading of the host's files and its
// asking the job's state leaves its reboot sentinel (an upgrade's
// /run/reboot-required) after the files were read: the step still sees it,
// and reboots instead of ending the maintenance without the reboot.
func TestJobFactsSeeTheSentinelTheJobLeft(t *testing.T) {
	dir := t.TempDir()
	store := jobs.Store{Dir: filepath.Join(dir, "jobs")}
	if err := os.MkdirAll(store.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	running := &jobs.Job{ID: "upgrade", Reboot: jobs.RebootAuto, State: jobs.Running, Runs: 1}
	if err := store.Create(running); err != nil {
		t.Fatal(err)
	}
	sentinel := filepath.Join(dir, "reboot-required")
	a := &Agent{files: hostfiles.Files{RebootSentinel: sentinel}}
	a.jobs.store, a.jobs.runner = store, stoppedRunner{}
	a.now = time.Now

	// Meanwhile the job ended well, and left the sentinel.
	ended := *running
	ended.State, ended.ExitCode = jobs.Succeeded, new(int)
	if err := store.Save(&ended); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sentinel, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := a.jobFacts(context.Background(), running, false) // the step read no sentinel
	if err != nil {
		t.Fatal(err)
	}
	if l.Job.State != jobs.Succeeded || !l.Facts.RebootPending {
		t.Fatalf("job %s, reboot pending %v; want succeeded, with the reboot its sentinel asks for", l.Job.State, l.Facts.RebootPending)
	}
}
