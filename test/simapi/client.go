package simapi

import (
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Hook sees every request of one client before it is served. It may fail
// it (err), or let it be served and then fail the answer (after): a crash
// after the write reached the API server, before its answer reached the
// caller.
type Hook func(verb string, key Key) (err error, after bool)

// Client is a clientset whose requests the model serves; hook, when set,
// sees each of them first.
func (s *Server) Client(hook Hook) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := s.serve(a, hook)
		return true, obj, err
	})
	cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, fmt.Errorf("the simulation delivers watches itself; %s is not served", a.GetResource().Resource)
	})
	return cs
}

func (s *Server) serve(a k8stesting.Action, hook Hook) (runtime.Object, error) {
	res := a.GetResource()
	verb := a.GetVerb()
	if a.GetSubresource() != "" {
		verb += "/" + a.GetSubresource()
	}
	k := Key{Resource: res, Namespace: a.GetNamespace()}
	switch x := a.(type) {
	case k8stesting.GetAction:
		k.Name = x.GetName()
	case k8stesting.DeleteAction:
		k.Name = x.GetName()
	case k8stesting.PatchAction:
		k.Name = x.GetName()
	case k8stesting.CreateAction:
		if m, err := meta.Accessor(x.GetObject()); err == nil {
			k.Name = m.GetName()
		}
	case k8stesting.UpdateAction:
		if m, err := meta.Accessor(x.GetObject()); err == nil {
			k.Name = m.GetName()
		}
	}
	if hook != nil {
		if err, after := hook(verb, k); err != nil {
			if after {
				_, _ = s.serveChecked(a, verb, k)
			}
			return nil, err
		}
	}
	return s.serveChecked(a, verb, k)
}

func (s *Server) serveChecked(a k8stesting.Action, verb string, k Key) (runtime.Object, error) {
	if s.Down {
		return nil, ErrDown()
	}
	switch k.Resource {
	case Leases, Nodes, ConfigMaps, Pods, Events:
	default:
		return nil, fmt.Errorf("simapi: %s of %s is not modelled", verb, k.Resource)
	}
	switch verb {
	case "get":
		return s.Get(k)
	case "list":
		return s.list(a.(k8stesting.ListAction), k)
	case "create":
		if k.Resource == Events {
			return a.(k8stesting.CreateAction).GetObject(), nil // accepted, not kept
		}
		return s.Create(k, a.(k8stesting.CreateAction).GetObject())
	case "update":
		return s.Update(k, a.(k8stesting.UpdateAction).GetObject())
	case "delete":
		return nil, s.Delete(k)
	case "patch":
		return s.patch(a.(k8stesting.PatchAction), k)
	case "patch/status":
		if k.Resource == Nodes {
			return s.patchNodeStatus(a.(k8stesting.PatchAction), k)
		}
	}
	return nil, fmt.Errorf("simapi: %s of %s is not modelled", verb, k.Resource)
}

func (s *Server) list(a k8stesting.ListAction, k Key) (runtime.Object, error) {
	r := a.GetListRestrictions()
	var match func(runtime.Object) bool
	if r.Fields != nil && !r.Fields.Empty() {
		match = func(o runtime.Object) bool { return r.Fields.Matches(fieldsOf(o)) }
	}
	items, rv := s.List(k.Resource, k.Namespace, r.Labels, match)
	list, err := newList(k.Resource)
	if err != nil {
		return nil, err
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(fmt.Sprint(rv))
	return list, nil
}

func newList(res schema.GroupVersionResource) (runtime.Object, error) {
	switch res {
	case Leases:
		return &coordv1.LeaseList{}, nil
	case Nodes:
		return &corev1.NodeList{}, nil
	case ConfigMaps:
		return &corev1.ConfigMapList{}, nil
	case Pods:
		return &corev1.PodList{}, nil
	case Events:
		return &corev1.EventList{}, nil
	}
	return nil, fmt.Errorf("simapi: no list type for %s", res)
}

// fieldsOf are the field selectors the model knows.
func fieldsOf(o runtime.Object) fields.Set {
	m, _ := meta.Accessor(o)
	set := fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
	if p, ok := o.(*corev1.Pod); ok {
		set["spec.nodeName"] = p.Spec.NodeName
	}
	return set
}

func (s *Server) patch(a k8stesting.PatchAction, k Key) (runtime.Object, error) {
	_, out, err := s.patched(a, k)
	if err != nil {
		return nil, err
	}
	return s.Update(k, out)
}

// patchNodeStatus patches a Node's status subresource: of the patched
// object, only the status is taken, as the API server does.
func (s *Server) patchNodeStatus(a k8stesting.PatchAction, k Key) (runtime.Object, error) {
	cur, out, err := s.patched(a, k)
	if err != nil {
		return nil, err
	}
	n := cur.(*corev1.Node).DeepCopy()
	n.Status = out.(*corev1.Node).Status
	n.ResourceVersion = out.(*corev1.Node).ResourceVersion
	return s.Update(k, n)
}

// patched is the stored object and the object the patch makes of it.
func (s *Server) patched(a k8stesting.PatchAction, k Key) (cur, out runtime.Object, err error) {
	cur, err = s.Get(k)
	if err != nil {
		return nil, nil, err
	}
	orig, err := json.Marshal(cur)
	if err != nil {
		return nil, nil, err
	}
	var patched []byte
	switch a.GetPatchType() {
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(orig, a.GetPatch())
	case types.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(orig, a.GetPatch(), cur)
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(a.GetPatch()); err == nil {
			patched, err = p.Apply(orig)
		}
	default:
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("simapi: patch type %s is not modelled", a.GetPatchType()))
	}
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	// Into a new object: unmarshalling into the old one would keep the map
	// entries the patch deletes.
	out = reflect.New(reflect.TypeOf(cur).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	// A patch that names no version applies to the current one.
	m, _ := meta.Accessor(out)
	cm, _ := meta.Accessor(cur)
	if m.GetResourceVersion() == cm.GetResourceVersion() {
		m.SetResourceVersion("")
	}
	return cur, out, nil
}
