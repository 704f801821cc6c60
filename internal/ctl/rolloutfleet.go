package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kustodian/kustodian/internal/fleet"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
)

// A fleet rollout: one signed MaintenanceRollout submitted to a Fleet's
// clusters ring by ring (fleet.Next decides), driven from the admin's
// seat. Its state is the rollouts in the clusters, each marked with the
// fleet and the ring (fleet.AnnotationFleet, fleet.AnnotationRing): the
// command can be stopped and run again.

// fleetPoll is how often a fleet rollout reads its clusters again.
var fleetPoll = 2 * time.Second

// clusterRollout is what one cluster says of the rollout.
type clusterRollout struct {
	fleet.Cluster
	ring string
	view *rolloutView               // the rollout there, when it exists
	obj  *unstructured.Unstructured // as read
}

// fleetRollout is a fleet rollout as read now.
type fleetRollout struct {
	name     string
	fl       *fleet.Fleet // nil: --context A,B without rings
	want     *rollout.MaintenanceRollout
	clusters []clusterRollout // in the targets' order
	move     fleet.Move
	eta      time.Time
	etaKnown bool
}

// readFleetRollout reads the rollout name in every cluster. want is the
// rollout to submit (nil: none yet; the first cluster that has it gives
// it).
func (o *options) readFleetRollout(ctx context.Context, ts []clusterTarget, fl *fleet.Fleet, name string, want *rollout.MaintenanceRollout) fleetRollout {
	now := time.Now()
	fr := fleetRollout{name: name, fl: fl, want: want}
	rs := eachCluster(ctx, ts, func(ctx context.Context, c *options) (clusterRollout, error) {
		return c.readClusterRollout(ctx, fl, name)
	})
	seen := map[string]fleet.Cluster{}
	for _, r := range rs {
		cr := r.value
		cr.Context, cr.ring = r.context, r.ring
		cr.Err = r.err
		if fr.want == nil && cr.view != nil {
			fr.want = cr.view.r
		}
		fr.clusters = append(fr.clusters, cr)
	}
	for i := range fr.clusters {
		cr := &fr.clusters[i]
		if cr.view != nil && fr.want != nil && cr.Conflict == "" {
			if have, w := rollout.Revision(cr.view.r.Namespace, name, cr.view.r.Spec), rollout.Revision(fr.want.Namespace, name, fr.want.Spec); have != w {
				cr.Conflict = fmt.Sprintf("its maintenancerollout %s is revision %s, not this one's %s (another script, files or reboot setting): delete it there, or choose another name", name, have, w)
			}
		}
		seen[cr.Context] = cr.Cluster
	}
	if fl != nil {
		fr.move = fleet.Next(fl, seen, now)
		fr.eta, fr.etaKnown = fleet.ETA(fl, seen, now)
	}
	return fr
}

// readClusterRollout reads one cluster's rollout name, and predicts how
// long the nodes it has left take there (its plan's predictor).
func (o *options) readClusterRollout(ctx context.Context, fl *fleet.Fleet, name string) (clusterRollout, error) {
	var cr clusterRollout
	dyn, err := o.dynamicClient()
	if err != nil {
		return cr, err
	}
	u, err := dyn.Resource(rollout.GVR).Namespace(o.namespace()).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return cr, nil
	}
	if err != nil {
		return cr, status.Explain(err, "get", "maintenancerollouts", o.namespace())
	}
	cr.Exists, cr.obj = true, u
	if fl != nil && u.GetAnnotations()[fleet.AnnotationFleet] != fl.Metadata.Name {
		by := "by hand"
		if f := u.GetAnnotations()[fleet.AnnotationFleet]; f != "" {
			by = "by fleet " + f
		}
		cr.Conflict = fmt.Sprintf("its maintenancerollout %s was created %s, not by fleet %s: delete it, or choose another name", name, by, fl.Metadata.Name)
		return cr, nil
	}
	r, err := rollout.FromUnstructured(u)
	if err != nil {
		return cr, err
	}
	v, err := o.viewOf(ctx, r)
	if err != nil {
		return cr, err
	}
	cr.view = &v
	cond := func(t string) bool { return meta.IsStatusConditionTrue(v.summary.Conditions, t) }
	cr.Complete, cr.Failed = cond(rollout.ConditionComplete), cond(rollout.ConditionFailed)
	cr.Paused, cr.Aborted = v.r.Spec.Paused, v.r.Spec.Aborted
	cr.Says = progressLine(v) + "; " + status.Printable(conditionLine(v))
	for _, e := range v.r.Status.Nodes {
		if e.Revision == v.summary.Revision && e.Finished != nil && e.Finished.After(cr.CompletedAt) {
			cr.CompletedAt = e.Finished.Time
		}
	}
	if cr.Complete && cr.CompletedAt.IsZero() {
		// No node finished it (none selected): its soak runs from when it
		// was submitted.
		cr.CompletedAt = u.GetCreationTimestamp().Time
	}
	return cr, nil
}

