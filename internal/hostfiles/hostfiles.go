// Package hostfiles owns the host side of the maintenance protocol: the
// request file a maintenance script creates, the in-progress file the agent
// creates once the node is drained, and the reboot sentinel. It reads them,
// creates a request exclusively and whole, writes the in-progress file
// atomically, and removes both. Watching their directories is hostwatch's.
package hostfiles

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// Default paths, compatible with the original Kustodian README.
const (
	DefaultRequest        = "/var/maintenance-required"
	DefaultInProgress     = "/var/maintenance-in-progress"
	DefaultRebootSentinel = "/var/run/reboot-required"
)

// maxReason bounds the reason read from the request file's first line.
const maxReason = 200

// Files are the protocol's paths on this host.
type Files struct {
	Request        string
	InProgress     string
	RebootSentinel string
}

// Request is what the request file says.
type Request struct {
	// ID identifies this request: the same file keeps its ID, a file removed
	// and created again gets a new one.
	ID string
	// Reason is the first line of the file, if any (trimmed, bounded).
	Reason string
}

// Observation is the state of the files at one moment.
type Observation struct {
	Request       *Request // nil when there is no request
	InProgress    bool
	RebootPending bool
}

// Observe reads the files. A request file that exists but cannot be read is
// an error naming the file: the agent must not guess whether it was asked.
func (f Files) Observe() (Observation, error) {
	var o Observation
	req, err := readRequest(f.Request)
	if err != nil {
		return o, err
	}
	o.Request = req
	if o.InProgress, err = exists(f.InProgress); err != nil {
		return o, err
	}
	if o.RebootPending, err = f.RebootPending(); err != nil {
		return o, err
	}
	return o, nil
}

// RebootPending says whether the reboot sentinel exists now (false when
// there is none to watch).
func (f Files) RebootPending() (bool, error) {
	if f.RebootSentinel == "" {
		return false, nil
	}
	return exists(f.RebootSentinel)
}

func readRequest(path string) (*Request, error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("request file %s cannot be read: %w", path, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("request file %s cannot be read: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("request file %s is not a regular file (%s); remove it and create it with touch", path, st.Mode().Type())
	}
	line, err := bufio.NewReader(io.LimitReader(file, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("request file %s cannot be read: %w", path, err)
	}
	return &Request{ID: requestID(st), Reason: CleanReason(line)}, nil
}

// requestID names one request: it is derived from the file's inode and
// modification time, so it stays the same while the file stays, and changes
// when the file is removed and created again or touched again (a new request).
func requestID(st os.FileInfo) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%d", inode(st), st.ModTime().UnixNano()))
	return hex.EncodeToString(sum[:6])
}

// CleanReason is a request's reason as records show it: trimmed, without
// control characters, bounded.
func CleanReason(line string) string {
	line = strings.TrimSpace(line)
	line = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, line)
	if len(line) > maxReason { // cut at a character's start, never inside one
		cut := maxReason
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut]
	}
	return line
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("checking %s: %w", path, err)
}

// CreateInProgress creates the in-progress file atomically, so a script
// never sees it half-written and a crash never loses it once this returns.
func (f Files) CreateInProgress(content string) error {
	return atomicfile.Write(f.InProgress, []byte(content), 0o644)
}

// RemoveInProgress removes the in-progress file; a file already gone is fine.
func (f Files) RemoveInProgress() error {
	err := os.Remove(f.InProgress)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", f.InProgress, err)
	}
	return atomicfile.SyncDir(filepath.Dir(f.InProgress))
}

// ErrRequested says a maintenance request exists already.
var ErrRequested = errors.New("maintenance is already requested")

// CreateRequest requests maintenance with reason as the file's content, and
// returns the request as the agent will see it. The file appears whole
// (written and synced under a temporary name, then linked into place) and
// only if there is none: a request that exists already is ErrRequested,
// never overwritten. Its ID is fixed once it appears, since the linked file
// is never written again.
func (f Files) CreateRequest(reason string) (*Request, error) {
	dir := filepath.Dir(f.Request)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Request)+".*")
	if err != nil {
		return nil, fmt.Errorf("requesting maintenance: %w", err)
	}
	defer os.Remove(tmp.Name())
	for _, step := range []func() error{
		func() error { return tmp.Chmod(0o644) },
		func() error { _, err := tmp.WriteString(reason); return err },
		tmp.Sync,
	} {
		if err := step(); err != nil {
			tmp.Close()
			return nil, fmt.Errorf("requesting maintenance: %w", err)
		}
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("requesting maintenance: %w", err)
	}
	if err := os.Link(tmp.Name(), f.Request); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w on this node (%s exists); wait for it to end", ErrRequested, f.Request)
		}
		return nil, fmt.Errorf("requesting maintenance: %w", err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return nil, err
	}
	return readRequest(f.Request)
}

// RemoveRequest ends a request the agent made itself (a managed job's);
// a request already gone is fine.
func (f Files) RemoveRequest() error {
	err := os.Remove(f.Request)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", f.Request, err)
	}
	return atomicfile.SyncDir(filepath.Dir(f.Request))
}
