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
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if os.Getenv("KUSTODIAN_DEBUG") != "" {
		opts.Level = slog.LevelDebug
	}
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Discard is a logger that drops everything (tests, dry runs).
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
