package config

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Endpoints are the Alertmanagers or the Prometheus servers this host may
// talk to, each with the file of the credentials it sends there. A
// MaintenancePolicy names one by its URL and can choose only among these:
// a cluster object never names a host file, nor a new place to send what a
// host holds.
type Endpoints []string

// Endpoint is one item of Endpoints: "URL", "URL bearer FILE" (a token)
// or "URL basic FILE" (username:password).
type Endpoint struct {
	URL string
	// Type is "bearer" or "basic"; "" with no credentials.
	Type string
	File string
}

// MaxCredentialsBytes bounds what the agent reads of a credentials file:
// a token or a password is small, and a file that is not (a device, a
// mistake) must not fill the agent's memory.
const MaxCredentialsBytes = 16 << 10

// ParseEndpoint reads one item of an endpoints list.
func ParseEndpoint(item string) (Endpoint, error) {
	f := strings.Fields(item)
	var e Endpoint
	switch len(f) {
	case 1:
		e.URL = f[0]
	case 3:
		e.URL, e.Type, e.File = f[0], strings.ToLower(f[1]), f[2]
	default:
		return Endpoint{}, fmt.Errorf("%q is not \"URL\", \"URL bearer FILE\" or \"URL basic FILE\"", item)
	}
	u, err := url.Parse(e.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return Endpoint{}, fmt.Errorf("%q is not an http:// or https:// URL", e.URL)
	case u.User != nil:
		return Endpoint{}, fmt.Errorf("%s carries credentials in the URL; give them as \"URL bearer FILE\" or \"URL basic FILE\"", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return Endpoint{}, fmt.Errorf("%q has a query or a fragment; give the base URL", e.URL)
	}
	e.URL = normalURL(e.URL)
	if e.Type != "" {
		if e.Type != "bearer" && e.Type != "basic" {
			return Endpoint{}, fmt.Errorf("%q: credentials type %q is not bearer or basic", item, f[1])
		}
		if !filepath.IsAbs(e.File) {
			return Endpoint{}, fmt.Errorf("%q: credentials file %q is not an absolute path", item, e.File)
		}
	}
	return e, nil
}

// normalURL is how URLs are compared: without a trailing slash.
func normalURL(u string) string { return strings.TrimRight(u, "/") }

// Problems checks every item; key names the list in messages.
func (es Endpoints) problems(key string) []*FieldError {
	var out []*FieldError
	seen := map[string]bool{}
	for i, item := range es {
		e, err := ParseEndpoint(item)
		if err != nil {
			out = append(out, &FieldError{Key: key, Err: fmt.Errorf("item %d: %w", i+1, err)})
			continue
		}
		if seen[e.URL] {
			out = append(out, &FieldError{Key: key, Err: fmt.Errorf("item %d: %s is listed twice", i+1, e.URL)})
		}
		seen[e.URL] = true
	}
	return out
}

// ErrNotAllowed is the error of Lookup for a URL this host does not list.
var ErrNotAllowed = errors.New("not allowed by this host")

// Lookup is the endpoint of url, or an error naming key (the configuration
// key) that says how to allow it.
func (es Endpoints) Lookup(key, rawURL string) (Endpoint, error) {
	want := normalURL(rawURL)
	for _, item := range es {
		if e, err := ParseEndpoint(item); err == nil && e.URL == want {
			return e, nil
		}
	}
	return Endpoint{}, fmt.Errorf("%s is %w: the host's %s (%s) does not list it; add it there, with its credentials file if it needs one", rawURL, ErrNotAllowed, key, DefaultFile)
}

// Auth is what a request to a server the host lists carries: nothing, a
// bearer token, or with Basic "username:password". It never appears in an
// error or a log line.
type Auth struct {
	Basic       bool
	Credentials string
}

// Apply sets the request's Authorization header.
func (a Auth) Apply(req *http.Request) {
	switch {
	case a.Credentials == "":
	case a.Basic:
		user, pass, _ := strings.Cut(a.Credentials, ":")
		req.SetBasicAuth(user, pass)
	default:
		req.Header.Set("Authorization", "Bearer "+a.Credentials)
	}
}

// Auth reads the endpoint's credentials file, read afresh each time (a
// rotated token is used at once).
func (e Endpoint) Auth() (Auth, error) {
	c, err := e.Credentials()
	return Auth{Basic: e.Type == "basic", Credentials: c}, err
}

// Credentials reads the endpoint's credentials file: "" without one. The
// file must be a regular file of at most MaxCredentialsBytes; its content
// never appears in an error.
func (e Endpoint) Credentials() (string, error) {
	if e.File == "" {
		return "", nil
	}
	f, err := os.Open(e.File)
	if err != nil {
		return "", fmt.Errorf("credentials of %s: %w", e.URL, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("credentials of %s: %w", e.URL, err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("credentials of %s: %s is not a regular file", e.URL, e.File)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxCredentialsBytes+1))
	if err != nil {
		return "", fmt.Errorf("credentials of %s: %w", e.URL, err)
	}
	if len(b) > MaxCredentialsBytes {
		return "", fmt.Errorf("credentials of %s: %s is larger than %d bytes", e.URL, e.File, MaxCredentialsBytes)
	}
	c := strings.TrimSpace(string(b))
	if e.Type == "basic" && !strings.Contains(c, ":") {
		return "", fmt.Errorf("credentials of %s: %s must hold username:password (type basic)", e.URL, e.File)
	}
	return c, nil
}
