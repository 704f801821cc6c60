// Command devcluster brings the local development cluster up or down; the
// Makefile's cluster-up, cluster-down and demo targets call it.
//
//	devcluster up [--name kustodian] [--nodes 5] [--port 0]
//	devcluster down [--name kustodian]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kustodian/kustodian/test/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster: "+err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: devcluster up|down [flags]")
	}
	fs := flag.NewFlagSet("devcluster "+args[0], flag.ContinueOnError)
	opts := cluster.Options{Log: os.Stderr}
	fs.StringVar(&opts.Name, "name", "kustodian", "cluster name")
	fs.IntVar(&opts.Nodes, "nodes", 5, "number of kwok nodes (up)")
	fs.IntVar(&opts.APIServerPort, "port", 0, "API server port on 127.0.0.1; 0 picks a free one (up)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "up":
		c, err := cluster.Up(ctx, opts)
		if err != nil {
			return err
		}
		bin, _ := cluster.BinDir(ctx)
		fmt.Fprintf(os.Stderr, "cluster %s: %s, %d nodes\n", c.Name, c.Config.Host, opts.Nodes)
		fmt.Fprintf(os.Stderr, "try: %s --kubeconfig %s get nodes\n", filepath.Join(bin, "kubectl"), c.Kubeconfig)
		// stdout carries only the kubeconfig path, for scripts.
		fmt.Println(c.Kubeconfig)
		return nil
	case "down":
		if err := cluster.Down(ctx, opts); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "cluster %s is down\n", opts.Name)
		return nil
	default:
		return fmt.Errorf("unknown command %q; use up or down", args[0])
	}
}
