package gates

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/policy"
)

func serve(t *testing.T, path, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		if q := r.URL.Query().Get("query"); path == "/api/v1/query" && q != "up == 0" {
			t.Errorf("query %q", q)
		}
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const alerts = `{"status":"success","data":{"alerts":[
 {"labels":{"alertname":"Watchdog"},"state":"firing"},
 {"labels":{"alertname":"KubePodCrashLooping"},"state":"firing"},
 {"labels":{"alertname":"KubePodCrashLooping"},"state":"firing"},
 {"labels":{"alertname":"NodeDiskFilling"},"state":"pending"},
 {"labels":{"alertname":"Gone"},"state":"inactive"}]}}`

func TestPrometheusAlerts(t *testing.T) {
	url := serve(t, "/api/v1/alerts", alerts)
	for _, tc := range []struct {
		name string
		p    policy.Prometheus
		want string
	}{
		{"firing and pending block", policy.Prometheus{}, "KubePodCrashLooping,NodeDiskFilling,Watchdog"},
		{"firing only", policy.Prometheus{FiringOnly: true}, "KubePodCrashLooping,Watchdog"},
		{"the filter ignores matching alerts", policy.Prometheus{AlertFilterRegexp: "^(Watchdog|InfoInhibitor)$"}, "KubePodCrashLooping,NodeDiskFilling"},
		{"match only: only matching alerts block", policy.Prometheus{AlertFilterRegexp: "^Node", AlertFilterMatchOnly: true}, "NodeDiskFilling"},
		{"nothing matches", policy.Prometheus{AlertFilterRegexp: "^Nope", AlertFilterMatchOnly: true}, ""},
	} {
		tc.p.URL = url + "/"
		r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &tc.p)
		if r.Err != "" || strings.Join(r.Blocking, ",") != tc.want {
			t.Errorf("%s: got %+v, want %q", tc.name, r, tc.want)
		}
	}
}

func TestPrometheusQueryAndFailures(t *testing.T) {
	vector := serve(t, "/api/v1/query", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}`)
	if r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &policy.Prometheus{URL: vector, Query: "up == 0"}); r.Err != "" || len(r.Blocking) != 1 {
		t.Errorf("a non-empty vector: %+v", r)
	}
	empty := serve(t, "/api/v1/query", `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	if r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &policy.Prometheus{URL: empty, Query: "up == 0"}); r.Err != "" || len(r.Blocking) != 0 {
		t.Errorf("an empty vector: %+v", r)
	}
	scalar := serve(t, "/api/v1/query", `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`)
	if r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &policy.Prometheus{URL: scalar, Query: "up == 0"}); !strings.Contains(r.Err, "not a vector") {
		t.Errorf("a scalar: %+v", r)
	}
	bad := serve(t, "/api/v1/alerts", `<html>proxy error</html>`)
	if r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &policy.Prometheus{URL: bad}); !strings.Contains(r.Err, "not Prometheus' JSON") {
		t.Errorf("HTML: %+v", r)
	}
	failed := serve(t, "/api/v1/alerts", `{"status":"error","error":"overloaded"}`)
	if r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &policy.Prometheus{URL: failed}); !strings.Contains(r.Err, "overloaded") {
		t.Errorf("an error answer: %+v", r)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	gone := srv.URL
	srv.Close()
	if r := Prometheus(context.Background(), http.DefaultClient, config.Auth{}, &policy.Prometheus{URL: gone}); !strings.Contains(r.Err, "unreachable") {
		t.Errorf("unreachable: %+v", r)
	}
}

func TestCommand(t *testing.T) {
	if r := Command(context.Background(), "true", time.Second); !r.OK {
		t.Errorf("true: %+v", r)
	}
	if r := Command(context.Background(), "echo checking; echo 'ceph is degraded' >&2; exit 3", time.Second); r.OK || r.Reason != "ceph is degraded" {
		t.Errorf("failing: %+v", r)
	}
	if r := Command(context.Background(), "exit 4", time.Second); r.OK || r.Reason != "exit status 4" {
		t.Errorf("silent failure: %+v", r)
	}
	if r := Command(context.Background(), "sleep 5", 200*time.Millisecond); r.OK || !strings.Contains(r.Reason, "did not finish within 200ms") {
		t.Errorf("slow: %+v", r)
	}
}

// The host's credentials for a Prometheus go with each request, as a
// bearer token or basic auth.
func TestPrometheusSendsTheHostsCredentials(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Write([]byte(`{"status":"success","data":{"alerts":[]}}`))
	}))
	t.Cleanup(srv.Close)
	for _, auth := range []config.Auth{{}, {Credentials: "tok"}, {Basic: true, Credentials: "u:p"}} {
		if r := Prometheus(context.Background(), srv.Client(), auth, &policy.Prometheus{URL: srv.URL}); r.Err != "" {
			t.Fatal(r.Err)
		}
	}
	want := []string{"", "Bearer tok", "Basic dTpw"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Authorization headers %q, want %q", got, want)
	}
}
