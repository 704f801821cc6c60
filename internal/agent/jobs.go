package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/atomicfile"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/hostfiles/hostwatch"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
)

// jobRunner starts a job's command (`kustodian job-exec ID`) and tells
// whether it still runs.
type jobRunner interface {
	Start(ctx context.Context, j *jobs.Job) error
	// Alive says whether the job still runs. A query that fails is an
	// error, never a dead job: a dead job is run again.
	Alive(ctx context.Context, j *jobs.Job) (bool, error)
}

// systemdRunner runs each job in a transient unit of its own, outside the
// agent's sandbox (a job may upgrade /usr), with its output in the journal.
// It outlives the agent. It speaks to systemd over D-Bus (go-systemd).
type systemdRunner struct {
	exe, stateDir string

	mu   sync.Mutex
	conn *sddbus.Conn // nil until the first call, and after a failed one
}

var _ jobRunner = (*systemdRunner)(nil)

// jobUnit is the unit a job's run is in: its command's, or its rollback's
// while it rolls back.
func jobUnit(j *jobs.Job) string {
	if j.State == jobs.RollingBack {
		return fmt.Sprintf("kustodian-job-%s-%d-rollback.service", j.ID, j.Runs)
	}
	return fmt.Sprintf("kustodian-job-%s-%d.service", j.ID, j.Runs)
}

// call runs f on a connection to systemd, made at the first call and made
// again after a failure.
func (r *systemdRunner) call(ctx context.Context, f func(*sddbus.Conn) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil || !r.conn.Connected() {
		c, err := sddbus.NewSystemConnectionContext(ctx)
		if err != nil {
			return fmt.Errorf("connecting to systemd: %w", err)
		}
		r.conn = c
	}
	err := f(r.conn)
	if err != nil {
		r.conn.Close()
		r.conn = nil
	}
	return err
}

