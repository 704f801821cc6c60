// Package fleet owns the Fleet file (docs/fleet.md): the kubeconfig
// contexts of many clusters in rings, and the decision of a fleet
// rollout's next move from what each cluster's own objects say. It keeps
// no state of its own: a fleet rollout's state is the MaintenanceRollouts
// in the clusters, marked with the fleet and ring they belong to, so the
// command that drives it can be stopped and run again.
package fleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The Fleet file's apiVersion and kind.
const (
	APIVersion = "kustodian.io/v1alpha1"
	Kind       = "Fleet"
)

// The annotations a fleet rollout's MaintenanceRollouts carry: the fleet
// and the ring that submitted them there.
const (
	AnnotationFleet = "kustodian.io/fleet"
	AnnotationRing  = "kustodian.io/fleet-ring"
)

// Fleet is a Fleet file: clusters, by their kubeconfig contexts, in rings
// that a fleet rollout reaches one after the other.
type Fleet struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata,omitempty"`
	Rings      []Ring   `json:"rings"`
}

// Metadata names the fleet (default: the file's name without its
// extension).
type Metadata struct {
	Name string `json:"name,omitempty"`
}

// Ring is a set of clusters a fleet rollout is submitted to at once, and
// how long it must stay good after its last cluster completed before the
// next ring starts.
type Ring struct {
	Name     string   `json:"name"`
	Contexts []string `json:"contexts"`
	Soak     Duration `json:"soak,omitempty"`
}

// Duration is a Go duration written as text (1h, 30m, 0s).
type Duration struct{ time.Duration }

// UnmarshalJSON reads "1h30m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (1h, 30m, 0s)", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes "1h30m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Load reads and checks a Fleet file. Its errors name the file and the key.
func Load(path string) (*Fleet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--fleet: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Metadata.Name == "" {
		f.Metadata.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if errs := validation.IsDNS1123Label(f.Metadata.Name); len(errs) > 0 {
			return nil, fmt.Errorf("%s: metadata.name is missing and the file's name %q cannot stand for it (%s): give metadata.name", path, f.Metadata.Name, errs[0])
		}
	}
	return f, nil
}

// Parse reads a Fleet file's content (no key it does not know) and checks it.
func Parse(b []byte) (*Fleet, error) {
	var f Fleet
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("not a Fleet: %v", err)
	}
	return &f, f.check()
}

func (f *Fleet) check() error {
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %s, kind %s", f.APIVersion, f.Kind, APIVersion, Kind)
	}
	if f.Metadata.Name != "" {
		if errs := validation.IsDNS1123Label(f.Metadata.Name); len(errs) > 0 {
			return fmt.Errorf("metadata.name %q: %s", f.Metadata.Name, errs[0])
		}
	}
	if len(f.Rings) == 0 {
		return errors.New("rings: none; give at least one, as rings: [{name: staging, contexts: [stage-eu], soak: 1h}]")
	}
	rings, contexts := map[string]bool{}, map[string]string{}
	for i, r := range f.Rings {
		key := fmt.Sprintf("rings[%d]", i)
		if errs := validation.IsDNS1123Label(r.Name); len(errs) > 0 {
			return fmt.Errorf("%s.name %q: %s", key, r.Name, errs[0])
		}
		if rings[r.Name] {
			return fmt.Errorf("%s.name: ring %s is named twice", key, r.Name)
		}
		rings[r.Name] = true
		if len(r.Contexts) == 0 {
			return fmt.Errorf("%s.contexts: ring %s names no kubeconfig context", key, r.Name)
		}
		for _, c := range r.Contexts {
			if c == "" || strings.Contains(c, ",") {
				return fmt.Errorf("%s.contexts: %q is not a context name", key, c)
			}
			if in, ok := contexts[c]; ok {
				return fmt.Errorf("%s.contexts: context %s is in ring %s already; a cluster belongs to one ring", key, c, in)
			}
			contexts[c] = r.Name
		}
		if r.Soak.Duration < 0 {
			return fmt.Errorf("%s.soak: %s is negative", key, r.Soak)
		}
	}
	return nil
}

// Contexts are the fleet's contexts, ring by ring.
func (f *Fleet) Contexts() []string {
	var out []string
	for _, r := range f.Rings {
		out = append(out, r.Contexts...)
	}
	return out
}

// RingOf is the index of the ring a context is in (-1: none).
func (f *Fleet) RingOf(context string) int {
	for i, r := range f.Rings {
		for _, c := range r.Contexts {
			if c == context {
				return i
			}
		}
	}
	return -1
}
