package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
)

func newRolloutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Create, sign, follow and steer MaintenanceRollouts: signed scripts that every selected node runs once, in stages",
		Long: `A MaintenanceRollout is a script that each node it selects runs once, as a
maintenance of its own: through its queue, its policy and its drain. It spreads in
stages (one node first, then more, as an admin promotes it or by itself after a
soak), reaches nodes that join later, and stops at the first failure, keeping that
node cordoned after running the rollback script. A host runs a rollout only if its
configuration enables rollouts (rollouts.enabled) and trusts the key that signed it
(rollouts.trustedKeys).`,
		Example: `  kustodian-ctl rollout create fix-ntp --script fix-ntp.sh --rollback undo-ntp.sh --key ~/.ssh/id_ed25519
  kustodian-ctl rollout status fix-ntp
  kustodian-ctl rollout promote fix-ntp
  # signing with ssh-keygen (a hardware key, say):
  kustodian-ctl rollout create fix-ntp --script fix-ntp.sh --dry-run=client -o yaml > fix-ntp.yaml
  kustodian-ctl rollout manifest -f fix-ntp.yaml | ssh-keygen -Y sign -f ~/.ssh/id_ed25519_sk -n kustodian-rollout - > fix-ntp.sig
  kustodian-ctl rollout sign -f fix-ntp.yaml --signature fix-ntp.sig | kubectl apply -f -`,
	}
	cmd.AddCommand(newRolloutCreateCommand(o), newRolloutSignCommand(o), newRolloutManifestCommand(o), newRolloutStatusCommand(o), newRolloutReportCommand(o),
		newRolloutPromoteCommand(o),
		newRolloutSetCommand(o, "pause", "Stop a rollout: no node starts it (queued nodes withdraw, running ones finish)", "paused", true),
		newRolloutSetCommand(o, "resume", "Let a paused rollout go on", "paused", false),
		newRolloutSetCommand(o, "abort", "End a rollout for good: no node starts it any more (queued nodes withdraw)", "aborted", true))
	return cmd
}

