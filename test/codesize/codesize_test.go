// Package codesize keeps the code in files of one concern each: no
// hand-written Go file reaches maxLines lines.
package codesize

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const maxLines = 450

func TestNoGoFileReachesTheLimit(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "build" || d.Name() == "dist" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		lines, generated := 0, false
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines++
			if lines < 5 && strings.HasPrefix(sc.Text(), "// Code generated") {
				generated = true
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		files++
		if !generated && lines >= maxLines {
			t.Errorf("%s has %d lines; split it by concern (the limit is %d)", path, lines, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files found from %s; the check would prove nothing", files, root)
	}
}
