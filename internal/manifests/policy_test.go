package manifests

import (
	"regexp"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kustodian/kustodian/internal/lock"
)

// An honest agent never meets the admission policy's bound on a Lease's
// annotations, whatever its messages, gates and drains come to.
func TestHonestLeasesStayUnderTheAnnotationBound(t *testing.T) {
	long := strings.Repeat("é", 5000)
	r := lock.Record{Node: strings.Repeat("n", 253), State: lock.Waiting, Since: time.Now(), Reason: long, Message: long,
		RequestID: long, Policy: strings.Repeat("p", 40), Group: strings.Repeat("g", 63), Priority: -2147483648,
		Blocked: long, Gates: `[` + strings.Repeat(`{"gate":"pods","verdict":"closed"},`, 230) + `{}]`,
		BlockedReported: true, QueueKey: "18446744073709551615", ReleasedRequest: long}
	var l coordv1.Lease
	r.ApplyTo(&l)
	if n := annotationBytes(l.Annotations); n > MaxLeaseAnnotationBytes {
		t.Errorf("a record's annotations come to %d bytes, over %d", n, MaxLeaseAnnotationBytes)
	}
	var disrupted []string
	for i := 0; i < 100; i++ {
		disrupted = append(disrupted, "Deployment/"+strings.Repeat("n", 63)+"/"+strings.Repeat("d", 253))
	}
	lockAnn := map[string]string{
		lock.AnnotationPolicy: strings.Repeat("p", 40), lock.AnnotationGroup: strings.Repeat("g", 63),
		lock.AnnotationReleasedAt: time.Now().Format(time.RFC3339Nano), lock.AnnotationDisrupted: lock.FormatDisrupted(disrupted),
	}
	if n := annotationBytes(lockAnn); n > MaxLeaseAnnotationBytes {
		t.Errorf("a lock's annotations come to %d bytes, over %d", n, MaxLeaseAnnotationBytes)
	}
}

func annotationBytes(a map[string]string) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(v)
	}
	return n
}

// The lock names the policy admits are those lock.GroupRef makes, and not
// others.
func TestLockNamePattern(t *testing.T) {
	re := regexp.MustCompile(lockNamePattern)
	for _, name := range []string{
		lock.DefaultGroup.LockName(0),
		lock.GroupRef{Policy: strings.Repeat("p", 40), Group: strings.Repeat("Zone_", 30)}.LockName(999),
		lock.GroupRef{Policy: "zones", Group: "eu-1"}.LockName(12),
	} {
		if !re.MatchString(name) {
			t.Errorf("%s is made by the protocol but refused", name)
		}
	}
	for _, name := range []string{"lock-junk-12345", "lock-default-01", "lock--0", "lock-x", "lock-a.b-0", "lock-" + strings.Repeat("a", 100) + "-0"} {
		if re.MatchString(name) {
			t.Errorf("%s admitted", name)
		}
	}
}

// Install applies in order and uninstall in reverse: the admission
// policies and the limits must come before the rights they narrow.
func TestPoliciesBeforeRights(t *testing.T) {
	objs := Objects(Options{Namespace: "ns", KuredNamespace: "kube-system", KuredDaemonSet: "kured"})
	firstRight, lastGuard := len(objs), -1
	for i, o := range objs {
		switch o.Resource.Resource {
		case "roles", "rolebindings", "clusterroles", "clusterrolebindings":
			firstRight = min(firstRight, i)
		case "validatingadmissionpolicies", "validatingadmissionpolicybindings", "resourcequotas", "flowschemas", "prioritylevelconfigurations":
			lastGuard = i
		}
	}
	if lastGuard < 0 || firstRight == len(objs) || lastGuard > firstRight {
		t.Errorf("a right (object %d) comes before a policy or limit (object %d)", firstRight, lastGuard)
	}
}

// With KubeletEvictions the agents' ServiceAccount may evict nothing;
// without, it may (and the bound policy is what scopes it).
func TestKubeletEvictionsDropTheEvictionRight(t *testing.T) {
	for _, kubelet := range []bool{false, true} {
		evicts := false
		for _, obj := range Objects(Options{Namespace: "kustodian", KuredNamespace: "kube-system", KuredDaemonSet: "kured", KubeletEvictions: kubelet}) {
			var rules []rbacv1.PolicyRule
			switch r := obj.Object.(type) {
			case *rbacv1.ClusterRole:
				rules = r.Rules
			case *rbacv1.Role:
				rules = r.Rules
			}
			for _, rule := range rules {
				for _, res := range rule.Resources {
					if res == "pods/eviction" || res == "*" || res == "pods/*" {
						evicts = true
					}
				}
			}
		}
		if evicts == kubelet {
			t.Errorf("KubeletEvictions=%v: the ServiceAccount may evict: %v", kubelet, evicts)
		}
	}
}