// predict sets how long each cluster's nodes left take: from its plan's
// predictor (each node's history, the queue, the policy's slots and
// windows), plus the soak of each stage left when promotion is auto.
func (o *options) predict(ctx context.Context, ts []clusterTarget, fr *fleetRollout) {
	if fr.want == nil {
		return
	}
	rs := eachCluster(ctx, ts, func(ctx context.Context, c *options) (time.Duration, error) {
		r, err := c.reader()
		if err != nil {
			return 0, err
		}
		in, err := r.Inputs(ctx)
		if err != nil {
			return 0, err
		}
		if in.PoliciesErr != nil {
			return 0, in.PoliciesErr
		}
		var cr *clusterRollout
		for i := range fr.clusters {
			if fr.clusters[i].Context == c.overrides.CurrentContext {
				cr = &fr.clusters[i]
			}
		}
		spec, stage := fr.want.Spec, 0
		var left []string
		if cr != nil && cr.view != nil {
			stage = cr.view.summary.Stage
			for _, row := range cr.view.rows {
				switch row.State {
				case rollout.Succeeded, rollout.Failed, rollout.RolledBack, rollout.Refused, rollout.Cancelled:
				default:
					left = append(left, row.Node)
				}
			}
		} else {
			sel := labels.Everything()
			if spec.NodeSelector != nil {
				if sel, err = metav1.LabelSelectorAsSelector(spec.NodeSelector); err != nil {
					return 0, err
				}
			}
			for _, n := range in.Nodes {
				if sel.Matches(labels.Set(n.Labels)) {
					left = append(left, n.Name)
				}
			}
		}
		fc := status.ForecastOf(in, status.Build(in), left, in.Now)
		takes := max(fc.Schedule.End.Sub(in.Now), 0)
		if spec.Promotion.Mode == rollout.PromotionAuto && spec.Promotion.Soak != nil {
			takes += time.Duration(len(rollout.StagesOf(spec))-1-stage) * spec.Promotion.Soak.Duration
		}
		return takes, nil
	})
	seen := map[string]fleet.Cluster{}
	for i, r := range rs {
		fr.clusters[i].Takes, fr.clusters[i].Unknown = r.value, r.err != nil
		seen[fr.clusters[i].Context] = fr.clusters[i].Cluster
	}
	if fr.fl != nil {
		fr.eta, fr.etaKnown = fleet.ETA(fr.fl, seen, time.Now())
	}
}

// submit creates the rollout in a cluster of ring, marked with the fleet
// and the ring, and records who did it.
func (o *options) submit(ctx context.Context, t clusterTarget, fr fleetRollout) error {
	// The spec as signed, and nothing a cluster's copy gained there: its
	// promotion, a pause or an abort, its metadata.
	spec := fr.want.Spec
	spec.Promoted, spec.Paused, spec.Aborted = 0, false, false
	r := &rollout.MaintenanceRollout{TypeMeta: metav1.TypeMeta{APIVersion: rollout.Group + "/" + rollout.Version, Kind: rollout.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: fr.name, Namespace: t.o.namespace(),
			Annotations: map[string]string{fleet.AnnotationFleet: fr.fl.Metadata.Name, fleet.AnnotationRing: t.ring}},
		Spec: spec}
	u, err := toUnstructured(r)
	if err != nil {
		return err
	}
	dyn, err := t.o.dynamicClient()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	created, err := dyn.Resource(rollout.GVR).Namespace(t.o.namespace()).Create(rctx, u, metav1.CreateOptions{FieldManager: "kustodian-ctl"})
	if apierrors.IsAlreadyExists(err) {
		return nil // the next read judges it
	}
	if err != nil {
		return status.Explain(err, "create", "maintenancerollouts", t.o.namespace())
	}
	t.o.rolloutEvent(rctx, created, "Created", fmt.Sprintf("created by fleet %s in ring %s, revision %s", fr.fl.Metadata.Name, t.ring, rollout.Revision(fr.want.Namespace, fr.want.Name, fr.want.Spec)))
	return nil
}

