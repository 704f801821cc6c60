package integration

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/judge"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// One agent is cut off from the API server (its connection goes through a
// proxy that stops forwarding) for longer than the stale window, first
// while it holds the lock, its script ending meanwhile: nobody takes the
// lock from it, and it gives it back once it can reach the API server
// again; then while it waits at the head of the queue: the node behind it
// goes first.
func TestFaultAgentCutOff(t *testing.T) { inRounds(t, testAgentCutOff) }

func testAgentCutOff(t *testing.T) {
	r := faultRand(t)
	e := cluster.New(t)
	nodes := e.Nodes(3)
	j := startJudge(e, judge.Rules{})
	p := newCutProxy(t, e.Config.Host)
	cut := newAgent(t, e, nodes[0], "--kubeconfig", p.kubeconfig(t, nodecreds.Kubeconfig(e, nodes[0])))
	b := newAgent(t, e, nodes[1])
	c := newAgent(t, e, nodes[2])

	// It holds the lock, and is cut off.
	cut.request("kernel")
	cut.start()
	cut.waitInProgress(cluster.DefaultTimeout)
	b.request("kernel")
	b.start()
	waitRecord(e, nodes[1], "waiting behind "+nodes[0], inStateSaying(lock.Waiting, "lock held by "+nodes[0]))
	p.cut()
	stale := 4 * time.Second // four heartbeats of agentproc's 1 s
	time.Sleep(between(r, 0, stale))
	cut.finish() // the script ends while the agent cannot tell anyone
	away := stale + between(r, 0, 3*time.Second)
	waitRecord(e, nodes[0], "stale", func(rec *lock.Record) error {
		if rec == nil || time.Since(rec.Heartbeat) < away {
			return fmt.Errorf("record %+v not stale yet", rec)
		}
		return nil
	})
	if h := lockHolder(e); h != nodes[0] {
		t.Fatalf("the lock of a cut-off holder whose Node exists went to %q", h)
	}
	if b.inProgress() {
		t.Fatal("the waiting node went into maintenance while the holder was cut off")
	}
	p.heal()
	cut.exitsZero()
	b.waitInProgress(cluster.DefaultTimeout)

	// It waits at the head, and is cut off: the node behind it goes first.
	cut.request("kernel again")
	cut.start()
	waitRecord(e, nodes[0], "first in line", inStateSaying(lock.Waiting, "position 1 of"))
	c.request("kernel")
	c.start()
	waitRecord(e, nodes[2], "second in line", inStateSaying(lock.Waiting, "lock held by "+nodes[1]))
	p.cut()
	time.Sleep(between(r, 0, stale))
	b.finish()
	b.exitsZero()
	c.waitInProgress(cluster.DefaultTimeout)
	if cut.inProgress() {
		t.Fatal("the cut-off node went into maintenance")
	}
	p.heal()
	c.finish()
	c.exitsZero()
	cut.waitInProgress(cluster.DefaultTimeout)
	cut.finish()
	cut.exitsZero()
	verdict(e, j, nodes)
}

// cutProxy forwards TCP connections to the API server until cut: then it
// forwards nothing (the connections stay open, silent, as behind a broken
// network) until healed, when it closes what it held and forwards again.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	isCut bool
	conns map[net.Conn]bool
	held  chan struct{} // closed when healed
}

func newCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	target := strings.TrimPrefix(server, "https://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}, held: make(chan struct{})}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = true
	return p.isCut
}

func (p *cutProxy) serve(c net.Conn) {
	if p.track(c) {
		p.mu.Lock()
		held := p.held
		p.mu.Unlock()
		<-held
		c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(up)
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies until the connection ends, or drops what it reads while cut.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		isCut := p.isCut
		p.mu.Unlock()
		if n > 0 && !isCut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	p.held = make(chan struct{})
}

// heal closes every connection of the cut (their peers would have reset
// them) and forwards new ones.
func (p *cutProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
	close(p.held)
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// kubeconfig is a copy of the kubeconfig at path that reaches the API
// server through the proxy.
func (p *cutProxy) kubeconfig(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range cfg.Clusters {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg.Clusters[name].Server = "https://" + p.ln.Addr().String()
	}
	out := filepath.Join(t.TempDir(), "through-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}
