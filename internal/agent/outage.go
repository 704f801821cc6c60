package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// probeEvery is how often an agent asks whether the API server is back,
// spread by ±50 % so that a fleet does not come back in step.
const probeEvery = time.Second

// rideOut waits out the delay after a failed step. If the API server is
// away (its /readyz does not answer), it waits instead until it answers
// again, however long that takes, and then reads the cluster anew: the
// informers' own backoff would keep them off events for up to a minute
// after a long outage, and a decision taken on their stale caches is a
// decision on the world before the outage. One /readyz a second per
// agent while the API server is away; one LIST per informer when it is
// back.
func (a *Agent) rideOut(ctx context.Context, delay time.Duration) error {
	timer := a.clock.NewTimer(delay)
	defer timer.Stop()
	probe := a.clock.NewTimer(0)
	defer probe.Stop()
	away := false
	refused := 0 // lists refused since the API server came back
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
			if !away {
				return nil
			}
		case <-probe.C():
			err := a.readyz(ctx)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				if !away {
					a.setStatus(fmt.Sprintf("the API server is away; going on as soon as it answers: %v", err))
					a.log.Warn("the API server is away; asking every second whether it is back", "err", err)
				}
				away = true
				probe.Reset(time.Duration((0.5 + rand.Float64()) * float64(probeEvery)))
			case away:
				a.log.Info("the API server is back; reading the cluster anew")
				err := a.startInformers(ctx, true)
				switch {
				case errors.Is(err, errAwayAgain):
					a.log.Warn("the API server went away again; asking every second whether it is back", "err", err)
					probe.Reset(time.Duration((0.5 + rand.Float64()) * float64(probeEvery)))
				case errors.Is(err, errRefused):
					// Its authorizer is not ready yet: read again soon,
					// sooner than the informers' backoff would.
					refused++
					wait := min(probeEvery<<min(refused-1, 3), 8*probeEvery)
					a.log.Info("the API server refused a list; reading the cluster again", "in", wait)
					probe.Reset(wait)
				default:
					return err
				}
			}
		}
	}
}

// probeTimeout bounds one /readyz: an address that drops packets must not
// hold a probe for the 30 s of a TCP dial.
const probeTimeout = 3 * time.Second

// readyz asks the API server whether it is ready, within probeTimeout. A
// server that turns the probe away (429) is there, only busy: taking it
// for away would read the whole cluster again when it answers, adding to
// the load that made it busy.
func (a *Agent) readyz(ctx context.Context) error {
	probe, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := a.kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(probe).Error()
	if apierrors.IsTooManyRequests(err) {
		return nil
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
