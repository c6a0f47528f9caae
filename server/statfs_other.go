//go:build !linux && !darwin

package server

// volumeBytes is unknown here: -1, as Kafka answers when it cannot tell.
func volumeBytes(string) (total, usable int64) { return -1, -1 }
