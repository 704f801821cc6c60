// Package simapi is an in-memory model of the parts of the Kubernetes API
// server that Kustodian's agents use, for the protocol's seeded simulation.
// It keeps the semantics the protocol relies on, and nothing more:
//   - one resourceVersion counter for every object, as etcd's revision: an
//     update carrying an older resourceVersion is a 409 Conflict, a create of
//     an existing name 409 AlreadyExists, and a LIST answers with the
//     revision it was read at;
//   - a log of every change, from which watches are delivered in order, late
//     or after a relist; the log is compacted, and a watch that resumes from
//     before the compaction gets 410 Gone and must relist;
//   - an outage: while the control plane is down every request fails;
//   - the garbage collector's one rule that matters here: a Lease owned by a
//     Node goes with it.
//
// It is driven from a single goroutine: the simulation calls the agents one
// at a time, and every answer depends only on the calls before it.
package simapi

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The resources the model serves.
var (
	Leases     = coordv1.SchemeGroupVersion.WithResource("leases")
	Nodes      = corev1.SchemeGroupVersion.WithResource("nodes")
	ConfigMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
	Pods       = corev1.SchemeGroupVersion.WithResource("pods")
	Events     = corev1.SchemeGroupVersion.WithResource("events")
)

// Key names a stored object.
type Key struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

// Change is one entry of the change log: what a watch delivers.
type Change struct {
	Type   watch.EventType
	RV     int64
	Key    Key
	Object runtime.Object // as it was after the change (before it, for a deletion)
}

// Server is the model. Its zero value is not ready: use New.
type Server struct {
	rv      int64
	objects map[Key]runtime.Object
	changes []Change
	// compacted: changes at or below this revision are gone from the log.
	compacted int64
	// KeepChanges bounds the log (etcd's compaction): older entries go, and
	// watches behind them get 410 Gone.
	KeepChanges int
	// Down: the control plane is away; every request fails.
	Down bool
	// Conflicts counts the writes refused with 409 (a stale
	// resourceVersion or UID, a name taken).
	Conflicts int
	uids      int
}

// New makes an empty server.
func New() *Server {
	return &Server{rv: 1, objects: map[Key]runtime.Object{}, KeepChanges: 500}
}

// RV is the current revision.
func (s *Server) RV() int64 { return s.rv }

// Compacted: the log no longer holds the changes after rv (a watch there
// must relist).
func (s *Server) Compacted(rv int64) bool { return rv < s.compacted }

// ErrDown is what every request gets while the control plane is away.
func ErrDown() error {
	return apierrors.NewServiceUnavailable("the control plane is down (simulated outage)")
}

// Get returns a copy of the stored object, or NotFound.
func (s *Server) Get(k Key) (runtime.Object, error) {
	o, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(k.Resource.GroupResource(), k.Name)
	}
	return o.DeepCopyObject(), nil
}

// List returns copies of the objects of a resource in namespace ns ("" for
// all) that sel and match select, sorted by name, and the revision read.
func (s *Server) List(res schema.GroupVersionResource, ns string, sel labels.Selector, match func(runtime.Object) bool) ([]runtime.Object, int64) {
	var keys []Key
	for k := range s.objects {
		if k.Resource == res && (ns == "" || k.Namespace == ns) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Namespace != keys[j].Namespace {
			return keys[i].Namespace < keys[j].Namespace
		}
		return keys[i].Name < keys[j].Name
	})
	var out []runtime.Object
	for _, k := range keys {
		o := s.objects[k]
		m, _ := meta.Accessor(o)
		if sel != nil && !sel.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		if match != nil && !match(o) {
			continue
		}
		out = append(out, o.DeepCopyObject())
	}
	return out, s.rv
}

func (s *Server) bump() int64 {
	s.rv++
	return s.rv
}

func (s *Server) record(t watch.EventType, k Key, o runtime.Object) {
	s.changes = append(s.changes, Change{Type: t, RV: s.rv, Key: k, Object: o.DeepCopyObject()})
	if n := len(s.changes) - s.KeepChanges; s.KeepChanges > 0 && n > 0 {
		s.compacted = s.changes[n-1].RV
		s.changes = append([]Change(nil), s.changes[n:]...)
	}
}