func newRolloutCreateCommand(o *options) *cobra.Command {
	f := &rolloutFlags{}
	var out *output
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME (--script FILE | --patch all|security) (--key KEY | --signature SIG)",
		Short: "Create a signed MaintenanceRollout from a script (and a rollback script and files), or a patch campaign",
		Long: `create builds a MaintenanceRollout with the scripts and files inline, signs it
(--key, or --signature made by ssh-keygen over kustodian-ctl rollout manifest) and
creates it. With --dry-run=client it only prints it (-o yaml): the way to sign it
elsewhere. Stages (--stage, repeated, in order): N nodes, N% of the selected
nodes, a label selector, or all; default: 1, then all.

With --patch instead of --script it is a patch campaign: each node installs the
package updates its host's own repositories offer (all, or only security ones),
narrowed by --include and --exclude (shell patterns of package names), with its
own package manager (apt or dnf), drained, under its lock; it reboots only if the host
then needs it (--reboot ifRequired, the default, or never). The first node
resolves the versions; every later node installs exactly those. kustodian patch
plan, on a host, shows what a campaign would install there.

With --fleet FILE it is submitted to the Fleet file's clusters ring by ring: a
ring once every cluster of the ring before is Complete and that ring's soak has
passed; a Failed condition or an abort anywhere halts the rings not started.
Without --wait it submits what is due and says where the fleet stands (run it
again to go on: without --script and --key, the copy the clusters have is
submitted); with --wait it goes on until every ring is done (exit 0), it halts
(exit 4) or --timeout passes (exit 3).`,
		Example: `  kustodian-ctl rollout create fix-ntp --script fix-ntp.sh --rollback undo.sh --key ~/.ssh/id_ed25519
  kustodian-ctl rollout create kernel --script upgrade.sh --reboot auto -l pool=workers \
      --stage 1 --stage 10% --stage all --promotion auto --soak 30m --key ~/.ssh/id_ed25519
  kustodian-ctl rollout create cve-2026-1234 --patch security --exclude 'kube*' --exclude 'containerd*' \
      --stage 1 --stage 25% --stage all --promotion auto --soak 1h --key ~/.ssh/id_ed25519
  kustodian-ctl rollout create kernel --fleet europe.yaml --script upgrade.sh --key ~/.ssh/id_ed25519 --wait`,
		Args: oneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if timeout != 0 && !wait {
				return errors.New("--timeout bounds --wait: give both, or neither")
			}
			if o.multi() {
				return o.createFleetRollout(cmd, args[0], f, wait, timeout)
			}
			if wait {
				return errors.New("--wait follows a fleet rollout: give --fleet FILE (kustodian-ctl rollout status NAME --watch follows one cluster's rollout)")
			}
			if f.script == "" && f.patch == "" {
				return errors.New("--script or --patch is required: the script every selected node runs, or the updates it installs")
			}
			r, err := f.build(o.namespace(), args[0])
			if err != nil {
				return err
			}
			if err := f.sign(r); err != nil {
				return err
			}
			if r.Spec.Signature == "" && o.dryRun != dryRunClient {
				return errors.New("the rollout is not signed, and hosts run only signed rollouts: give --key or --signature (or --dry-run=client -o yaml to sign it elsewhere)")
			}
			u, err := toUnstructured(r)
			if err != nil {
				return err
			}
			if o.dryRun != dryRunClient {
				dyn, err := o.dynamicClient()
				if err != nil {
					return err
				}
				created, err := dyn.Resource(rollout.GVR).Namespace(o.namespace()).Create(cmd.Context(), u, metav1.CreateOptions{FieldManager: "kustodian-ctl"})
				if apierrors.IsAlreadyExists(err) {
					return o.rolloutExists(cmd.Context(), r)
				}
				if err != nil {
					return status.Explain(err, "create", "maintenancerollouts", o.namespace())
				}
				u = created
				o.rolloutEvent(cmd.Context(), u, "Created", "created, revision "+rollout.Revision(r.Namespace, r.Name, r.Spec))
			}
			if !out.Table() {
				return out.Print(o.streams.Out, u, []string{"maintenancerollout.kustodian.io/" + r.Name})
			}
			fmt.Fprintf(o.streams.Out, "maintenancerollout.kustodian.io/%s created, revision %s%s; kustodian-ctl rollout status %s follows it\n",
				r.Name, rollout.Revision(r.Namespace, r.Name, r.Spec), o.dryRun.suffix(), r.Name)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.script, "script", "", "the script every selected node runs as root (by its #! line, else with /bin/sh)")
	fl.StringVar(&f.rollback, "rollback", "", "the script a node whose script failed runs before it is held")
	fl.StringArrayVar(&f.files, "file", nil, "a file put beside the script: NAME=PATH, or PATH (named by its base name); repeatable")
	fl.StringVarP(&f.selector, "selector", "l", "", "the nodes it is for (a label selector); default: every node")
	fl.StringArrayVar(&f.stages, "stage", nil, "a stage: N (nodes), N% (of the selected nodes), all, or a label selector; repeatable, in order (default: 1, all)")
	fl.StringVar(&f.promotion, "promotion", "", "manual (the default: kustodian-ctl rollout promote) or auto (after a stage succeeded and --soak passed)")
	fl.DurationVar(&f.soak, "soak", 0, "with --promotion auto, how long a stage must stay good before the next opens")
	fl.StringVar(&f.onFailure, "on-failure", "", "stop (the default: hold the node, stop the rollout) or retry")
	fl.IntVar(&f.retries, "retries", 0, "with --on-failure retry, how many times a node runs the script again")
	fl.DurationVar(&f.backoff, "backoff", 0, "with --on-failure retry, the wait before the first retry, doubling (default 1m)")
	fl.StringVar(&f.reboot, "reboot", rollout.RebootAuto, "auto: reboot when the script leaves the reboot sentinel and run it again after the boot (as kustodian run); never: do not. With --patch: ifRequired (the default) or never")
	fl.StringVar(&f.patch, "patch", "", "a patch campaign instead of a script: all (every update the hosts' repositories offer) or security (their security updates)")
	fl.StringArrayVar(&f.include, "include", nil, "with --patch, only the packages matching this shell pattern; repeatable")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "with --patch, none of the packages matching this shell pattern (kube*, containerd*); repeatable")
	fl.StringVar(&f.deadline, "deadline", "", "when every selected node should be done: a time (RFC 3339) or a duration from now; the rollout starts one node at a time and goes faster only as the deadline, in the policy's windows, needs (never above --max-concurrency nor the policy's concurrency)")
	fl.IntVar(&f.maxConcurrency, "max-concurrency", 0, "at most this many of the rollout's nodes in it at once (the policy's slots still pace them)")
	fl.BoolVar(&f.newNodes, "new-nodes", true, "nodes created later run it too once they match")
	f.signing.add(cmd)
	fl.BoolVar(&wait, "wait", false, "with --fleet, go on ring by ring until every ring is done (exit 0), a failure halts it (exit 4) or --timeout passes (exit 3)")
	fl.DurationVar(&timeout, "timeout", 0, "with --fleet --wait, give up waiting after this long (exit 3; the rollout goes on where it was submitted); 0: never")
	addDryRun(cmd, o, "print the rollout (-o yaml), create nothing: to sign it elsewhere")
	out = addOutputOf(cmd, object, false)
	return manyClusters(cmd)
}

