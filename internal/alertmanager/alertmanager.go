// Package alertmanager speaks Alertmanager's API v2: the silences an agent
// keeps over its node while it is in maintenance, and the active alerts the
// policy's blockers.alertmanager gate blocks on (silenced and inhibited
// ones left out, as Alertmanager itself leaves them out of notifications).
package alertmanager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/httpx"
)

// Client asks one Alertmanager.
type Client struct {
	URL  string // e.g. http://alertmanager.monitoring:9093
	HTTP *http.Client
	// Auth is sent with every request (the host's credentials for URL).
	Auth config.Auth
}

// Matcher is one of Alertmanager's label matchers.
type Matcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// String is the matcher as Alertmanager's filter parameter writes it.
func (m Matcher) String() string {
	op := map[[2]bool]string{{false, true}: "=", {false, false}: "!=", {true, true}: "=~", {true, false}: "!~"}[[2]bool{m.IsRegex, m.IsEqual}]
	return m.Name + op + fmt.Sprintf("%q", m.Value)
}

// Silence is a silence as Alertmanager keeps it.
type Silence struct {
	ID        string    `json:"id,omitempty"`
	Matchers  []Matcher `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	Status    *struct {
		State string `json:"state"` // active, pending, expired
	} `json:"status,omitempty"`
}

// Active reports whether Alertmanager says the silence is active or
// pending (not yet expired).
func (s Silence) Active() bool {
	return s.Status == nil || s.Status.State != "expired"
}

// Alert is an alert as Alertmanager keeps it.
type Alert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"` // active, suppressed, unprocessed
		SilencedBy  []string `json:"silencedBy"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// ActiveAlerts returns the alerts that are active and neither silenced
// nor inhibited, matching every filter (Alertmanager's matcher syntax,
// e.g. severity="critical").
func (c *Client) ActiveAlerts(ctx context.Context, filters []string) ([]Alert, error) {
	q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}, "unprocessed": {"false"}}
	for _, f := range filters {
		q.Add("filter", f)
	}
	var alerts []Alert
	if err := c.do(ctx, http.MethodGet, "/api/v2/alerts?"+q.Encode(), nil, &alerts); err != nil {
		return nil, err
	}
	// Older Alertmanagers ignore some of the parameters: judge again.
	out := alerts[:0]
	for _, a := range alerts {
		if a.Status.State == "active" && len(a.Status.SilencedBy) == 0 && len(a.Status.InhibitedBy) == 0 {
			out = append(out, a)
		}
	}
	return out, nil
}

// Silences returns every silence Alertmanager keeps, expired ones too.
func (c *Client) Silences(ctx context.Context) ([]Silence, error) {
	var out []Silence
	err := c.do(ctx, http.MethodGet, "/api/v2/silences", nil, &out)
	return out, err
}

// PutSilence creates s, or with its ID updates it (Alertmanager may give an
// updated silence a new ID); it returns the ID.
func (c *Client) PutSilence(ctx context.Context, s Silence) (string, error) {
	s.Status = nil
	body, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/v2/silences", body, &out); err != nil {
		return "", err
	}
	if out.SilenceID == "" {
		return "", fmt.Errorf("%s answered without a silence ID", c.URL)
	}
	return out.SilenceID, nil
}

// Expire ends the silence id now; one already expired or gone is done.
func (c *Client) Expire(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/api/v2/silence/"+url.PathEscape(id), nil, nil)
	var se *StatusError
	if errors.As(err, &se) && (se.Code == http.StatusNotFound || strings.Contains(se.Body, "already expired")) {
		return nil
	}
	return err
}

// StatusError is an answer other than 200.
type StatusError struct {
	URL, Status, Body string
	Code              int
}

func (e *StatusError) Error() string {
	if e.Body != "" {
		return fmt.Sprintf("%s answered %s: %s", e.URL, e.Status, e.Body)
	}
	return fmt.Sprintf("%s answered %s", e.URL, e.Status)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, into any) error {
	u := strings.TrimSuffix(c.URL, "/") + path
	where := strings.TrimSuffix(c.URL, "/") + strings.SplitN(path, "?", 2)[0]
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("alertmanager %s: %w", c.URL, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.Auth.Apply(req)
	resp, b, err := httpx.Exchange(c.HTTP, req, where)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return &StatusError{URL: where, Status: resp.Status, Code: resp.StatusCode, Body: msg}
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s answered something that is not Alertmanager's JSON: %v", where, err)
	}
	return nil
}
