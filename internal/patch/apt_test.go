package patch

import (
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
		{pkg("base-files", "12.4+deb12u11", "12.4+deb12u15"), "Debian:12.15/oldstable"},
		{pkg("libgcrypt20-dev", "1.10.1-3", "1.10.1-3+deb12u1"), "Debian:12.15/oldstable, Debian-Security:12/oldstable-security"},
		{pkg("libfoo1", "", "2.0-1"), "localrepo:kustodian/test"},
		{pkg("libpam-modules-bin", "1.5.2-6+deb12u1", "1.5.2-6+deb12u3"), "Debian-Security:12/oldstable-security"},
		{pkg("libc6:i386", "2.36-9", "2.36-9+deb12u14"), "Debian:12.15/oldstable"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read\n%+v\nwant\n%+v", got, want)
	}
	if IsSecurity(got[0].Release) || !IsSecurity(got[1].Release) {
		t.Errorf("security: %q %v, %q %v", got[0].Release, IsSecurity(got[0].Release), got[1].Release, IsSecurity(got[1].Release))
	}
	if _, err := parseAptSimulation([]byte("Remv kubelet [1.30.1]\n")); err == nil || !strings.Contains(err.Error(), "kubelet") {
		t.Errorf("a removal: %v, want an error naming it", err)
	}
	if _, err := parseAptSimulation([]byte("Inst what is this\n")); err == nil {
		t.Error("a line it cannot read was taken")
	}
}

func pkg(name, from, to string) Package { return Package{Name: name, From: from, To: to} }
