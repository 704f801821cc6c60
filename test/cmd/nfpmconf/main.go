// Command nfpmconf writes, from the nfpms of .goreleaser.yaml, one nfpm
// configuration per package, so that the tests' packages (make
// packages-host) are built by nfpm alone from the same definitions as a
// release (make packages, goreleaser). Building goreleaser takes minutes on
// a cold cache; nfpm, which goreleaser builds its packages with, about one.
//
//	go run ./test/cmd/nfpmconf -version V -arch amd64 -bin build/host -out build/nfpm
//
// Each nfpms entry becomes OUT/<id>.yaml: goreleaser's own keys (id, ids,
// formats, bindir, package_name) are turned into nfpm's (name, the
// binaries of the builds named by ids as contents under bindir), every
// other key is passed through as it is (both tools read them alike), and
// the version, architecture and platform are added.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

type goreleaser struct {
	Builds []struct {
		ID     string `json:"id"`
		Binary string `json:"binary"`
	} `json:"builds"`
	NFPMs []map[string]any `json:"nfpms"`
}

// passed are the keys of a goreleaser nfpms entry that nfpm reads alike;
// any other key is refused, so that a key added to .goreleaser.yaml is
// either known here or stops the build.
var passed = []string{"vendor", "homepage", "maintainer", "license", "section", "priority", "description",
	"suggests", "recommends", "depends", "conflicts", "replaces", "provides",
	"contents", "scripts", "deb", "rpm", "overrides"}

func main() {
	config := flag.String("goreleaser", ".goreleaser.yaml", "goreleaser's configuration")
	version := flag.String("version", "", "the packages' version")
	arch := flag.String("arch", "", "the packages' architecture (GOARCH)")
	bin := flag.String("bin", "", "the directory of the built binaries")
	out := flag.String("out", "", "the directory to write the nfpm configurations to")
	flag.Parse()
	if err := run(*config, *version, *arch, *bin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "nfpmconf:", err)
		os.Exit(1)
	}
}

func run(config, version, arch, bin, out string) error {
	if version == "" || arch == "" || bin == "" || out == "" {
		return fmt.Errorf("give -version, -arch, -bin and -out")
	}
	b, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	var g goreleaser
	if err := yaml.Unmarshal(b, &g); err != nil {
		return fmt.Errorf("%s: %w", config, err)
	}
	binaries := map[string]string{}
	for _, b := range g.Builds {
		binaries[b.ID] = b.Binary
	}
	if len(g.NFPMs) == 0 {
		return fmt.Errorf("%s has no nfpms", config)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, p := range g.NFPMs {
		c, id, err := convert(p, binaries, version, arch, bin)
		if err != nil {
			return fmt.Errorf("%s: nfpms %s: %w", config, id, err)
		}
		if err := lintianOverrides(c, filepath.Join(out, id+".lintian")); err != nil {
			return fmt.Errorf("%s: nfpms %s: %w", config, id, err)
		}
		y, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, id+".yaml"), y, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// convert makes one nfpm configuration of a goreleaser nfpms entry.
func convert(p map[string]any, binaries map[string]string, version, arch, bin string) (map[string]any, string, error) {
	id, _ := p["id"].(string)
	name, _ := p["package_name"].(string)
	bindir, _ := p["bindir"].(string)
	if id == "" || name == "" || bindir == "" {
		return nil, id, fmt.Errorf("wants id, package_name and bindir")
	}
	c := map[string]any{"name": name, "version": version, "arch": arch, "platform": "linux"}
	for k, v := range p {
		switch {
		case k == "id" || k == "package_name" || k == "bindir" || k == "ids" || k == "formats":
		case slices.Contains(passed, k):
			c[k] = v
		default:
			return nil, id, fmt.Errorf("key %q is not known to test/cmd/nfpmconf: say there how nfpm reads it", k)
		}
	}
	var contents []any
	ids, _ := p["ids"].([]any)
	for _, i := range ids {
		b, ok := binaries[fmt.Sprint(i)]
		if !ok {
			return nil, id, fmt.Errorf("ids names the build %v, which builds does not have", i)
		}
		contents = append(contents, map[string]any{
			"src": filepath.Join(bin, b), "dst": filepath.Join(bindir, b),
			"file_info": map[string]any{"mode": 0o755},
		})
	}
	if given, ok := p["contents"].([]any); ok {
		contents = append(contents, given...)
	}
	c["contents"] = contents
	return c, id, nil
}

// lintianOverrides does what goreleaser does with deb.lintian_overrides,
// which nfpm does not know: the overrides, one "<package>: <tag>" a line,
// in the deb's /usr/share/lintian/overrides/<package> (file holds them).
func lintianOverrides(c map[string]any, file string) error {
	deb, _ := c["deb"].(map[string]any)
	overrides, _ := deb["lintian_overrides"].([]any)
	if len(overrides) == 0 {
		return nil
	}
	delete(deb, "lintian_overrides")
	name := c["name"].(string)
	var lines []string
	for _, o := range overrides {
		lines = append(lines, fmt.Sprintf("%s: %v", name, o))
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	c["contents"] = append(c["contents"].([]any), map[string]any{
		"src": file, "dst": "/usr/share/lintian/overrides/" + name, "packager": "deb",
		"file_info": map[string]any{"mode": 0o644},
	})
	return nil
}
