package hostfiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testFiles(t testing.TB) Files {
	dir := t.TempDir()
	return Files{
		Request:        filepath.Join(dir, "maintenance-required"),
		InProgress:     filepath.Join(dir, "maintenance-in-progress"),
		RebootSentinel: filepath.Join(dir, "reboot-required"),
	}
}

func TestObserve(t *testing.T) {
	f := testFiles(t)
	o, err := f.Observe()
	if err != nil || o.Request != nil || o.InProgress || o.RebootPending {
		t.Fatalf("empty dir: %+v, %v", o, err)
	}

	if err := os.WriteFile(f.Request, []byte("  kernel 6.1.99 \x1b[31m\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err = f.Observe()
	if err != nil || o.Request == nil {
		t.Fatalf("with request: %+v, %v", o, err)
	}
	if o.Request.Reason != "kernel 6.1.99 [31m" {
		t.Errorf("reason %q: want the first line, trimmed, without control characters", o.Request.Reason)
	}
	id := o.Request.ID
	if again, _ := f.Observe(); again.Request.ID != id {
		t.Errorf("the same file changed ID: %s then %s", id, again.Request.ID)
	}

	// Removed and created again: a new request.
	os.Remove(f.Request)
	other := f.Request + ".other" // hold the old inode so it is not reused at once
	os.WriteFile(other, nil, 0o644)
	os.WriteFile(f.Request, nil, 0o644)
	os.Chtimes(f.Request, time.Now().Add(time.Second), time.Now().Add(time.Second))
	if o, _ := f.Observe(); o.Request == nil || o.Request.ID == id || o.Request.Reason != "" {
		t.Errorf("re-created request: %+v, want a new ID (old %s) and no reason", o.Request, id)
	}

	os.WriteFile(f.RebootSentinel, nil, 0o644)
	if err := f.CreateInProgress("node-a\n"); err != nil {
		t.Fatal(err)
	}
	if o, _ := f.Observe(); !o.InProgress || !o.RebootPending {
		t.Errorf("in-progress and sentinel not seen: %+v", o)
	}
	if b, _ := os.ReadFile(f.InProgress); string(b) != "node-a\n" {
		t.Errorf("in-progress content %q", b)
	}
	if err := f.RemoveInProgress(); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveInProgress(); err != nil {
		t.Errorf("removing a missing in-progress file: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(f.InProgress), ".maintenance-in-progress.*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestObserveUnreadableRequest(t *testing.T) {
	f := testFiles(t)
	if err := os.Mkdir(f.Request, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := f.Observe()
	if err == nil || !strings.Contains(err.Error(), f.Request) {
		t.Fatalf("request is a directory: got %v, want an error naming %s", err, f.Request)
	}
}

// Of many creators at once exactly one makes the request, the file holds
// its reason whole, its ID is the one the agent reads, and no temporary
// file is left behind.
func TestCreateRequestIsExclusiveAndWhole(t *testing.T) {
	f := testFiles(t)
	const n = 16
	type result struct {
		req *Request
		err error
		i   int
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			r, err := f.CreateRequest(strings.Repeat(string(rune('a'+i)), 5000) + "\n")
			results <- result{r, err, i}
		}()
	}
	var won []result
	for range n {
		r := <-results
		switch {
		case r.err == nil:
			won = append(won, r)
		case !errors.Is(r.err, ErrRequested) || !strings.Contains(r.err.Error(), f.Request):
			t.Errorf("creator %d: %v, want ErrRequested naming %s", r.i, r.err, f.Request)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d creators made the request, want 1", len(won))
	}
	b, err := os.ReadFile(f.Request)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat(string(rune('a'+won[0].i)), 5000) + "\n"; string(b) != want {
		t.Fatalf("the request holds %d bytes starting %q, want the winner's %d", len(b), b[:10], len(want))
	}
	o, err := f.Observe()
	if err != nil || o.Request == nil || o.Request.ID != won[0].req.ID {
		t.Fatalf("observed %+v (%v), want ID %s", o.Request, err, won[0].req.ID)
	}
	entries, _ := os.ReadDir(filepath.Dir(f.Request))
	if len(entries) != 1 {
		t.Fatalf("left in the directory: %v", entries)
	}
	if err := f.RemoveRequest(); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveRequest(); err != nil {
		t.Fatalf("removing a request already gone: %v", err)
	}
	if o, err := f.Observe(); err != nil || o.Request != nil {
		t.Fatalf("after RemoveRequest: %+v, %v", o.Request, err)
	}
}
