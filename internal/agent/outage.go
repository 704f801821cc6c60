package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// probeEvery is how often an agent asks whether the API server is back,
// spread by ±50 % so that a fleet does not come back in step.
const probeEvery = time.Second

// awayAfter is how long the API server may go without answering a probe
// (time-outs, a connection lost) before the agent takes it for away. A
// control plane overloaded by a fleet answers late and drops connections:
// taken for away, it would be read whole again by each agent when it
// answered, adding to the load that slowed it (seen with 1,000 agents:
// hundreds of them did so). A refused connection, or an answer that it is
// not ready, is away at once.
const awayAfter = 30 * time.Second

// rideOut waits out the delay after a failed step. If the API server is
// away, it waits instead until it answers again, however long that takes,
// and then reads the cluster anew: the informers' own backoff would keep
// them off events for up to a minute after a long outage, and a decision
// taken on their stale caches is a decision on the world before the
// outage. One /readyz a second per agent while the API server is away;
// one LIST per informer when it is back. If it is only slow to answer, it
// waits for an answer, each probe allowed longer, and reads nothing anew.
func (a *Agent) rideOut(ctx context.Context, delay time.Duration) error {
	timer := a.clock.NewTimer(delay)
	defer timer.Stop()
	probe := a.clock.NewTimer(0)
	defer probe.Stop()
	var o outage
	elapsed, asked, slowSaid := false, false, false
	refused := 0 // lists refused since the API server came back
	again := func() { probe.Reset(time.Duration((0.5 + rand.Float64()) * float64(probeEvery))) }
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
			elapsed = true
			if asked && o.answered() {
				return nil
			}
		case <-probe.C():
			err := a.readyzWithin(ctx, o.timeout())
			if ctx.Err() != nil {
				return nil
			}
			asked = true
			switch o.probed(a.now(), err) {
			case answered:
				if slowSaid {
					a.log.Info("the API server answers again")
					slowSaid = false
				}
				if elapsed {
					return nil
				}
			case slow:
				slowSaid = true
				a.setStatus(fmt.Sprintf("the API server is slow to answer; waiting for it: %v", err))
				a.log.Info("the API server is slow to answer; waiting for it, each probe allowed longer", "err", err, "next_within", o.timeout())
				again()
			case wentAway:
				a.setStatus(fmt.Sprintf("the API server is away; going on as soon as it answers: %v", err))
				a.log.Warn("the API server is away; asking every second whether it is back", "err", err)
				again()
			case slowStill, awayStill:
				again()
			case back:
				a.log.Info("the API server is back; reading the cluster anew")
				err := a.startInformers(ctx, true)
				switch {
				case errors.Is(err, errAwayAgain):
					a.log.Warn("the API server went away again; asking every second whether it is back", "err", err)
					o.away = true
					again()
				case errors.Is(err, errRefused):
					// Its authorizer is not ready yet: read again soon,
					// sooner than the informers' backoff would.
					refused++
					wait := min(probeEvery<<min(refused-1, 3), 8*probeEvery)
					a.log.Info("the API server refused a list; reading the cluster again", "in", wait)
					o.away = true
					probe.Reset(wait)
				default:
					return err
				}
			}
		}
	}
}

// outage is what an agent riding out a failure knows of the API server.
type outage struct {
	away bool
	// unanswered: since when probes have gone unanswered, the API server
	// not yet taken for away; zero when the last probe was answered.
	unanswered time.Time
	tries      int // unanswered probes in a row
}

// A probe's verdict.
const (
	answered  = iota // it answers, and it was not away
	slow             // the first probe in a row that it did not answer, not yet taken for away
	slowStill        // another
	wentAway         // now taken for away
	awayStill        // still away
	back             // it answers after it was away
)

// probed takes a probe's answer (err nil: it answered) at now.
func (o *outage) probed(now time.Time, err error) int {
	switch {
	case err == nil && o.away:
		*o = outage{}
		return back
	case err == nil:
		*o = outage{}
		return answered
	case o.away:
		return awayStill
	}
	o.tries++
	if o.unanswered.IsZero() {
		o.unanswered = now
	}
	if surelyAway(err) || now.Sub(o.unanswered) >= awayAfter {
		*o = outage{away: true}
		return wentAway
	}
	if o.tries == 1 {
		return slow
	}
	return slowStill
}

// answered: the last probe was answered.
func (o *outage) answered() bool { return !o.away && o.unanswered.IsZero() }

// timeout is how long the next probe may take: probeTimeout, doubled for
// each unanswered one in a row up to four times that, so that a slow API
// server can answer one; probeTimeout again once it is away.
func (o *outage) timeout() time.Duration {
	return probeTimeout << min(o.tries, 2)
}

// surelyAway: err says the API server is not there, or not ready, rather
// than slow: the connection refused or unroutable, its name unknown, or a
// 5xx from /readyz (a 504 is a proxy's time-out: slow).
func surelyAway(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 500 && code != http.StatusGatewayTimeout
	}
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.As(err, &dns)
}

// probeTimeout bounds one /readyz: an address that drops packets must not
// hold a probe for the 30 s of a TCP dial.
const probeTimeout = 3 * time.Second

// readyz asks the API server whether it is ready, within probeTimeout.
func (a *Agent) readyz(ctx context.Context) error { return a.readyzWithin(ctx, probeTimeout) }

// readyzWithin asks the API server whether it is ready, within timeout (on
// the agent's clock). A server that turns the probe away (429) is there,
// only busy: taking it for away would read the whole cluster again when
// it answers, adding to the load that made it busy.
func (a *Agent) readyzWithin(ctx context.Context, timeout time.Duration) error {
	probe, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timedOut := fmt.Errorf("/readyz did not answer within %s", timeout)
	t := a.clock.NewTimer(timeout)
	answered := make(chan struct{})
	defer close(answered)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			cancel(timedOut)
		case <-answered:
		}
	}()
	err := a.kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(probe).Error()
	switch {
	case apierrors.IsTooManyRequests(err):
		return nil
	case err != nil && ctx.Err() == nil && errors.Is(context.Cause(probe), timedOut):
		return timedOut
	}
	return err
}

// ConnWatch tells the agent of every request to the API server that
// failed in the transport (refused, reset, timed out): wrapped around the
// agent's clients (rest.Config.Wrap), it makes the Run loop check whether
// the API server is away as a failed watch does (watchBroke). An informer
// does not say when its watch cannot be started again for a refused
// connection: it backs off, up to 30 s, on its own.
type ConnWatch struct{ failed chan struct{} }

// NewConnWatch makes a ConnWatch.
func NewConnWatch() *ConnWatch { return &ConnWatch{failed: make(chan struct{}, 1)} }

// Wrap is a rest.Config's WrapTransport.
func (w *ConnWatch) Wrap(rt http.RoundTripper) http.RoundTripper {
	return connWatchTransport{rt: rt, failed: w.failed}
}

type connWatchTransport struct {
	rt     http.RoundTripper
	failed chan struct{}
}

func (t connWatchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil && req.Context().Err() == nil {
		select {
		case t.failed <- struct{}{}:
		default:
		}
	}
	return resp, err
}
