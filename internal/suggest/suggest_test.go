package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"watch", "watc", 1}, {"policy", "polcy", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"same", "same", 0}} {
		if got := Distance(tc.a, tc.b); got != tc.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestClosest(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want string
	}{{"watc", "watch"}, {"Polcy", "policy"}, {"output", ""}, {"w", ""}} {
		if got := Closest(tc.s, []string{"watch", "policy", "selector"}); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
