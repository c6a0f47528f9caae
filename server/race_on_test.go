//go:build race

package server

// raceEnabled: the race detector changes what the runtime allocates (an
// append of a made slice is no longer one allocation), so tests that
// compare allocations with a bound meant for normal builds leave that
// check out under it.
const raceEnabled = true