// ChangesSince returns the changes after revision rv, in order; ok is false
// when the log no longer reaches back to rv (410 Gone: relist).
func (s *Server) ChangesSince(rv int64) ([]Change, bool) {
	if s.Compacted(rv) {
		return nil, false
	}
	i := sort.Search(len(s.changes), func(i int) bool { return s.changes[i].RV > rv })
	return s.changes[i:], true
}

// Create stores a new object; AlreadyExists if the name is taken.
func (s *Server) Create(k Key, o runtime.Object) (runtime.Object, error) {
	if _, ok := s.objects[k]; ok {
		s.Conflicts++
		return nil, apierrors.NewAlreadyExists(k.Resource.GroupResource(), k.Name)
	}
	o = o.DeepCopyObject()
	m, err := meta.Accessor(o)
	if err != nil {
		return nil, err
	}
	if m.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	m.SetName(k.Name)
	m.SetNamespace(k.Namespace)
	s.uids++
	m.SetUID(types.UID(fmt.Sprintf("uid-%d", s.uids)))
	m.SetResourceVersion(strconv.FormatInt(s.bump(), 10))
	m.SetCreationTimestamp(metav1.Unix(s.rv, 0))
	s.objects[k] = o
	s.record(watch.Added, k, o)
	return o.DeepCopyObject(), nil
}

// Update replaces a stored object. An object carrying a resourceVersion
// other than the stored one is a conflict; one carrying none is written
// unconditionally (as the API server does for Leases and Nodes).
func (s *Server) Update(k Key, o runtime.Object) (runtime.Object, error) {
	old, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(k.Resource.GroupResource(), k.Name)
	}
	o = o.DeepCopyObject()
	m, err := meta.Accessor(o)
	if err != nil {
		return nil, err
	}
	om, _ := meta.Accessor(old)
	if rv := m.GetResourceVersion(); rv != "" && rv != om.GetResourceVersion() {
		s.Conflicts++
		return nil, apierrors.NewConflict(k.Resource.GroupResource(), k.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if m.GetUID() != "" && m.GetUID() != om.GetUID() {
		s.Conflicts++
		return nil, apierrors.NewConflict(k.Resource.GroupResource(), k.Name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", m.GetUID(), om.GetUID()))
	}
	m.SetUID(om.GetUID())
	m.SetCreationTimestamp(om.GetCreationTimestamp())
	m.SetName(k.Name)
	m.SetNamespace(k.Namespace)
	if sameContent(old, o) {
		// The API server writes nothing and keeps the version.
		m.SetResourceVersion(om.GetResourceVersion())
		return o, nil
	}
	m.SetResourceVersion(strconv.FormatInt(s.bump(), 10))
	s.objects[k] = o
	s.record(watch.Modified, k, o)
	return o.DeepCopyObject(), nil
}

func sameContent(a, b runtime.Object) bool {
	strip := func(o runtime.Object) []byte {
		c := o.DeepCopyObject()
		m, _ := meta.Accessor(c)
		m.SetResourceVersion("")
		bs, _ := json.Marshal(c)
		return bs
	}
	return string(strip(a)) == string(strip(b))
}

// Delete removes an object; a Node takes the Leases it owns with it.
func (s *Server) Delete(k Key) error {
	o, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(k.Resource.GroupResource(), k.Name)
	}
	delete(s.objects, k)
	s.bump()
	s.record(watch.Deleted, k, o)
	if k.Resource == Nodes {
		m, _ := meta.Accessor(o)
		s.collect(m.GetUID())
	}
	return nil
}

// collect is the garbage collector: what a deleted Node owned goes.
func (s *Server) collect(uid types.UID) {
	var owned []Key
	for k, o := range s.objects {
		m, _ := meta.Accessor(o)
		for _, r := range m.GetOwnerReferences() {
			if r.Kind == "Node" && r.UID == uid {
				owned = append(owned, k)
			}
		}
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Name < owned[j].Name })
	for _, k := range owned {
		_ = s.Delete(k)
	}
}

// Put creates or replaces an object whatever its version: the simulation's
// own hand (an admin, a policy applied).
func (s *Server) Put(k Key, o runtime.Object) runtime.Object {
	o = o.DeepCopyObject()
	m, _ := meta.Accessor(o)
	m.SetResourceVersion("")
	if _, ok := s.objects[k]; !ok {
		out, _ := s.Create(k, o)
		return out
	}
	out, _ := s.Update(k, o)
	return out
}

// Unstructured is a helper for objects the model keeps as such (custom
// resources).
func Unstructured(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
