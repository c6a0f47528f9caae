package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// nemLin records the nemesis group's offset commits and fetches with their
// call and return times, for a linearizability check of committed offsets
// (each partition's committed offset a register: a commit writes it, a fetch
// reads it) once the run ends. A commit whose outcome is unknown (a timeout,
// a lost connection, an error that does not say the write was refused)
// returns at +infinity: the checker may place it anywhere after its call,
// including after everything else, that is never.
type nemLin struct{ nemHistory }

// nemHistory is a history for porcupine, shared by the nemesis's checkers:
// operations with their call and return times in nanoseconds since the
// history began.
type nemHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func (h *nemHistory) clock() int64 { return int64(time.Since(h.start)) }

func (h *nemHistory) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// check runs porcupine with model over the history (bounded by timeout):
// an error names, by label, the model's partitions whose own history no
// order explains, with their last operations by call time; a check that
// ran out of time is reported as such, not as a pass. what names the
// operations ("offset") and whole the property and its verb ("committed
// offsets are").
func (h *nemHistory) check(model porcupine.Model, what, whole string, label func(part []porcupine.Operation) string, timeout time.Duration) (int, error) {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
	case porcupine.Ok:
		return len(ops), nil
	case porcupine.Unknown:
		return len(ops), fmt.Errorf("the linearizability check of %d %s operations did not finish within %v", len(ops), what, timeout)
	}
	describe := func(ops []porcupine.Operation) []string {
		var out []string
		for _, op := range ops {
			ret := "?"
			if op.Return != math.MaxInt64 {
				ret = time.Duration(op.Return).String()
			}
			out = append(out, fmt.Sprintf("[%v,%s] client %d %s", time.Duration(op.Call), ret, op.ClientId,
				model.DescribeOperation(op.Input, op.Output)))
		}
		return out
	}
	keep := os.Getenv("SLUICE_TEST_KEEP_LOGS")
	var bad []string
	for i, part := range model.Partition(ops) {
		res, info := porcupine.CheckOperationsVerbose(model, part, timeout)
		if res != porcupine.Illegal {
			continue
		}
		stuck, placed := stuckAt(part, info)
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		// Where the longest order found ends: the last operations it
		// placed, and every operation (by call time) around the earliest
		// return it could not place.
		// (Unknown outcomes, open to the end, only if called within 30 s.)
		var around []porcupine.Operation
		for _, op := range part {
			if op.Call <= stuck && op.Return >= stuck-int64(2*time.Second) &&
				(op.Return != math.MaxInt64 || op.Call >= stuck-int64(30*time.Second)) {
				around = append(around, op)
			}
		}
		around = around[max(0, len(around)-40):]
		msg := fmt.Sprintf("%s (%d operations; the longest order found places %d, ending %v; then stuck at the return at %v, among %v)",
			label(part), len(part), len(placed), describe(placed[max(0, len(placed)-4):]), time.Duration(stuck), describe(around))
		if keep != "" {
			name := fmt.Sprintf("nemesis-%s-%d", what, i)
			if err := porcupine.VisualizePath(model, info, filepath.Join(keep, name+".html")); err == nil {
				msg += "; porcupine's view in " + name + ".html"
			}
			if err := os.WriteFile(filepath.Join(keep, name+".txt"), []byte(strings.Join(describe(part), "\n")+"\n"), 0o644); err == nil {
				msg += ", every operation in " + name + ".txt"
			}
		}
		bad = append(bad, msg)
	}
	return len(ops), fmt.Errorf("%s not linearizable (operation times are from %s): %v", whole, h.start.UTC().Format(time.RFC3339Nano), bad)
}

// stuckAt: of porcupine's longest partial order of part (info from its
// verbose check), the operations it placed, in order, and the earliest
// return among those it did not place: the point no order explains.
func stuckAt(part []porcupine.Operation, info porcupine.LinearizationInfo) (int64, []porcupine.Operation) {
	var placed []porcupine.Operation
	for _, p := range info.PartialLinearizationsOperations() {
		for _, l := range p {
			if len(l) > len(placed) {
				placed = l
			}
		}
	}
	in := map[porcupine.Operation]bool{}
	for _, op := range placed {
		in[op] = true
	}
	stuck := int64(math.MaxInt64)
	for _, op := range part {
		if !in[op] && op.Return < stuck {
			stuck = op.Return
		}
	}
	return stuck, placed
}

