package patch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// dnfAPI is what Dnf asks of dnf's own Python API (dnf 4's documented
// dnf.Base), run by dnf's own interpreter: the transaction dnf would make,
// what is installed, and rpm's comparison of two versions. dnf's tables
// are for people (translated, wrapped at 80 columns, obsoletes on a line
// of their own); its API says the same in data. After Refresh it reads the
// metadata Refresh fetched, nothing newer (cacheonly), as the install
// does (-C).
//
// Its one argument is a JSON object: op (plan, installed, newer), root (a
// test's root directory; "" for the host's own configuration), cacheonly,
// specs (for
// plan: none to upgrade everything, else exactly these to install), a and
// b (for newer). It prints a JSON value; an error is its exit status and
// standard error.
//
// A package's key is its name, or NAME.ARCH for one of an architecture
// other than the host's own and noarch (glibc.i686), as apt names a
// foreign one. plan lists what would be installed or upgraded, with the
// version installed before (for a package installed in several versions,
// a kernel, the newest), and whether it is a security update: a security
// advisory names it, or a version between the one installed and it (a
// bug fix that came after the security fix carries it too); any other change (a removal, a downgrade, an obsolete) is
// refused, but for the oldest versions of an installonly package (a
// kernel) that dnf removes beyond installonly_limit, as it would by
// itself.
const dnfAPI = `
import json, sys
import dnf, dnf.exceptions, dnf.rpm, dnf.transaction, rpm

a = json.loads(sys.argv[1])

def evr(s):
    e, _, vr = s.rpartition(":")
    v, _, r = vr.partition("-")
    return (e or "0", v, r)

if a["op"] == "newer":
    print(json.dumps(rpm.labelCompare(evr(a["a"]), evr(a["b"])) > 0))
    sys.exit(0)

b = dnf.Base()
c = b.conf
if a.get("root"):
    r = a["root"]
    c.installroot = r
    c.reposdir = [r + "/etc/yum.repos.d"]
    c.cachedir = r + "/var/cache/dnf"
    c.substitutions["releasever"] = "1"
else:
    c.read()
    c.substitutions["releasever"] = dnf.rpm.detect_releasever(c.installroot)
    c.substitutions.update_from_etc(c.installroot)
c.cacheonly = bool(a.get("cacheonly"))
b.read_all_repos()
b.fill_sack(load_system_repo=True)
arch = c.substitutions["basearch"]

def key(p):
    if p.arch in ("noarch", arch) or dnf.rpm.basearch(p.arch) == arch:
        return p.name
    return p.name + "." + p.arch

newest = {}
for p in b.sack.query().installed():
    k = key(p)
    if k not in newest or p.evr_cmp(newest[k]) > 0:
        newest[k] = p
installed = {k: p.evr for k, p in newest.items()}
if a["op"] == "installed":
    print(json.dumps(installed))
    sys.exit(0)

fixes = b.sack.query().available().filter(advisory_type="security")

def security(p):
    before = newest.get(key(p))
    for f in fixes.filter(name=p.name, arch=p.arch):
        if f.evr_cmp(p) <= 0 and (before is None or f.evr_cmp(before) > 0):
            return True
    return False

try:
    if a.get("specs"):
        for s in a["specs"]:
            b.install(s, strict=True)
    else:
        b.upgrade_all()
    b.resolve(allow_erasing=False)
except dnf.exceptions.Error as e:
    sys.exit("dnf: %s" % e)
only = set(c.installonlypkgs)
T = dnf.transaction
changes, refused = [], []
for t in b.transaction:
    p = t.pkg
    if t.action in (T.PKG_INSTALL, T.PKG_UPGRADE):
        changes.append({"name": key(p), "from": installed.get(key(p), ""), "to": p.evr, "repo": p.reponame or "", "security": security(p)})
    elif t.action == T.PKG_UPGRADED or t.action == T.PKG_REMOVE and p.name in only:
        pass
    else:
        refused.append("%s %s-%s.%s" % (t.action_name, p.name, p.evr, p.arch))
if refused:
    sys.exit("dnf would make a change a patch campaign makes none of: " + ", ".join(refused))
print(json.dumps(changes))
`

// api runs dnfAPI with the arguments of req and reads what it prints
// into out.
func (d *Dnf) api(ctx context.Context, req map[string]any, out any) error {
	python, err := d.python()
	if err != nil {
		return err
	}
	if d.Root != "" {
		req["root"] = d.Root
	}
	req["cacheonly"] = d.refreshed
	arg, err := json.Marshal(req)
	if err != nil {
		return err
	}
	b, err := d.Run(ctx, dnfEnv, python, "-c", dnfAPI, string(arg))
	var exit *CommandError
	if errors.As(err, &exit) {
		// The command line is the whole script: say what was asked.
		exit.Command = fmt.Sprintf("dnf's Python API (%s)", req["op"])
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("dnf's Python API (%s): %q: %w", req["op"], b, err)
	}
	return nil
}

// python is the interpreter dnf itself runs with (the #! line of the dnf
// script: /usr/libexec/platform-python on RHEL 8, python3 on 9). A dnf
// that is no Python script is dnf5 (Fedora 41 and later), whose API this
// is not.
func (d *Dnf) python() (string, error) {
	if d.Python != "" {
		return d.Python, nil
	}
	exe, err := exec.LookPath("dnf")
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	switch {
	case !strings.HasPrefix(line, "#!") || len(fields) == 0:
		return "", fmt.Errorf("%s is not dnf 4's Python script (dnf5?): patch campaigns run with dnf 4 (RHEL 8 and 9 and their rebuilds)", exe)
	case len(fields) > 1 && strings.HasSuffix(fields[0], "/env"):
		d.Python = fields[1]
	default:
		d.Python = fields[0]
	}
	return d.Python, nil
}