// rolloutExists answers a create whose rollout exists: the same revision
// (a re-run) is no change; another is refused.
func (o *options) rolloutExists(ctx context.Context, r *rollout.MaintenanceRollout) error {
	have, _, err := o.getRollout(ctx, r.Name)
	if err != nil {
		return err
	}
	want, got := rollout.Revision(r.Namespace, r.Name, r.Spec), rollout.Revision(have.Namespace, have.Name, have.Spec)
	if want != got {
		return fmt.Errorf("maintenancerollout %s exists with revision %s (another script, files or reboot setting than this one, %s): choose another name, or delete it first (kubectl -n %s delete maintenancerollout %s)",
			r.Name, got, want, r.Namespace, r.Name)
	}
	fmt.Fprintf(o.streams.Out, "maintenancerollout.kustodian.io/%s unchanged, revision %s\n", r.Name, got)
	return nil
}

func toUnstructured(r *rollout.MaintenanceRollout) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// getRollout reads a rollout of the namespace.
func (o *options) getRollout(ctx context.Context, name string) (*rollout.MaintenanceRollout, *unstructured.Unstructured, error) {
	dyn, err := o.dynamicClient()
	if err != nil {
		return nil, nil, err
	}
	return getRolloutWith(ctx, dyn, o.namespace(), name)
}

// rolloutNotFound: the namespace has no rollout of the name.
type rolloutNotFound struct{ msg string }

func (e *rolloutNotFound) Error() string { return e.msg }

func getRolloutWith(ctx context.Context, dyn dynamic.Interface, ns, name string) (*rollout.MaintenanceRollout, *unstructured.Unstructured, error) {
	u, err := dyn.Resource(rollout.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, &rolloutNotFound{fmt.Sprintf("maintenancerollout %q not found in namespace %s (kubectl get maintenancerollouts -n %s lists them)", name, ns, ns)}
	}
	if err != nil {
		return nil, nil, status.Explain(err, "get", "maintenancerollouts", ns)
	}
	r, err := rollout.FromUnstructured(u)
	return r, u, err
}

func newRolloutPromoteCommand(o *options) *cobra.Command {
	var to int
	cmd := &cobra.Command{
		Use:   "promote NAME [--to STAGE]",
		Short: "Open a rollout's next stage (or stage --to)",
		Args:  oneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.eachRollout(cmd.Context(), args[0], func(o *options) error { return o.promote(cmd, args[0], to) })
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "the stage to open (1 is the first); default: the next")
	addDryRun(cmd, o, "check, change nothing")
	return manyClusters(cmd)
}

