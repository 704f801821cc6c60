package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/logging"
	"github.com/kustodian/kustodian/internal/status"
)

// informerOf is an informer of one kind of object, listed and watched with
// list and watch (tweak narrows both), never resynced: client-go's
// informer factory would link every kind's informer for these four. The
// client tells the reflector whether it may stream the initial list (a
// fake clientset cannot).
func informerOf(client any, obj runtime.Object, tweak func(*metav1.ListOptions), list func(metav1.ListOptions) (runtime.Object, error),
	watchFn func(metav1.ListOptions) (watch.Interface, error)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return list(o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return watchFn(o)
		},
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, 0, cache.Indexers{})
}

// watchStatus prints the status once, then every change, driven by watches
// of the Leases, the Nodes, the control ConfigMap and Kured's DaemonSet
// (never by polling). On a terminal a table is redrawn; elsewhere each
// change is one line; -o json prints one object per line, -o yaml one
// document per change.
func watchStatus(ctx context.Context, r status.Reader, w io.Writer, out *output, progress bool,
	print func(io.Writer, status.MaintenanceStatus) error, rows func(status.MaintenanceStatus) []status.Node) error {
	current, changed, err := followStatus(ctx, r)
	if err != nil || current == nil {
		return err
	}
	return printChanges(ctx, w, out, progress, current, changed, print, rows)
}

// followStatus follows the status of r's namespace with watches of the
// Leases, the Nodes, the control ConfigMap and Kured's DaemonSet: current
// makes the status from their caches; changed is poked at every change.
// current is nil when ctx ended before the caches were filled.
func followStatus(ctx context.Context, r status.Reader) (current func() status.MaintenanceStatus, changes <-chan struct{}, err error) {
	first, err := r.Inputs(ctx) // the namespace exists, the credentials work
	if err != nil {
		return nil, nil, err
	}
	changed := make(chan struct{}, 1)
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(changed) },
		UpdateFunc: func(any, any) { notify(changed) },
		DeleteFunc: func(any) { notify(changed) },
	}
	byName := func(name string) func(*metav1.ListOptions) {
		return func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}
	}
	leases := r.Client.CoordinationV1().Leases(r.Namespace)
	leaseInf := informerOf(r.Client, &coordv1.Lease{}, nil,
		func(o metav1.ListOptions) (runtime.Object, error) { return leases.List(ctx, o) },
		func(o metav1.ListOptions) (watch.Interface, error) { return leases.Watch(ctx, o) })
	cms := r.Client.CoreV1().ConfigMaps(r.Namespace)
	controlInf := informerOf(r.Client, &corev1.ConfigMap{}, byName(lock.ControlConfigMap),
		func(o metav1.ListOptions) (runtime.Object, error) { return cms.List(ctx, o) },
		func(o metav1.ListOptions) (watch.Interface, error) { return cms.Watch(ctx, o) })
	nodes := r.Client.CoreV1().Nodes()
	nodeInf := informerOf(r.Client, &corev1.Node{}, nil,
		func(o metav1.ListOptions) (runtime.Object, error) { return nodes.List(ctx, o) },
		func(o metav1.ListOptions) (watch.Interface, error) { return nodes.Watch(ctx, o) })
	infs := []cache.SharedIndexInformer{leaseInf, controlInf, nodeInf}
	var kuredInf cache.SharedIndexInformer
	if first.Kured != nil { // installed and readable
		ns, name := r.Kured()
		dss := r.Client.AppsV1().DaemonSets(ns)
		kuredInf = informerOf(r.Client, &appsv1.DaemonSet{}, byName(name),
			func(o metav1.ListOptions) (runtime.Object, error) { return dss.List(ctx, o) },
			func(o metav1.ListOptions) (watch.Interface, error) { return dss.Watch(ctx, o) })
		infs = append(infs, kuredInf)
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(poke); err != nil {
			return nil, nil, err
		}
		go inf.Run(ctx.Done())
	}
	synced := make([]cache.InformerSynced, len(infs))
	for i, inf := range infs {
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, nil, nil // interrupted
	}

	current = func() status.MaintenanceStatus {
		// The policies as they were at the start: they change rarely, and
		// only the predicted ETAs read them.
		in := status.Inputs{Namespace: r.Namespace, Now: time.Now(), StaleAfter: first.StaleAfter, Policies: first.Policies, PoliciesErr: first.PoliciesErr}
		for _, obj := range leaseInf.GetStore().List() {
			in.Leases = append(in.Leases, *obj.(*coordv1.Lease))
		}
		for _, obj := range nodeInf.GetStore().List() {
			in.Nodes = append(in.Nodes, *obj.(*corev1.Node))
		}
		if objs := controlInf.GetStore().List(); len(objs) > 0 {
			in.Control = objs[0].(*corev1.ConfigMap)
		}
		if kuredInf != nil {
			if objs := kuredInf.GetStore().List(); len(objs) > 0 {
				in.Kured = objs[0].(*appsv1.DaemonSet)
			}
		}
		return status.Build(in)
	}
	return current, changed, nil
}