// driveFleet takes a fleet rollout as far as it goes now: it submits the
// rollout to the clusters whose ring is due, and, with wait, goes on until
// every ring is done (nil), a failure halts it (exit 4) or timeout passes
// (exit 3); submit false only follows it (rollout status --watch). It
// reads the clusters every fleetPoll, every fleetPollSoaking while a soak
// has long to go, and predicts the ETA at most every fleetPredictEvery.
func (o *options) driveFleet(ctx context.Context, ts []clusterTarget, fl *fleet.Fleet, name string, want *rollout.MaintenanceRollout, wait, submit bool) error {
	w := o.streams.Out
	said := map[string]string{}
	say := func(key, line string) {
		if said[key] != line {
			fmt.Fprintf(w, "%s  %s\n", time.Now().Format("15:04:05"), line)
			said[key] = line
		}
	}
	var predicted time.Time
	var takes map[string]fleetTakes
	for {
		fr := o.readFleetRollout(ctx, ts, fl, name, want)
		if ctx.Err() != nil {
			return fleetStopped(ctx, name, submit)
		}
		if fr.want == nil {
			return noRollout(fr)
		}
		want = fr.want
		if !wait {
			var failed []string
			if submit {
				failed = o.submitDue(ctx, ts, fr, say)
				fr = o.readFleetRollout(ctx, ts, fl, name, want)
			}
			o.predict(ctx, ts, &fr)
			printFleetRollout(w, fr, time.Now())
			if len(failed) > 0 {
				return fmt.Errorf("fleet rollout %s: not submitted to %s (said above)", name, strings.Join(failed, ", "))
			}
			if submit && !fr.move.Done && fr.move.Halted == "" {
				fmt.Fprintf(w, "\nRun this again, or with --wait, to go on; kustodian-ctl rollout status %s --fleet %s shows where it stands.\n", name, o.clusters.fleetFile)
			}
			return fleetEnd(fr)
		}
		if time.Since(predicted) >= fleetPredictEvery || unpredicted(takes, fr) {
			o.predict(ctx, ts, &fr)
			takes, predicted = takesOf(fr), time.Now()
		} else {
			fr.setTakes(takes)
		}
		for _, cr := range fr.clusters {
			line := cr.Says
			switch {
			case cr.Err != nil:
				line = notRead(cr.Err)
			case cr.Conflict != "":
				line = cr.Conflict
			case !cr.Exists:
				line = "not submitted yet"
			}
			say("cluster "+cr.Context, fmt.Sprintf("%s  %s", cr.Context, line))
		}
		if fl == nil {
			if allEnded(fr) {
				return nil
			}
		} else {
			for _, p := range fr.move.Passed {
				say("passed "+p, "fleet: "+p)
			}
			say("fleet", "fleet: "+fleetLine(fr, time.Time{}))
			if fr.move.Done || fr.move.Halted != "" {
				return fleetEnd(fr)
			}
		}
		if submit {
			o.submitDue(ctx, ts, fr, say)
		}
		poll := fleetPoll
		if fr.move.SoakEnds.Sub(time.Now()) > 2*fleetPollSoaking {
			poll = fleetPollSoaking
		}
		select {
		case <-ctx.Done():
			return fleetStopped(ctx, name, submit)
		case <-time.After(poll):
		}
	}
}

