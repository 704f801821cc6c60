package patch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Runner runs a command with env added to the process's own, and returns
// its standard output. An exit other than 0 is an error that names the
// command and ends with the last lines it wrote.
type Runner func(ctx context.Context, env []string, name string, args ...string) ([]byte, error)

// Exec runs commands on the host, their standard error copied to log
// (the job's output) as they write it.
func Exec(log io.Writer) Runner {
	return func(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
		var out, errs bytes.Buffer
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout = &out
		cmd.Stderr = &errs
		if log != nil {
			cmd.Stderr = teeWriter{&errs, log}
		}
		if err := cmd.Run(); err != nil {
			return out.Bytes(), fmt.Errorf("%s %s: %w%s", name, strings.Join(args, " "), err, lastLines(errs.String()+out.String(), 5))
		}
		return out.Bytes(), nil
	}
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
