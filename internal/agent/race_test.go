//go:build race

package agent

// raceEnabled: the tests run under the race detector, ten times slower;
// the simulation then runs fewer seeds (make sim runs the full set).
const raceEnabled = true
