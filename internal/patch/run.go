package patch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// Runner runs a command with env added to the process's own, and returns
// its standard output. An exit other than 0 is a *CommandError.
type Runner func(ctx context.Context, env []string, name string, args ...string) ([]byte, error)

// CommandError is a command that exited other than 0: it names the
// command and ends with the last lines it wrote.
type CommandError struct {
	Command string
	Code    int
	Tail    string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: exit status %d%s", e.Command, e.Code, e.Tail)
}

// Exec runs commands on the host, their standard error copied to log (the
// job's output) as they write it.
func Exec(log io.Writer) Runner { return run(log, false) }

// ExecLoud is Exec with the standard output copied to log too: what an
// install or a removal says. What it returns is both outputs, as they
// were written (dnf says a failed scriptlet on its standard error).
func ExecLoud(log io.Writer) Runner { return run(log, true) }

func run(to io.Writer, loud bool) Runner {
	if to == nil {
		to = io.Discard
	}
	// The command's two outputs are copied at once.
	log := &lockedWriter{w: to}
	return func(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
		var out, errs bytes.Buffer
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = &out, teeWriter{&errs, log}
		if loud {
			both := &lockedWriter{w: &out}
			cmd.Stdout = teeWriter{both, log}
			cmd.Stderr = teeWriter{&errs, teeWriter{both, log}}
		}
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			said := errs.String() // what went wrong, else the output's end
			if strings.TrimSpace(said) == "" {
				said = out.String()
			}
			return out.Bytes(), &CommandError{Command: name + " " + strings.Join(args, " "), Code: exit.ExitCode(), Tail: lastLines(said, 5)}
		case err != nil:
			return out.Bytes(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return out.Bytes(), nil
	}
}

// lockedWriter takes the writes of a command's two outputs one at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.b.Write(p) //nolint:errcheck // the log is a copy
	return t.a.Write(p)
}

// lastLines is ": " and the last n non-empty lines of s, joined by "; ".
func lastLines(s string, n int) string {
	lines := slices.DeleteFunc(strings.Split(s, "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
	if len(lines) == 0 {
		return ""
	}
	return ": " + strings.Join(lines[max(0, len(lines)-n):], "; ")
}
