package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/buildbin"
)

// The names the documents give are the code's: every configuration key,
// command and flag named in README.md and docs/*.md exists in the
// binaries as a user runs them (their --help is the judge, not the code
// that makes it), and every man page's header names its command.

// foreign are flags the documents name that belong to other programs.
var foreign = map[string]string{
	"--handoff-only":                         "make bench's (test/cmd/bench)",
	"--handoff-waiting":                      "make bench's (test/cmd/bench)",
	"--plan-nodes":                           "make bench's (test/cmd/bench)",
	"--plan-seed":                            "make bench's (test/cmd/bench)",
	"--scale":                                "make bench's (test/cmd/bench)",
	"--scale-only":                           "make bench's (test/cmd/bench)",
	"--refusal":                              "make bench's (test/cmd/bench)",
	"--refusal-only":                         "make bench's (test/cmd/bench)",
	"-trimpath":                              "go build's",
	"--reboot-sentinel-command":              "Kured's",
	"--lock-annotation":                      "Kured's",
	"--concurrency":                          "Kured's",
	"--period":                               "Kured's",
	"--service-account-max-token-expiration": "kube-apiserver's",
	"--max-leases":                           "kube-apiserver's",
}

// keyName is a configuration key of the agent's as the documents write
// one: a name in backquotes that starts with one of the sections of its
// nested keys (and is not a file: metrics.json).
var (
	keyName  = regexp.MustCompile(`^(drain|gates|kured|lock|metrics|notify|queue|rebootRequired|rollouts)\.[A-Za-z.]+$`)
	fileName = regexp.MustCompile(`\.(json|yaml|yml|prom|corrupt)(\.|$)`)
)

type binaries struct {
	dir  string
	help map[string]string
}

// helpOf is the --help of the command args name (the binary first).
func (b *binaries) helpOf(args ...string) string {
	key := strings.Join(args, " ")
	if h, ok := b.help[key]; ok {
		return h
	}
	cmd := exec.Command(filepath.Join(b.dir, args[0]), append(args[1:], "--help")...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
	out, err := cmd.CombinedOutput()
	h := string(out)
	if err != nil {
		h = "error: " + err.Error() + "\n" + h
	}
	b.help[key] = h
	return h
}

// command is the path of the command a --help describes, from its usage
// line ("kustodian-ctl status [NODE...] [flags]" → kustodian-ctl status).
func command(help string) string {
	_, after, ok := strings.Cut(help, "Usage:\n")
	if !ok {
		return ""
	}
	var path []string
	for _, w := range strings.Fields(strings.SplitN(after, "\n", 2)[0]) {
		if !word.MatchString(w) {
			break
		}
		path = append(path, w)
	}
	return strings.Join(path, " ")
}

var (
	// word is a command's name; flagWord a flag as a document writes it.
	word     = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	flagWord = regexp.MustCompile(`^(-{1,2}[a-zA-Z][a-z0-9-]*)`)
)

var flagLine = regexp.MustCompile(`(?m)^\s+(?:-([a-zA-Z]), )?--([a-z0-9-]+)`)

// flags are the flags a --help lists, long and short.
func flags(help string) map[string]bool {
	out := map[string]bool{}
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		out["--"+m[2]] = true
		if m[1] != "" {
			out["-"+m[1]] = true
		}
	}
	return out
}

// spans are the code of a Markdown document: its code spans and the
// lines of its fenced and indented blocks.
func spans(text string) []string {
	fence := regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	var out []string
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		out = append(out, strings.Split(m[1], "\n")...)
	}
	rest := fence.ReplaceAllString(text, "")
	// Indented code blocks: lines of four spaces or more after a blank
	// line or another such line.
	blank, block := true, false
	for _, line := range strings.Split(rest, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			blank = true
			continue
		case strings.HasPrefix(line, "    ") && (blank || block):
			block = true
			out = append(out, line)
		default:
			block = false
		}
		blank = false
	}
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(rest, -1) {
		out = append(out, m[1])
	}
	return out
}

var invocation = regexp.MustCompile(`^\s*(?:\$ |# )?(?:sudo )?(kustodian-ctl|kubectl kustodian|kustodian)(?:\s+(.*))?$`)

