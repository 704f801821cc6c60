// Command swarm runs the agents of many simulated nodes in one process, for
// the scale mode of make bench: each agent is `kustodian agent` run through
// the binary's own command tree (nodecmd.NewRoot), with the node's own
// kubeconfig and host files from agentproc.Spec, so the code path is the
// binary's; only the process is shared. Its output (every agent's log, JSON
// with the node named) goes to standard error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/kustodian/kustodian/internal/nodecmd"
	"github.com/kustodian/kustodian/test/agentproc"
)

func main() {
	var ns, workdir, nodes string
	var extra stringList
	flag.StringVar(&ns, "namespace", "", "the agents' namespace")
	flag.StringVar(&workdir, "workdir", "", "directory holding <namespace>/<node>/ with each node's kubeconfig and host files")
	flag.StringVar(&nodes, "nodes", "", "comma-separated node names")
	flag.Var(&extra, "agent-flag", "a flag passed to every agent (repeatable), after agentproc's defaults")
	flag.Parse()
	if ns == "" || workdir == "" || nodes == "" {
		fmt.Fprintln(os.Stderr, "swarm: --namespace, --workdir and --nodes are required")
		os.Exit(2)
	}
	// No systemd to notify: agentproc's agents run with NOTIFY_SOCKET empty too.
	os.Setenv("NOTIFY_SOCKET", "")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for _, node := range strings.Split(nodes, ",") {
		s := agentproc.Spec{Namespace: ns, Node: node, Dir: filepath.Join(workdir, ns, node), Extra: append([]string{"--stay"}, extra...)}
		s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
		if err := s.Prepare(); err != nil {
			fmt.Fprintf(os.Stderr, "swarm: %v\n", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			root := nodecmd.NewRoot()
			root.SetArgs(s.Args())
			root.SilenceUsage = true
			if err := root.ExecuteContext(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "swarm: the agent of %s: %v\n", node, err)
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failed > 0 {
		os.Exit(1)
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
