//go:build linux

package powerloss

import (
	"os"
	"strconv"
	"testing"
)

// SeedEnv names the environment variable that replays a power-loss test:
// its value is the test's base seed.
const SeedEnv = "SLUICE_POWERLOSS_SEED"

// Seed is the base seed of a power-loss test: SLUICE_POWERLOSS_SEED when
// set, else 1. It is logged, so a failure names the value that replays it
// (the images, the cut points and whatever else the test draws from it;
// the goroutines' interleaving stays the scheduler's).
func Seed(tb testing.TB) int64 {
	tb.Helper()
	seed := int64(1)
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tb.Fatalf("%s: %v", SeedEnv, err)
		}
		seed = v
	}
	tb.Logf("power-loss seed %d (%s=%d replays it)", seed, SeedEnv, seed)
	return seed
}

// ImageFor is the mode and seed of the i-th image a test seeded with seed
// builds: the first is the exact last-synced state, the others random.
func ImageFor(seed int64, i int) (Mode, int64) {
	if i == 0 {
		return Exact, seed * 1000
	}
	return Random, seed*1000 + int64(i)
}
