package main

import (
	"bytes"
	"testing"
)

// TestKeysAndValues: with -keys every cycle of N records uses each of the
// N keys once, in the same order every run, and values are filled the
// same way for the same record number and differently for the next.
func TestKeysAndValues(t *testing.T) {
	c := &config{Keys: 1000, RecordSize: 1024}
	seen := map[string]bool{}
	for n := int64(0); n < c.Keys; n++ {
		seen[string(keyFor(c, n))] = true
	}
	if len(seen) != int(c.Keys) {
		t.Fatalf("%d distinct keys in one cycle, want %d", len(seen), c.Keys)
	}
	if !bytes.Equal(keyFor(c, 7), keyFor(c, 7+c.Keys)) {
		t.Fatal("the key order is not periodic")
	}
	a, b, a2 := make([]byte, c.RecordSize), make([]byte, c.RecordSize), make([]byte, c.RecordSize)
	fillValue(c, a, 5)
	fillValue(c, b, 6)
	fillValue(c, a2, 5)
	if !bytes.Equal(a, a2) || bytes.Equal(a, b) || bytes.Count(a[16+504:], []byte{0}) != 504 {
		t.Fatal("values are not deterministic per record, distinct between records, half zeros")
	}
	if keyFor(&config{}, 3) != nil {
		t.Fatal("a key without -keys")
	}
}
