package patch

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// What apt-get -s prints (Debian 12's apt 2.6), read line by line.
func TestAptSimulationIsRead(t *testing.T) {
	out := `Reading package lists...
Building dependency tree...
Calculating upgrade...
The following packages will be upgraded:
  bash libgcrypt20
Inst base-files [12.4+deb12u11] (12.4+deb12u15 Debian:12.15/oldstable [amd64])
Conf base-files (12.4+deb12u15 Debian:12.15/oldstable [amd64])
Inst libgcrypt20-dev [1.10.1-3] (1.10.1-3+deb12u1 Debian:12.15/oldstable, Debian-Security:12/oldstable-security [amd64]) []
Inst libfoo1 (2.0-1 localrepo:kustodian/test [all])
Inst libpam-modules-bin [1.5.2-6+deb12u1] (1.5.2-6+deb12u3 Debian-Security:12/oldstable-security [amd64]) [libpam-modules:amd64 on libpam-modules-bin:amd64] [libpam-modules:amd64 ]
Inst libc6:i386 [2.36-9] (2.36-9+deb12u14 Debian:12.15/oldstable [i386])
Conf libfoo1 (2.0-1 localrepo:kustodian/test [all])
`
	got, err := parseAptSimulation([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Candidate{
		{pkg("base-files", "12.4+deb12u11", "12.4+deb12u15"), "Debian:12.15/oldstable", false},
		{pkg("libgcrypt20-dev", "1.10.1-3", "1.10.1-3+deb12u1"), "Debian:12.15/oldstable, Debian-Security:12/oldstable-security", true},
		{pkg("libfoo1", "", "2.0-1"), "localrepo:kustodian/test", false},
		{pkg("libpam-modules-bin", "1.5.2-6+deb12u1", "1.5.2-6+deb12u3"), "Debian-Security:12/oldstable-security", true},
		{pkg("libc6:i386", "2.36-9", "2.36-9+deb12u14"), "Debian:12.15/oldstable", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read\n%+v\nwant\n%+v", got, want)
	}
	for rel, want := range map[string]bool{
		got[0].Release: false, got[1].Release: true, got[3].Release: true,
		"Ubuntu:22.04/jammy-security": true, "Ubuntu:22.04/jammy-updates": false,
		"localrepo:kustodian/test": false, "security-tools:1/stable": false,
	} {
		if IsSecurity(rel) != want {
			t.Errorf("%q: security %v, want %v", rel, !want, want)
		}
	}
	// A kernel among the changes needs a reboot, the sentinel or not.
	a := &Apt{Sentinel: filepath.Join(t.TempDir(), "reboot-required")}
	if need, why, err := a.RebootRequired(context.Background(), []Package{pkg("linux-image-6.1.0-30-amd64", "", "6.1.124-1")}); err != nil || !need || !strings.Contains(why, "linux-image-6.1.0-30-amd64") {
		t.Errorf("a new kernel: %v %q %v, want a reboot naming it", need, why, err)
	}
	if need, _, err := a.RebootRequired(context.Background(), []Package{pkg("bash", "1", "2")}); err != nil || need {
		t.Errorf("bash alone, no sentinel: %v %v, want no reboot", need, err)
	}
	if _, err := parseAptSimulation([]byte("Remv kubelet [1.30.1]\n")); err == nil || !strings.Contains(err.Error(), "kubelet") {
		t.Errorf("a removal: %v, want an error naming it", err)
	}
	if _, err := parseAptSimulation([]byte("Inst what is this\n")); err == nil {
		t.Error("a line it cannot read was taken")
	}
}

func pkg(name, from, to string) Package { return Package{Name: name, From: from, To: to} }

// A kept .deb is found by apt's own file name: the epoch's colon escaped,
// the architecture the host's, all, or the one a name:arch says.
func TestKeptDebsAreFoundByTheirFileNames(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"login_1%3a4.13+dfsg1-1_amd64.deb", "tzdata_2024a-0+deb12u1_all.deb", "libc6_2.36-9_i386.deb", "libc6_2.36-9_amd64.deb"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		p    Package
		want string
	}{
		{pkg("login", "1:4.13+dfsg1-1", "1:4.13+dfsg1-2"), "login_1%3a4.13+dfsg1-1_amd64.deb"},
		{pkg("tzdata", "2024a-0+deb12u1", "2025b-0+deb12u1"), "tzdata_2024a-0+deb12u1_all.deb"},
		{pkg("libc6:i386", "2.36-9", "2.36-9+deb12u14"), "libc6_2.36-9_i386.deb"},
		{pkg("libc6", "2.36-9", "2.36-9+deb12u14"), "libc6_2.36-9_amd64.deb"},
		{pkg("libc6:arm64", "2.36-9", "2.36-9+deb12u14"), ""},
		{pkg("bash", "5.2.15-2+b8", "5.2.15-2+b13"), ""},
	} {
		got := debIn(dir, c.p, "amd64")
		if filepath.Base(got) != c.want && !(got == "" && c.want == "") {
			t.Errorf("%s %s: found %q, want %q", c.p.Name, c.p.From, got, c.want)
		}
	}
	out := "Remv newdep [1.0]\nRemv kubelet [1.30.1] [containerd ]\nInst x (1 a [all])\n"
	if got := removals([]byte(out)); !reflect.DeepEqual(got, []string{"newdep", "kubelet"}) {
		t.Errorf("removals: %v", got)
	}
}

// Versions are compared by dpkg itself (this machine is Debian, as the
// hosts are).
func TestVersionsAreComparedByDpkg(t *testing.T) {
	a := NewApt(nil)
	for _, c := range []struct {
		a, b  string
		newer bool
	}{{"1:1.0", "2.0", true}, {"2.0~rc1", "2.0", false}, {"2.36-9+deb12u14", "2.36-9+deb12u4", true}, {"1.0", "1.0", false}} {
		got, err := a.Newer(context.Background(), c.a, c.b)
		if err != nil || got != c.newer {
			t.Errorf("%s newer than %s: %v, %v; want %v", c.a, c.b, got, err, c.newer)
		}
	}
}
