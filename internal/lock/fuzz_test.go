package lock

import (
	"encoding/json"
	"reflect"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzQueueSummary: a queue summary is written by any node of the
// namespace, so the agents read it as untrusted input: whatever it holds,
// reading it either fails or gives a summary that is consistent, and a
// summary that reads is written back unchanged.
func FuzzQueueSummary(f *testing.F) {
	for _, seed := range []string{
		`{"nodes":["a","b"],"total":5,"listRV":"12","last":{"key":"11"}}`,
		`{"nodes":[],"total":0,"listRV":"1"}`,
		`{"nodes":null,"total":0,"listRV":"1"}`,
		`{"nodes":["a","a"],"total":2,"listRV":"007","last":{"priority":-3,"key":"x"}}`,
		`{"nodes":["a"],"total":1,"listRV":"1","nodes":["b"]}`,
		`[]`, `null`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-default", Annotations: map[string]string{AnnotationQueue: v}}}
		s, err := SummaryFromLease(l)
		if err != nil {
			return
		}
		if s.Total < len(s.Nodes) || s.Total < 0 {
			t.Fatalf("%q read as %+v", v, s)
		}
		for i, n := range s.Nodes {
			if j := s.Index(n); j < 0 || j > i {
				t.Fatalf("%q: index of %q is %d", v, n, j)
			}
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		l.Annotations[AnnotationQueue] = string(b)
		again, err := SummaryFromLease(l)
		if err != nil || !reflect.DeepEqual(normal(again), normal(s)) {
			t.Fatalf("%q: written back as %s, read as %+v (%v)", v, b, again, err)
		}
	})
}

// normal treats no nodes and an empty list alike.
func normal(s Summary) Summary {
	if len(s.Nodes) == 0 {
		s.Nodes = nil
	}
	return s
}
