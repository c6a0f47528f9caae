// Package partition is the vocabulary the Kafka front end (package server)
// and the partitions it serves share: the interfaces a hosted partition and
// the broker's set of them implement, and the plain values and errors that
// cross between them. It imports nothing of Sluice's.
//
// The dependencies point one way: server -> partition <- replica -> log.
// server imports this package only, never replica or log, so a change to
// how a partition stores or replicates its data cannot reach a handler, and
// `go list -deps ./server` names neither (a test in server checks it).
// replica implements the interfaces (replica.Replica, replica.Partition,
// Host.Hosted, Manager.Local); log defines its results and errors as
// aliases of the values here, so they pass through replica unchanged (no
// copy on the Produce and Fetch paths) and errors.Is finds a log error the
// server tests for whichever package names it.
package partition
