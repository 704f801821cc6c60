package dist

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // the packagers Legacy uses
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm"
)

// LegacyVersion is the version of the single package the tests build with
// Legacy: older than the split (.goreleaser.yaml's boundary).
const LegacyVersion = "0.0.0~dev20261101000000"

// Legacy builds into dir the one package Kustodian shipped before it was
// split in two: `kustodian`, holding the agent and the CLI, with the
// maintainer scripts of packaging/scripts. Its files are today's two
// packages' files together (less kustodian-ctl's own doc directory), and
// nfpm packs them as goreleaser did, so that the tests can upgrade from it.
// format is "deb" or "rpm".
func Legacy(t testing.TB, format, dir string) string {
	t.Helper()
	stage := filepath.Join(dir, "legacy-"+format)
	if err := os.MkdirAll(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Agent, Ctl} {
		pkg := Package(t, name, format)
		var cmd *exec.Cmd
		if format == "deb" {
			cmd = exec.Command("dpkg-deb", "-x", pkg, stage)
		} else {
			cmd = exec.Command("sh", "-c", `rpm2cpio "$1" | cpio -idm --quiet --no-absolute-filenames`, "sh", pkg)
			cmd.Dir = stage
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("unpacking %s: %v\n%s", pkg, err, out)
		}
	}
	var contents files.Contents
	err := filepath.WalkDir(stage, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		dst := strings.TrimPrefix(path, stage)
		if strings.Contains(dst, "/"+Ctl+"/") { // /usr/share/{doc,licenses}/kustodian-ctl
			return nil
		}
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		c := &files.Content{Source: path, Destination: dst, FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: st.Mode().Perm()}}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			c.Source, c.Type = target, files.TypeSymlink
		case dst == "/etc/kustodian/config.yaml":
			c.Type = files.TypeConfigNoReplace
		}
		contents = append(contents, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	scripts := filepath.Join(RepoRoot(t), "packaging", "scripts")
	info := nfpm.WithDefaults(&nfpm.Info{
		Name: Agent, Arch: "amd64", Platform: "linux", Version: LegacyVersion, VersionSchema: "none",
		Maintainer:  "Kustodian developers <kustodian@users.noreply.github.com>",
		Description: "Kustodian before the split into kustodian and kustodian-ctl (a test's build)",
		License:     "Apache-2.0", Section: "admin", Priority: "optional",
		Overridables: nfpm.Overridables{Contents: contents, Scripts: nfpm.Scripts{
			PostInstall: filepath.Join(scripts, "postinstall.sh"),
			PreRemove:   filepath.Join(scripts, "preremove.sh"),
			PostRemove:  filepath.Join(scripts, "postremove.sh"),
		}},
	})
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		t.Fatal(err)
	}
	if err := nfpm.Validate(info); err != nil {
		t.Fatal(err)
	}
	packager, err := nfpm.Get(format)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, Agent+"_"+LegacyVersion+"_linux_amd64."+format)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := packager.Package(info, f); err != nil {
		t.Fatalf("nfpm %s: %v", format, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}