// promote opens the next stage of rollout name (or stage to, when --to
// is given).
func (o *options) promote(cmd *cobra.Command, name string, to int) error {
	r, u, err := o.getRollout(cmd.Context(), name)
	if err != nil {
		return err
	}
	// The stage open now, made again from the entries as the agents
	// make it (status.stage is any node's to write), with no soak
	// taken as passed on the finish times the nodes wrote: promote
	// opens the stage after the one soaking, never one beyond.
	v, err := o.readRolloutView(cmd.Context(), name)
	if err != nil {
		return err
	}
	stages := rollout.StagesOf(r.Spec)
	// next indexes the stages from 0, as spec.promoted does;
	// --to and every message count them from 1.
	next, err := promoteTo(r.Name, len(stages), max(r.Spec.Promoted, v.open), v.summary.Stage, to, cmd.Flags().Changed("to"))
	if err != nil {
		return err
	}
	if !cmd.Flags().Changed("to") && v.summary.Stage >= next {
		// The agents time their soaks themselves: on the finish
		// times, some may have opened stage next already.
		after := ""
		if next+1 < len(stages) {
			after = fmt.Sprintf(" (--to %d opens the one after)", next+2)
		}
		fmt.Fprintf(o.streams.ErrOut, "note: by the nodes' finish times %s may be open already on the nodes whose soak ended; this opens it on every node%s\n", rollout.Numbered(next), after)
	}
	if next <= r.Spec.Promoted {
		fmt.Fprintf(o.streams.Out, "maintenancerollout.kustodian.io/%s: %s is open already\n", r.Name, rollout.Numbered(next))
		return nil
	}
	if err := o.patchRolloutSpec(cmd.Context(), u, map[string]any{"promoted": next}); err != nil {
		return err
	}
	if o.dryRun == dryRunNone {
		o.rolloutEvent(cmd.Context(), u, "Promoted", "promoted to "+rollout.Numbered(next))
	}
	fmt.Fprintf(o.streams.Out, "maintenancerollout.kustodian.io/%s promoted to %s%s\n", r.Name, rollout.Numbered(next), o.dryRun.suffix())
	return nil
}

// promoteTo is the stage promote opens, indexed from 0: the one after
// open (the last stage an admin opened or the reader is sure of), or, with
// --to (set), stage to as people count them, from 1. at is the stage the
// summary says is open, for the message.
func promoteTo(name string, stages, open, at, to int, set bool) (int, error) {
	if set {
		if to < 1 || to > stages {
			return 0, fmt.Errorf("--to %d: rollout %s has stages 1 to %d (it is at %s)", to, name, stages, rollout.Numbered(at))
		}
		return to - 1, nil
	}
	if open+1 >= stages {
		return 0, fmt.Errorf("rollout %s is at its last stage (%s of %d); there is no next stage to open", name, rollout.Numbered(stages-1), stages)
	}
	return open + 1, nil
}

func newRolloutSetCommand(o *options, verb, short, field string, value bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  oneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.eachRollout(cmd.Context(), args[0], func(o *options) error {
				_, u, err := o.getRollout(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if err := o.patchRolloutSpec(cmd.Context(), u, map[string]any{field: value}); err != nil {
					return err
				}
				past := map[string]string{"pause": "paused", "resume": "resumed", "abort": "aborted"}[verb]
				if o.dryRun == dryRunNone {
					o.rolloutEvent(cmd.Context(), u, strings.ToUpper(past[:1])+past[1:], past)
				}
				fmt.Fprintf(o.streams.Out, "maintenancerollout.kustodian.io/%s %s%s\n", args[0], past, o.dryRun.suffix())
				return nil
			})
		},
	}
	addDryRun(cmd, o, "check, change nothing")
	return manyClusters(cmd)
}

// patchRolloutSpec sets fields of a rollout's spec, and no other: the
// agents' status writes meanwhile are no conflict.
func (o *options) patchRolloutSpec(ctx context.Context, u *unstructured.Unstructured, fields map[string]any) error {
	if o.dryRun == dryRunClient {
		return nil
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"spec": fields})
	if err != nil {
		return err
	}
	_, err = dyn.Resource(rollout.GVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kustodian-ctl"})
	if err != nil {
		return status.Explain(err, "patch", "maintenancerollouts", u.GetNamespace())
	}
	return nil
}

// rolloutEvent records who did what to a rollout, as an Event on it: the
// audit trail `kubectl describe maintenancerollout` shows. A failure to
// write it is said, not fatal.
func (o *options) rolloutEvent(ctx context.Context, u *unstructured.Unstructured, reason, what string) {
	client, err := o.client()
	if err == nil {
		err = writeRolloutEvent(ctx, client, u, reason, what)
	}
	if err != nil {
		fmt.Fprintf(o.streams.ErrOut, "warning: the Event recording this could not be written: %v\n", err)
	}
}

func writeRolloutEvent(ctx context.Context, client kubernetes.Interface, u *unstructured.Unstructured, reason, what string) error {
	who := "someone"
	if rev, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil {
		who = rev.Status.UserInfo.Username
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: u.GetName() + ".", Namespace: u.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{Kind: rollout.Kind, APIVersion: rollout.Group + "/" + rollout.Version,
			Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()},
		Reason: reason, Message: what + " by " + who, Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "kustodian-ctl"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "kustodian-ctl", ReportingInstance: who,
	}
	_, err := client.CoreV1().Events(u.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