// fleetPollSoaking is how often a fleet rollout whose soak has long to go
// reads its clusters; fleetPredictEvery, how often it predicts its ETA
// (a read of each cluster's nodes, Leases and policies).
var (
	fleetPollSoaking  = 15 * time.Second
	fleetPredictEvery = 30 * time.Second
)

// fleetTakes is a cluster's prediction, kept between predictions.
type fleetTakes struct {
	takes   time.Duration
	unknown bool
}

func takesOf(fr fleetRollout) map[string]fleetTakes {
	m := map[string]fleetTakes{}
	for _, cr := range fr.clusters {
		m[cr.Context] = fleetTakes{cr.Takes, cr.Unknown}
	}
	return m
}

// unpredicted: a cluster read now had no prediction last time (it could
// not be read then).
func unpredicted(m map[string]fleetTakes, fr fleetRollout) bool {
	for _, cr := range fr.clusters {
		if cr.Err == nil && m[cr.Context].unknown {
			return true
		}
	}
	return false
}

// setTakes puts the last predictions back, and the ETA from them.
func (fr *fleetRollout) setTakes(m map[string]fleetTakes) {
	seen := map[string]fleet.Cluster{}
	for i := range fr.clusters {
		cr := &fr.clusters[i]
		cr.Takes, cr.Unknown = m[cr.Context].takes, m[cr.Context].unknown
		seen[cr.Context] = cr.Cluster
	}
	if fr.fl != nil {
		fr.eta, fr.etaKnown = fleet.ETA(fr.fl, seen, time.Now())
	}
}

// noRollout says that no cluster read has the rollout.
func noRollout(fr fleetRollout) error {
	var unread []string
	for _, cr := range fr.clusters {
		if cr.Err != nil {
			unread = append(unread, "cluster "+cr.Context+": "+notRead(cr.Err))
		}
	}
	if len(unread) > 0 {
		return fmt.Errorf("maintenancerollout %s is in none of the clusters read, and %s", fr.name, strings.Join(unread, "; "))
	}
	return fmt.Errorf("maintenancerollout %s is in none of the clusters: create it with --script or --patch, and --key", fr.name)
}

// submitDue submits the rollout to the clusters fleet.Next says are due,
// and returns those it could not submit to.
func (o *options) submitDue(ctx context.Context, ts []clusterTarget, fr fleetRollout, say func(key, line string)) (failed []string) {
	for _, c := range fr.move.Create {
		for _, t := range ts {
			if t.context != c {
				continue
			}
			if err := o.submit(ctx, t, fr); err != nil {
				say("submit "+c, fmt.Sprintf("ring %s: cannot submit to %s: %s", t.ring, c, oneLine(err)))
				failed = append(failed, c)
				continue
			}
			say("submit "+c, fmt.Sprintf("ring %s: submitted to %s", t.ring, c))
		}
	}
	return failed
}

// fleetEnd is the command's result for where the rollout stands: halted
// (exit 4), else nil.
func fleetEnd(fr fleetRollout) error {
	if fr.move.Halted != "" {
		return &exitError{code: ExitFailed, msg: fmt.Sprintf("fleet rollout %s halted at ring %s: %s; the rings after it are not started", fr.name, fr.fl.Rings[fr.move.Ring].Name, fr.move.Halted)}
	}
	return nil
}

// fleetStopped is why a waiting fleet rollout stopped: --timeout (exit
// 3) or an interruption (following one only, as rollout status --watch
// does: no error).
func fleetStopped(ctx context.Context, name string, submitting bool) error {
	if !submitting && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &exitError{code: ExitTimeout, msg: fmt.Sprintf("timed out waiting for fleet rollout %s; it goes on in the clusters submitted, and running this again goes on with the rings", name)}
	}
	return fmt.Errorf("fleet rollout %s: interrupted; it goes on in the clusters submitted, and running this again goes on with the rings", name)
}

// allEnded: every cluster was read and its rollout is Complete or Failed
// (the end of rollout status --watch over clusters without rings).
func allEnded(fr fleetRollout) bool {
	for _, cr := range fr.clusters {
		if cr.Err != nil || !(cr.Complete || cr.Failed) {
			return false
		}
	}
	return true
}
