package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "jobs")}
	if j, err := s.Current(); j != nil || err != nil {
		t.Fatalf("empty store: %v %v", j, err)
	}
	j := &Job{ID: "patch-1", Command: []string{"apt-get", "upgrade"}, Reboot: RebootAuto, Created: time.Now(), State: Pending}
	if err := s.Create(j); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(&Job{ID: "patch-2", State: Pending}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second job while one is pending: %v", err)
	}
	cur, err := s.Current()
	if err != nil || cur.ID != "patch-1" || cur.Command[1] != "upgrade" {
		t.Fatalf("current: %+v %v", cur, err)
	}
	code := 3
	cur.State, cur.ExitCode, cur.LastLines = Failed, &code, []string{"E: broken packages"}
	if err := s.Save(cur); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get("patch-1"); got.Summary() != "job patch-1 (run 0): failed, exit 3: E: broken packages" {
		t.Errorf("summary %q", got.Summary())
	}
	// A done job does not block the next one; the same ID is refused.
	if err := s.Create(&Job{ID: "patch-1", State: Pending}); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("reused id: %v", err)
	}
	if err := s.Create(&Job{ID: "patch-2", State: Pending}); err != nil {
		t.Fatalf("a new job after a failed one: %v", err)
	}
	if err := s.ClearCurrent(); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.Current(); j != nil {
		t.Errorf("current after clearing: %+v", j)
	}
	leftovers, _ := filepath.Glob(filepath.Join(s.Dir, ".*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	if err := os.WriteFile(s.path("bad"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("bad"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt job: %v", err)
	}
}

func TestValidID(t *testing.T) {
	for id, ok := range map[string]bool{"a": true, "kernel-6.1_2": true, "": false, "../x": false, "a b": false, "-x": false} {
		if (ValidID(id) == nil) != ok {
			t.Errorf("ValidID(%q) ok=%v", id, !ok)
		}
	}
}

// A job whose request could not be made is taken back whole: no current
// job, no file, and the next job may be created.
func TestDiscard(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "jobs")}
	if err := s.Create(&Job{ID: "lost", State: Pending}); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard("lost"); err != nil {
		t.Fatal(err)
	}
	if cur, err := s.Current(); cur != nil || err != nil {
		t.Fatalf("current after Discard: %+v %v", cur, err)
	}
	if _, err := s.Get("lost"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the discarded job reads: %v", err)
	}
	if err := s.Create(&Job{ID: "next", State: Pending}); err != nil {
		t.Fatalf("a job after a discarded one: %v", err)
	}
	if err := s.Discard("lost"); err != nil {
		t.Fatalf("discarding a job already gone: %v", err)
	}
	if cur, err := s.Current(); err != nil || cur == nil || cur.ID != "next" {
		t.Fatalf("discarding another job touched the current one: %+v %v", cur, err)
	}
}
