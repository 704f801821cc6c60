package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// buildScript finds test/tools/build.sh by walking up from the working
// directory (go test runs in the package's directory; make in the root).
func buildScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "test", "tools", "build.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("test/tools/build.sh not found above the working directory; run from the kustodian repository")
		}
		dir = parent
	}
}

// BuildBinaries builds the control-plane binaries that are missing from the
// cache (this takes minutes the first time) and returns their directory.
// The build's progress goes to log.
func BuildBinaries(ctx context.Context, log io.Writer) (string, error) {
	return runBuildScript(ctx, log)
}

// BinDir returns the cache directory of the binaries without building them.
func BinDir(ctx context.Context) (string, error) {
	return runBuildScript(ctx, io.Discard, "--print")
}

func runBuildScript(ctx context.Context, log io.Writer, args ...string) (string, error) {
	script, err := buildScript()
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Stdout = &out
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the control plane with %s failed: %w (its output above says why)", script, err)
	}
	dir := strings.TrimSpace(out.String())
	if dir == "" {
		return "", fmt.Errorf("%s printed no directory", script)
	}
	return dir, nil
}
