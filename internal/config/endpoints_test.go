package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		item string
		want Endpoint
		err  string
	}{
		{item: "http://am.monitoring:9093/", want: Endpoint{URL: "http://am.monitoring:9093"}},
		{item: "https://am.example.com Bearer /etc/kustodian/am-token", want: Endpoint{URL: "https://am.example.com", Type: "bearer", File: "/etc/kustodian/am-token"}},
		{item: "https://am.example.com/am basic /etc/kustodian/am", want: Endpoint{URL: "https://am.example.com/am", Type: "basic", File: "/etc/kustodian/am"}},
		{item: "am.monitoring:9093", err: "is not an http:// or https:// URL"},
		{item: "http://u:secret@am:9093", err: "carries credentials in the URL"},
		{item: "http://am:9093 bearer", err: `is not "URL", "URL bearer FILE" or "URL basic FILE"`},
		{item: "http://am:9093 digest /f", err: `credentials type "digest" is not bearer or basic`},
		{item: "http://am:9093 bearer token.txt", err: "is not an absolute path"},
		{item: "http://am:9093/?x=1", err: "has a query or a fragment"},
	} {
		got, err := ParseEndpoint(tc.item)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want an error with %q", tc.item, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %+v %v, want %+v", tc.item, got, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the password: %v", tc.item, err)
		}
	}
}

// A policy chooses among what the host lists; a URL it does not list is
// refused with the key to add it to, and no file is read.
func TestLookupAndCredentials(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxCredentialsBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	basic := filepath.Join(dir, "basic")
	if err := os.WriteFile(basic, []byte("no-colon"), 0o600); err != nil {
		t.Fatal(err)
	}
	es := Endpoints{"http://am:9093 bearer " + token, "http://big:1 bearer " + big, "http://dev:1 bearer /dev/zero", "http://basic:1 basic " + basic, "http://plain:1"}

	e, err := es.Lookup("alertmanager.endpoints", "http://am:9093/")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := e.Credentials(); err != nil || c != "s3cret" {
		t.Errorf("credentials %q %v, want the file's token", c, err)
	}
	if e, err := es.Lookup("alertmanager.endpoints", "http://plain:1"); err != nil || e.File != "" {
		t.Errorf("an endpoint without credentials: %+v %v", e, err)
	}
	_, err = es.Lookup("alertmanager.endpoints", "http://attacker:8080")
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "alertmanager.endpoints") {
		t.Errorf("an unlisted URL: %v, want refused naming the key", err)
	}
	for url, want := range map[string]string{
		"http://big:1":   "larger than 16384 bytes",
		"http://dev:1":   "/dev/zero is not a regular file",
		"http://basic:1": "must hold username:password",
	} {
		e, err := es.Lookup("k", url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Credentials(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", url, err, want)
		}
	}
}

func TestEndpointProblems(t *testing.T) {
	a := Defaults()
	a.Alertmanager.Endpoints = Endpoints{"http://am:9093", "http://am:9093/", "ftp://x"}
	var keys []string
	for _, p := range a.Problems() {
		keys = append(keys, p.Error())
	}
	got := strings.Join(keys, "\n")
	for _, want := range []string{"alertmanager.endpoints: item 2: http://am:9093 is listed twice", "alertmanager.endpoints: item 3: \"ftp://x\" is not an http:// or https:// URL"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems %q lack %q", got, want)
		}
	}
}
