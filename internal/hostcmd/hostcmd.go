// Package hostcmd runs the short commands an operator configures on a host
// (a gate, a reboot check), bounded in time, and reads what they said.
package hostcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Run runs name with args for at most timeout and returns its combined
// output and exit code. A command that cannot be started, is killed by a
// signal, or still runs at the timeout (then stopped) is an error.
func Run(ctx context.Context, timeout time.Duration, name string, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	// A child that keeps the output open must not hold Run past the timeout.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return out.String(), -1, fmt.Errorf("did not finish within %s", timeout)
	case errors.As(err, &ee) && ee.Exited():
		return out.String(), ee.ExitCode(), nil
	case err != nil:
		return out.String(), -1, err
	}
	return out.String(), 0, nil
}

// LastLine is the last non-empty line of a command's output, at most 200
// bytes: what it says about itself.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "..."
	}
	return last
}