// printChanges prints the status, then what changes at each change.
func printChanges(ctx context.Context, w io.Writer, out *output, progress bool, current func() status.MaintenanceStatus, changed <-chan struct{},
	print func(io.Writer, status.MaintenanceStatus) error, rows func(status.MaintenanceStatus) []status.Node) error {
	if out.Format == outputJSON {
		// One object per line, each printed as without --watch (the same
		// schema, the same selection), made compact.
		indented := print
		print = func(w io.Writer, s status.MaintenanceStatus) error {
			var b, line bytes.Buffer
			if err := indented(&b, s); err != nil {
				return err
			}
			if err := json.Compact(&line, b.Bytes()); err != nil {
				return err
			}
			line.WriteByte('\n')
			_, err := w.Write(line.Bytes())
			return err
		}
	}
	redraw := out.Table() && logging.IsTerminal(w)
	s := current()
	if redraw {
		fmt.Fprint(w, "\033[H\033[2J")
	}
	if err := print(w, s); err != nil {
		return err
	}
	progress = progress && out.Table()
	since := rolloutStart(s)
	if progress {
		fmt.Fprintln(w, fleetProgress(s, since, redraw))
	}
	prev := s
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		s := current()
		switch {
		case out.Format == outputYAML:
			fmt.Fprintln(w, "---")
			if err := print(w, s); err != nil {
				return err
			}
		case redraw:
			fmt.Fprint(w, "\033[H\033[2J")
			if err := print(w, s); err != nil {
				return err
			}
			if progress {
				fmt.Fprintln(w, fleetProgress(s, since, true))
			}
		case !out.Table(): // json (one line), jsonpath, custom-columns, ...
			if err := print(w, s); err != nil {
				return err
			}
		default:
			lines := changes(prev, s, rows)
			for _, line := range lines {
				fmt.Fprintln(w, line)
			}
			if progress && len(lines) > 0 {
				fmt.Fprintln(w, fleetProgress(s, since, false))
			}
		}
		prev = s
	}
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// changes are the lines that tell what changed between two statuses: lock
// holders, pause, Kured, and each row whose state, queue position or
// message changed.
func changes(prev, cur status.MaintenanceStatus, rows func(status.MaintenanceStatus) []status.Node) []string {
	at := cur.Time.Format("15:04:05")
	var out []string
	holders := func(s status.MaintenanceStatus) map[string]string {
		m := map[string]string{}
		for _, l := range s.Locks {
			m[l.Name] = l.Holder
		}
		return m
	}
	ph, ch := holders(prev), holders(cur)
	for _, l := range cur.Locks {
		if ph[l.Name] != ch[l.Name] {
			if l.Holder == "" {
				out = append(out, fmt.Sprintf("%s  lock %s: free", at, l.Name))
			} else {
				out = append(out, fmt.Sprintf("%s  lock %s: held by %s", at, l.Name, l.Holder))
			}
		}
	}
	if prev.Paused != cur.Paused || prev.PausedReason != cur.PausedReason {
		if cur.Paused {
			out = append(out, fmt.Sprintf("%s  paused: %s", at, orDash(cur.PausedReason)))
		} else {
			out = append(out, fmt.Sprintf("%s  resumed", at))
		}
	}
	kuredHolders := func(s status.MaintenanceStatus) string {
		if s.Kured == nil {
			return ""
		}
		return strings.Join(s.Kured.Holders, ",")
	}
	if k := kuredHolders(cur); k != kuredHolders(prev) {
		out = append(out, fmt.Sprintf("%s  kured lock: %s", at, orDash(k)))
	}
	before := map[string]status.Node{}
	for _, n := range rows(prev) {
		before[n.Name] = n
	}
	seen := map[string]bool{}
	for _, n := range rows(cur) {
		seen[n.Name] = true
		b, ok := before[n.Name]
		if ok && b.State == n.State && b.QueuePosition == n.QueuePosition && b.Message == n.Message {
			continue
		}
		queue := "-"
		if n.QueuePosition > 0 {
			queue = fmt.Sprint(n.QueuePosition)
		}
		out = append(out, fmt.Sprintf("%s  %s  %s  queue %s  %s", at, n.Name, n.State, queue, orDash(n.Message)))
	}
	for name := range before {
		if !seen[name] {
			out = append(out, fmt.Sprintf("%s  %s  Idle", at, name))
		}
	}
	return out
}