// partitionOpsBy splits a history by key, in key order (a porcupine
// Model's Partition).
func partitionOpsBy(h []porcupine.Operation, key func(porcupine.Operation) string) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	for _, op := range h {
		k := key(op)
		by[k] = append(by[k], op)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

type nemLinIn struct {
	fetch bool
	tp    nemTP
	value int64 // commit: the offset written
}

type nemLinOut struct {
	value int64 // fetch: the offset read
}

// nemLinFetcher is the client id of the checker's own fetches (consumers
// are 0, 1, ...).
const nemLinFetcher = 100

func newNemLin() *nemLin { return &nemLin{nemHistory{start: time.Now()}} }

// commitRefused: errors with which the coordinator refuses a commit without
// writing it (Kafka's group coordinator checks these before the write).
// Anything else, timeouts and COORDINATOR_NOT_AVAILABLE included, may have
// been written.
func commitRefused(err error) bool {
	for _, e := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress,
		kerr.FencedInstanceID, kerr.StaleMemberEpoch, kerr.GroupAuthorizationFailed, kerr.TopicAuthorizationFailed,
		kerr.UnknownTopicOrPartition, kerr.OffsetMetadataTooLarge, kerr.InvalidCommitOffsetSize} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// commitAttempts counts the OffsetCommit requests a client wrote (a kgo
// hook). franz-go sends a commit again by itself when an attempt is cut
// off or answered COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, and the
// caller sees only the last attempt's answer; an earlier attempt's
// outcome is unknown (the coordinator's metastore write may still land).
type commitAttempts struct{ n atomic.Int64 }

var _ kgo.HookBrokerWrite = (*commitAttempts)(nil)

func (c *commitAttempts) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == kmsg.OffsetCommit.Int16() {
		c.n.Add(1)
	}
}

// refusedAfterRetry: err, the answer to a commit that took tries
// requests; a refusal (commitRefused) after more than one says only that
// the last attempt wrote nothing, so it becomes an unknown outcome.
func refusedAfterRetry(tries int64, err error) error {
	if tries <= 1 || err == nil || !commitRefused(err) {
		return err
	}
	return fmt.Errorf("refused at the last of %d attempts; an earlier one may have been written: %v", tries, err)
}

// commit records one partition's commit of offset, called at call: err nil
// is a commit the coordinator acknowledged.
func (l *nemLin) commit(client int, tp nemTP, offset, call int64, err error) {
	if err != nil && commitRefused(err) {
		return // not written: not an operation on the register
	}
	ret := l.clock()
	if err != nil {
		ret = math.MaxInt64
	}
	l.add(porcupine.Operation{ClientId: client, Input: nemLinIn{tp: tp, value: offset},
		Call: call, Output: nemLinOut{}, Return: ret})
}

// fetch records a successful fetch of tp's committed offset, called at call.
func (l *nemLin) fetch(client int, tp nemTP, value, call int64) {
	ret := l.clock()
	l.add(porcupine.Operation{ClientId: client, Input: nemLinIn{fetch: true, tp: tp},
		Call: call, Output: nemLinOut{value: value}, Return: ret})
}

var nemLinModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		return partitionOpsBy(h, func(op porcupine.Operation) string { return op.Input.(nemLinIn).tp.String() })
	},
	// A partition with no commit yet is fetched as nothing, which the
	// recorder leaves out, so the first state is "no value".
	Init: func() any { return int64(-1) },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(int64), input.(nemLinIn)
		if !in.fetch {
			return true, in.value
		}
		return output.(nemLinOut).value == s, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(nemLinIn)
		if in.fetch {
			return fmt.Sprintf("fetch %s -> %d", in.tp, output.(nemLinOut).value)
		}
		return fmt.Sprintf("commit %s %d", in.tp, in.value)
	},
}

// check runs porcupine over the history (bounded by timeout): an error
// names the partitions whose history no order explains; a check that ran
// out of time is reported as such, not as a pass.
func (l *nemLin) check(timeout time.Duration) (ops int, err error) {
	return l.nemHistory.check(nemLinModel, "offset", "committed offsets are", func(part []porcupine.Operation) string {
		return part[0].Input.(nemLinIn).tp.String()
	}, timeout)
}

