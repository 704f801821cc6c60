package judge

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

func (j *Judge) pdb(typ watch.EventType, obj runtime.Object) {
	p, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if typ == watch.Deleted {
		delete(j.pdbs, p.Name)
		return
	}
	j.pdbs[p.Name] = p
	j.checkPDBs()
}

func (j *Judge) pod(typ watch.EventType, obj runtime.Object) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if typ == watch.Deleted {
		delete(j.pods, p.Name)
	} else {
		j.pods[p.Name] = p
	}
	j.checkPDBs()
}

// checkPDBs: the pods a PDB selects that are ready and not going away never
// fall below its minAvailable once they have reached it. j.mu is held.
func (j *Judge) checkPDBs() {
	for name, p := range j.pdbs {
		if p.Spec.MinAvailable == nil || p.Spec.Selector == nil {
			continue
		}
		min := p.Spec.MinAvailable.IntValue()
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			j.violate("PDB %s: unreadable selector: %v", name, err)
			continue
		}
		up := 0
		for _, pod := range j.pods {
			if pod.DeletionTimestamp == nil && ready(pod) && sel.Matches(labels.Set(pod.Labels)) {
				up++
			}
		}
		switch {
		case up >= min:
			j.reached[name] = true
		case j.reached[name]:
			j.violate("PDB %s: %d pods available, minAvailable %d", name, up, min)
			j.reached[name] = false // once per breach
		}
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
