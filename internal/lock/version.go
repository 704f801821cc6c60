package lock

import "k8s.io/apimachinery/pkg/util/resourceversion"

// VersionOrder compares two resourceVersions as the API server orders
// them (-1, 0, +1); ok is false when either is not one it can compare (an
// empty or made-up value). The one comparison of versions: each caller says
// what an unreadable one means where it asks.
func VersionOrder(a, b string) (cmp int, ok bool) {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return c, err == nil
}
