// Command sluice is the Sluice broker: a Kafka wire-protocol compatible
// message broker with separate write brokers, read brokers and a metadata
// quorum. `sluice dev` runs all three roles in one process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// defaultGCPercent is the collector's goal, in percent of the live heap the
// heap may grow by before the next collection, when the environment does
// not set GOGC (Go's own default is 100). Under a produce load most of the
// live heap is request frames that the broker recycles itself (about 32 MiB
// of 8 MiB frames under W1, four producers); they are never garbage, so
// headroom in proportion to them only sizes the process: peak RSS was live
// heap plus all the garbage of a 12 s run. The garbage is little (1 to
// 10 MB/s under W1 and W3) and the frames hold no pointers, so collecting
// five times as often cost about 1 % of the broker's CPU (GODEBUG=gctrace=1
// under W3: 23 collections in 17 s of 2 to 5 ms each).
const defaultGCPercent = 20

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
