// Command kustodian; see internal/nodecmd.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kustodian/kustodian/internal/nodecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := nodecmd.NewRoot().ExecuteContext(ctx)
	stop()
	if errors.Is(err, nodecmd.ErrSilentExit1) {
		os.Exit(1) // the command said why already
	}
	var code interface{ ExitCode() int }
	if errors.As(err, &code) {
		os.Exit(code.ExitCode()) // kustodian run --wait: the job's own exit code
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kustodian: "+err.Error())
		os.Exit(1)
	}
}