// TestNemesisLinearizabilityChecker: the nemesis's offset checker passes
// histories some order explains and fails one where a fetch, after an
// acknowledged commit, returns an older offset; unknown outcomes and
// refused commits are handled as documented above.
func TestNemesisLinearizabilityChecker(t *testing.T) {
	tp := nemTP{"t", 0}
	at := func(_ *nemLin, d time.Duration) int64 { return int64(d) }
	for _, tc := range []struct {
		name string
		ops  func(l *nemLin)
		ok   bool
		say  string // in the error of a history that fails
	}{
		{"acknowledged then read", func(l *nemLin) {
			l.ops = append(l.ops,
				porcupine.Operation{ClientId: 0, Input: nemLinIn{tp: tp, value: 5}, Call: at(l, 1), Output: nemLinOut{}, Return: at(l, 2)},
				porcupine.Operation{ClientId: 100, Input: nemLinIn{fetch: true, tp: tp}, Call: at(l, 3), Output: nemLinOut{value: 5}, Return: at(l, 4)})
		}, true, ""},
		{"read goes back after an acknowledged commit", func(l *nemLin) {
			l.ops = append(l.ops,
				porcupine.Operation{ClientId: 0, Input: nemLinIn{tp: tp, value: 3}, Call: at(l, 1), Output: nemLinOut{}, Return: at(l, 2)},
				porcupine.Operation{ClientId: 0, Input: nemLinIn{tp: tp, value: 5}, Call: at(l, 3), Output: nemLinOut{}, Return: at(l, 4)},
				porcupine.Operation{ClientId: 100, Input: nemLinIn{fetch: true, tp: tp}, Call: at(l, 5), Output: nemLinOut{value: 3}, Return: at(l, 6)})
		}, false, "places 2, ending [[1ns,2ns] client 0 commit t/0 3 [3ns,4ns] client 0 commit t/0 5]; then stuck at the return at 6ns"},
		{"unknown commit seen later", func(l *nemLin) {
			l.ops = append(l.ops,
				porcupine.Operation{ClientId: 0, Input: nemLinIn{tp: tp, value: 7}, Call: at(l, 1), Output: nemLinOut{}, Return: math.MaxInt64},
				porcupine.Operation{ClientId: 100, Input: nemLinIn{fetch: true, tp: tp}, Call: at(l, 5), Output: nemLinOut{value: 7}, Return: at(l, 6)})
		}, true, ""},
		{"unknown commit never seen", func(l *nemLin) {
			l.ops = append(l.ops,
				porcupine.Operation{ClientId: 0, Input: nemLinIn{tp: tp, value: 2}, Call: at(l, 1), Output: nemLinOut{}, Return: at(l, 2)},
				porcupine.Operation{ClientId: 0, Input: nemLinIn{tp: tp, value: 7}, Call: at(l, 3), Output: nemLinOut{}, Return: math.MaxInt64},
				porcupine.Operation{ClientId: 100, Input: nemLinIn{fetch: true, tp: tp}, Call: at(l, 5), Output: nemLinOut{value: 2}, Return: at(l, 6)})
		}, true, ""},
		{"refused commits are no writes", func(l *nemLin) {
			l.commit(0, tp, 4, l.clock(), nil)
			l.commit(1, tp, 9, l.clock(), kerr.IllegalGeneration)
			l.fetch(100, tp, 9, l.clock()) // a refused commit was read back
		}, false, ""},
		{"a commit refused only at its second attempt may have been written", func(l *nemLin) {
			l.commit(0, tp, 4, l.clock(), nil)
			l.commit(1, tp, 9, l.clock(), refusedAfterRetry(2, kerr.IllegalGeneration))
			l.fetch(100, tp, 9, l.clock())
		}, true, ""},
		{"a commit refused at its only attempt was not", func(l *nemLin) {
			l.commit(0, tp, 4, l.clock(), nil)
			l.commit(1, tp, 9, l.clock(), refusedAfterRetry(1, kerr.IllegalGeneration))
			l.fetch(100, tp, 9, l.clock())
		}, false, "stuck at the return"},
		{"a timed-out commit may have been written", func(l *nemLin) {
			l.commit(0, tp, 4, l.clock(), nil)
			l.commit(1, tp, 9, l.clock(), kerr.CoordinatorNotAvailable)
			l.fetch(100, tp, 9, l.clock())
		}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newNemLin()
			tc.ops(l)
			_, err := l.check(10 * time.Second)
			if (err == nil) != tc.ok {
				t.Fatalf("check: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.say) {
				t.Fatalf("check: %v, want it to say %q", err, tc.say)
			}
		})
	}
}