func TestDocumentsNameWhatExists(t *testing.T) {
	top := root(t)
	b := &binaries{dir: buildbin.Dir(t), help: map[string]string{}}
	all := map[string]bool{} // every flag of every command
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`key ([A-Za-z.]+)\)`).FindAllStringSubmatch(b.helpOf("kustodian", "agent"), -1) {
		keys[m[1]] = true
	}
	if len(keys) < 20 {
		t.Fatalf("kustodian agent --help names %d configuration keys: the judge cannot read it", len(keys))
	}
	docs, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(top, "README.md"))
	sort.Strings(docs)
	type standalone struct{ file, flag string }
	var alone []standalone
	invocations := 0
	for _, path := range docs {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(top, path)
		for _, span := range spans(string(text)) {
			span = strings.ReplaceAll(span, `\|`, "|")
			if keyName.MatchString(span) && !fileName.MatchString(span) && !keys[span] {
				t.Errorf("%s names the configuration key %q, which kustodian agent does not know", name, span)
			}
			if m := invocation.FindStringSubmatch(span); m != nil {
				invocations++
				checkInvocation(t, b, name, strings.Fields(m[1]), strings.Fields(m[2]), all)
				continue
			}
			if f := flagWord.FindString(span); f != "" {
				alone = append(alone, standalone{name, f})
			}
		}
	}
	if invocations < 30 {
		t.Fatalf("only %d commands found in the documents: the judge cannot read them", invocations)
	}
	var walk func(path ...string)
	walk = func(path ...string) {
		for _, sub := range subcommands(b.helpOf(path...)) {
			p := append(append([]string{}, path...), sub)
			for f := range flags(b.helpOf(p...)) {
				all[f] = true
			}
			walk(p...)
		}
	}
	for _, bin := range []string{"kustodian", "kustodian-ctl"} {
		walk(bin)
	}
	kured := kuredTableFlags(t) // docs/kured.md names Kured's flags
	for _, a := range alone {
		if a.file == filepath.Join("docs", "kured.md") && kured[a.flag] {
			continue
		}
		if !all[a.flag] && foreign[a.flag] == "" {
			t.Errorf("%s names the flag %s, which no command of kustodian or kustodian-ctl has", a.file, a.flag)
		}
	}
}

// checkInvocation checks one command line of a document: its subcommand
// exists, and so does each flag it gives.
func checkInvocation(t *testing.T, b *binaries, file string, bin, words []string, all map[string]bool) {
	t.Helper()
	binary := bin[0]
	if binary == "kubectl" {
		binary = "kustodian-ctl" // the plugin is the same program
	}
	if len(words) > 0 && strings.Contains(words[0], "|") { // a list: status|queue|pause
		for _, sub := range strings.Split(words[0], "|") {
			if c := command(b.helpOf(binary, sub)); c != binary+" "+sub {
				t.Errorf("%s: %s %s is not a command (its --help describes %q)", file, binary, sub, c)
			}
		}
		return
	}
	// The command is the binary and the subcommands that follow it
	// (kustodian-ctl rollout create).
	args := []string{binary}
	for _, w := range words {
		if !word.MatchString(w) {
			break
		}
		p := append(append([]string{}, args...), w)
		if c := command(b.helpOf(p...)); c != strings.Join(p, " ") {
			if len(args) == 1 {
				t.Errorf("%s: %s %s is not a command (its --help describes %q)", file, binary, w, c)
				return
			}
			break // an argument of the command
		}
		args = p
	}
	have := flags(b.helpOf(args...))
	for _, w := range words {
		if w == "--" || w == "|" || w == "&&" || w == ";" || strings.HasPrefix(w, "#") {
			break
		}
		w = strings.Trim(w, "[]")
		f := flagWord.FindString(w)
		if f == "" {
			continue
		}
		if !have[f] {
			t.Errorf("%s: %s has no flag %s", file, strings.Join(args, " "), f)
		}
	}
}

// subcommands are the commands a --help lists.
func subcommands(help string) []string {
	_, after, ok := strings.Cut(help, "Available Commands:\n")
	if !ok {
		return nil
	}
	var out []string
	for _, line := range strings.Split(after, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			break
		}
		out = append(out, f[0])
	}
	return out
}

// Each man page's header names its command: kustodian-ctl-status(1), not
// kustodian-ctl(1).
func TestManPageHeadersNameTheirCommand(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root(t), "docs", "man", "*.1"))
	if err != nil || len(pages) < 10 {
		t.Fatalf("man pages: %v (%d found)", err, len(pages))
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSuffix(filepath.Base(p), ".1")
		m := regexp.MustCompile(`(?m)^\.TH "([^"]+)" "1"`).FindSubmatch(b)
		if m == nil || string(m[1]) != want {
			t.Errorf("%s: header names %q, want %q", filepath.Base(p), m, want)
		}
	}
}
