// Command sluice is the Sluice broker: a Kafka wire-protocol compatible
// message broker with separate write brokers, read brokers and a metadata
// quorum. `sluice dev` runs all three roles in one process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
