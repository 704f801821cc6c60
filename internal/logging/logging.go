// Package logging sets up log/slog for the binaries: text on a terminal,
// JSON otherwise (the journal, files, pipes).
package logging

import (
	"io"
	"log/slog"
	"os"
)

// New returns a logger writing to w in the given format: "text", "json" or
// "auto" (text when w is a terminal).
func New(w io.Writer, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: durationsAsText}
	if os.Getenv("KUSTODIAN_DEBUG") != "" {
		opts.Level = slog.LevelDebug
	}
	if format == "auto" {
		format = "json"
		if IsTerminal(w) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationsAsText writes durations as Go writes them ("1m30s"), not as
// slog's JSON handler does (nanoseconds, a number no reader can take in).
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Discard is a logger that drops everything (tests, dry runs).
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
