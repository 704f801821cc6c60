// Package httpx is the one way the agent asks a server of its host's
// configuration (an Alertmanager, a Prometheus): the request sent, a
// transport failure said by the address, and the answer read up to a
// bound, so that a server that answers without end cannot exhaust the
// agent's memory.
package httpx

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// MaxAnswer bounds the answer read.
const MaxAnswer = 8 << 20

// Exchange sends req with client (nil: http.DefaultClient) and returns the
// answer's status and body, read up to MaxAnswer. where names the server
// in errors ("http://am:9093/api/v2/alerts"), without a query that may
// hold matchers.
func Exchange(client *http.Client, req *http.Request, where string) (*http.Response, []byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("%s unreachable: %v", where, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the answer of %s: %w", where, err)
	}
	return resp, b, nil
}