func (r *systemdRunner) Start(ctx context.Context, j *jobs.Job) error {
	unit := jobUnit(j)
	props := []sddbus.Property{
		sddbus.PropDescription("Kustodian job " + j.ID),
		sddbus.PropExecStart([]string{r.exe, "job-exec", "--config", "/dev/null", "--state-dir", r.stateDir, j.ID}, false),
		// Gone once it ended, failed or not (systemd-run --collect): its
		// result is in the job's file, its output in the journal.
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
	}
	return r.call(ctx, func(c *sddbus.Conn) error {
		done := make(chan string, 1)
		if _, err := c.StartTransientUnitContext(ctx, unit, "fail", props, done); err != nil {
			return fmt.Errorf("starting %s: %w", unit, err)
		}
		select {
		case result := <-done:
			if result != "done" {
				return fmt.Errorf("starting %s: systemd's job ended %s", unit, result)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("starting %s: %w", unit, ctx.Err())
		}
	})
}

func (r *systemdRunner) Alive(ctx context.Context, j *jobs.Job) (bool, error) {
	unit := jobUnit(j)
	var state string
	err := r.call(ctx, func(c *sddbus.Conn) error {
		p, err := c.GetUnitPropertyContext(ctx, unit, "ActiveState")
		var derr godbus.Error
		if errors.As(err, &derr) && derr.Name == "org.freedesktop.systemd1.NoSuchUnit" {
			state = "inactive" // collected: it ended
			return nil
		}
		if err != nil {
			return fmt.Errorf("asking systemd whether %s runs: %w", unit, err)
		}
		if err := p.Value.Store(&state); err != nil {
			return fmt.Errorf("the ActiveState of %s: %w", unit, err)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	switch state {
	case "active", "activating", "deactivating", "reloading":
		return true, nil
	}
	return false, nil
}

// execRunner runs jobs where there is no systemd (tests, containers), each
// in a process group of its own whose leader's PID and start time it keeps
// beside the job. A job outlives the agent as under systemd: an agent that
// starts again (after a kill -9, say) finds it by that record, the same
// process and not a recycled PID, and waits for it instead of starting it
// a second time.
type execRunner struct {
	exe, stateDir string
	mu            sync.Mutex
	running       map[string]chan struct{}
}

var _ jobRunner = (*execRunner)(nil)

func (r *execRunner) pidFile(j *jobs.Job) string {
	return filepath.Join(jobs.DirIn(r.stateDir), jobUnit(j)+".pid")
}

func (r *execRunner) Start(_ context.Context, j *jobs.Job) error {
	cmd := exec.Command(r.exe, "job-exec", "--config", "/dev/null", "--state-dir", r.stateDir, j.ID)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr // the agent's log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting job %s: %w", j.ID, err)
	}
	done := make(chan struct{})
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]chan struct{}{}
	}
	r.running[jobUnit(j)] = done
	r.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
	pid := cmd.Process.Pid
	started, err := processStart(pid)
	if err == nil {
		err = atomicfile.Write(r.pidFile(j), fmt.Appendf(nil, "%d %d\n", pid, started), 0o600)
	}
	if err != nil {
		// Unrecorded, a job could run twice after a restart: stop it.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("recording job %s: %w", j.ID, err)
	}
	return nil
}

func (r *execRunner) Alive(_ context.Context, j *jobs.Job) (bool, error) {
	return r.alive(j), nil
}

func (r *execRunner) alive(j *jobs.Job) bool {
	r.mu.Lock()
	done, ok := r.running[jobUnit(j)]
	r.mu.Unlock()
	if ok {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	// Started before this agent did.
	b, err := os.ReadFile(r.pidFile(j))
	if err != nil {
		return false
	}
	var pid int
	var started uint64
	if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &started); err != nil || pid <= 1 {
		return false
	}
	if now, err := processStart(pid); err == nil && now == started {
		return true
	}
	_ = os.Remove(r.pidFile(j))
	return false
}

// processStart is when process pid started, in clock ticks since boot
// (field 22 of /proc/PID/stat); an error for a process that is gone or a
// zombie.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count from after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 20 || f[0] == "Z" {
		return 0, fmt.Errorf("process %d is gone", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// newJobRunner picks the systemd runner on a host booted with systemd.
func newJobRunner(stateDir string) jobRunner {
	exe, err := os.Executable()
	if err != nil {
		exe = "/usr/bin/kustodian"
	}
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		return &systemdRunner{exe: exe, stateDir: stateDir}
	}
	return &execRunner{exe: exe, stateDir: stateDir}
}

// bootIDFile holds an ID made at the first call in each boot: /run is
// emptied by every boot, containers' included (the kernel's boot_id is the
// same for a container's every boot).
const bootIDFile = "/run/kustodian/boot-id"

// bootID identifies this boot of the host.
func bootID() string {
	if b, err := os.ReadFile(bootIDFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	buf := make([]byte, 16)
	_, _ = rand.Read(buf)
	id := hex.EncodeToString(buf)
	_ = os.MkdirAll(filepath.Dir(bootIDFile), 0o755)
	f, err := os.OpenFile(bootIDFile, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil { // made meanwhile, or /run is not writable
		if b, rerr := os.ReadFile(bootIDFile); rerr == nil {
			return strings.TrimSpace(string(b))
		}
		return id
	}
	defer f.Close()
	_, _ = f.WriteString(id + "\n")
	return id
}

// watchJobs reports changes of the jobs directory (job-exec writing a
// result); nil when it cannot be watched (the resync still reads it).
func watchJobs(ctx context.Context, dir string) <-chan struct{} {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil
	}
	c, err := hostwatch.Dir(ctx, dir)
	if err != nil {
		return nil
	}
	return c
}

// lookUpJob looks up the maintenance's current managed job and what its
// next step depends on (decide.Need.Job); sentinel: the host's reboot
// sentinel is there. What cannot be looked up is said in the look-up
// (JobLookup.Err): the step renews the locks and keeps the cordon before
// it fails.
func (a *Agent) lookUpJob(ctx context.Context, sentinel bool) *decide.JobLookup {
	j, err := a.jobs.store.Current()
	if err != nil {
		return &decide.JobLookup{Err: permanent(err)}
	}
	if j == nil {
		return &decide.JobLookup{}
	}
	l, err := a.jobFacts(ctx, j, sentinel)
	if err != nil {
		return &decide.JobLookup{Err: err} // asked again at the next step
	}
	return l
}

// jobFacts gathers what jobs.Next needs of job j: whether it still runs
// (read again when it does not: it may have ended just now), and whether a
// reboot is pending after it. sentinel is the reboot sentinel as the step
// read the host's files, before the job's state: a job that ended since
// may have left it, so once the job has ended it is read again.
func (a *Agent) jobFacts(ctx context.Context, j *jobs.Job, sentinel bool) (*decide.JobLookup, error) {
	f := jobs.Facts{Now: a.now(), Boot: bootID(), CanReboot: a.host.reboot != nil,
		RebootAsked: a.jobs.rebootAsked == jobUnit(j), Unit: jobUnit(j)}
	if j.State == jobs.Running || j.State == jobs.RollingBack {
		alive, err := a.jobs.runner.Alive(ctx, j)
		if err != nil {
			return nil, err
		}
		if !alive {
			if j, err = a.jobs.store.Get(j.ID); err != nil {
				return nil, err
			}
		}
		f.Alive = alive
	}
	if !f.Alive && !sentinel {
		var err error
		if sentinel, err = a.files.RebootPending(); err != nil {
			return nil, err
		}
	}
	f.RebootPending = a.rebootPendingAfter(ctx, j, sentinel)
	return &decide.JobLookup{Job: j, Facts: f}, nil
}

// doJob carries out the managed job's step, and publishes where the
// maintenance stands.
func (a *Agent) doJob(ctx context.Context, o decide.Observed, node *corev1.Node, js *decide.JobStep) error {
	said, failed, err := a.actOnJob(ctx, js.Step, js.Facts)
	if err != nil {
		return err
	}
	if failed {
		return a.publish(ctx, lock.Failed, o, node, said)
	}
	return a.publish(ctx, lock.InMaintenance, o, node, "in maintenance: "+said)
}

// actOnJob does a job's step: save the job, then start it, reboot, or end
// it.
func (a *Agent) actOnJob(ctx context.Context, step jobs.Step, f jobs.Facts) (string, bool, error) {
	j := step.Job
	a.jobs.wakeAt = step.WakeAt
	if step.Save {
		if err := a.jobs.store.Save(&j); err != nil {
			return "", false, err
		}
	}
	switch {
	case step.Log != "" && step.Warn:
		a.log.Warn(step.Log, "job", j.ID, "run", j.Runs)
	case step.Log != "":
		a.log.Info(step.Log, "job", j.ID, "run", j.Runs)
	}
	switch step.Do {
	case jobs.Start:
		if err := a.jobs.runner.Start(ctx, &j); err != nil {
			return a.actOnJob(ctx, jobs.StartFailed(j, f, err), f)
		}
	case jobs.Reboot:
		if err := a.host.reboot.Reboot(ctx); err != nil {
			return "", false, fmt.Errorf("asking logind to reboot: %w", err)
		}
		a.jobs.rebootAsked = jobUnit(&j)
	case jobs.Finish:
		// The agent made the request for the job, so it ends it.
		a.jobs.ended = &j
		if err := a.jobs.store.ClearCurrent(); err != nil {
			return "", false, err
		}
		if err := a.files.RemoveRequest(); err != nil {
			return "", false, err
		}
	}
	if step.Again {
		a.poke()
	}
	return step.Message, step.Failed, nil
}

// rebootPendingAfter says whether a reboot is pending after job j (one
// that reboots: --reboot auto): the sentinel, or, once the job succeeded,
// the host's command or needs-restarting (which leave no file). A check
// that fails is logged, and the sentinel alone decides.
func (a *Agent) rebootPendingAfter(ctx context.Context, j *jobs.Job, sentinel bool) bool {
	c := a.rebootTrigger.check
	if sentinel || j.State != jobs.Succeeded || j.Reboot != jobs.RebootAuto || (c.Command == "" && c.NeedsRestarting == "") {
		return sentinel
	}
	need, _, err := c.Required(ctx)
	if err != nil {
		a.log.Warn("cannot tell whether the host needs a reboot after the job; the reboot sentinel alone decides", "job", j.ID, "err", err)
		return false
	}
	return need
}
