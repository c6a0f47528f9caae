package main

import "testing"

// seenOffsets counts each offset of a partition once, however far apart
// the offsets and whichever partition, and counts a second delivery of an
// offset as a duplicate.
func TestSeenOffsets(t *testing.T) {
	s := &seenOffsets{parts: map[int32][]bool{}}
	for _, o := range []struct {
		p   int32
		off int64
		new bool
	}{
		{0, 0, true}, {0, 5000, true}, {1, 0, true}, {0, 0, false}, {0, 4999, true}, {1, 0, false}, {7, 100000, true},
	} {
		if got := s.add(o.p, o.off); got != o.new {
			t.Fatalf("add(%d, %d) = %v, want %v", o.p, o.off, got, o.new)
		}
	}
	if s.distinct != 5 || s.dups != 2 {
		t.Fatalf("distinct %d dups %d, want 5 and 2", s.distinct, s.dups)
	}
}
