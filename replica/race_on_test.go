//go:build race

package replica

// raceEnabled: the race detector slows raft processing several times over;
// tests whose size only matters for a measurement scale down under it.
const raceEnabled = true
