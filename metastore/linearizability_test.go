package metastore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model is a map. Keys are "o/<partition>" (offset commits and fetches
// of one group) and "t/<name>" (topic creations). Operations whose outcome
// is unknown (timeouts) return at +infinity, so the checker may place them
// anywhere after their call, including "never".
type linInput struct {
	Op    string // "commit", "fetch", "create"
	Key   string
	Value int64
}

type linOutput struct {
	Value   int64 // fetch: -1 when nothing committed
	Exists  bool  // create: ErrTopicExists
	Unknown bool
}

var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(linInput).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	// Per key: int64 value; -1 absent (offsets) / 0,1 exists (topics).
	Init: func() any { return int64(-1) },
	Step: func(state, input, output any) (bool, any) {
		s := state.(int64)
		in := input.(linInput)
		out := output.(linOutput)
		switch in.Op {
		case "commit":
			return true, in.Value
		case "fetch":
			return out.Value == s, s
		case "create":
			if out.Unknown {
				return true, int64(1)
			}
			if out.Exists {
				return s == 1, s
			}
			return s != 1, int64(1)
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		return fmt.Sprintf("%s(%s,%d) -> %+v", in.Op, in.Key, in.Value, out)
	},
}

func TestLinearizabilityUnderFaults(t *testing.T) {
	dur := 6 * time.Second
	if testing.Short() {
		dur = 2 * time.Second
	}
	if d, err := time.ParseDuration(os.Getenv("METASTORE_LIN_DURATION")); err == nil {
		dur = d
	}
	seed := int64(42)
	if v, err := strconv.ParseInt(os.Getenv("METASTORE_LIN_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (METASTORE_LIN_SEED), duration %v (METASTORE_LIN_DURATION)", seed, dur)
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotEntries = 200
		cfg.CompactionKeep = 20
	})
	c.waitLeader()
	remote := c.hub.HubClient(100, 1, 2, 3)
	defer remote.Close()

	start := time.Now()
	clock := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		counter atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		nOps    atomic.Int64
	)
	record := func(client int, in linInput, call int64, out linOutput) {
		ret := clock()
		if out.Unknown {
			ret = math.MaxInt64
		}
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
		nOps.Add(1)
	}
	pickClient := func(r *rand.Rand) *Client {
		if r.Intn(3) == 0 {
			return remote
		}
		ids := c.ids()
		if len(ids) == 0 {
			return remote
		}
		return c.node(ids[r.Intn(len(ids))]).Client()
	}
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed*100 + int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				cl := pickClient(r)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				call := clock()
				switch x := r.Intn(10); {
				case x < 4:
					p := int32(r.Intn(3))
					v := counter.Add(1)
					in := linInput{Op: "commit", Key: fmt.Sprintf("o/%d", p), Value: v}
					err := cl.CommitOffsets(ctx, Fence{}, "lin", []OffsetCommit{{TopicPartition: TopicPartition{"x", p}, Offset: v}})
					record(w, in, call, linOutput{Unknown: err != nil})
				case x < 8:
					p := int32(r.Intn(3))
					in := linInput{Op: "fetch", Key: fmt.Sprintf("o/%d", p)}
					offs, err := cl.FetchOffsets(ctx, "lin", []TopicPartition{{"x", p}})
					if err == nil {
						out := linOutput{Value: -1}
						if len(offs) == 1 {
							out.Value = offs[0].Offset
						}
						record(w, in, call, out)
					}
				default:
					name := fmt.Sprintf("topic-%d", r.Intn(40))
					in := linInput{Op: "create", Key: "t/" + name}
					_, err := cl.CreateTopic(ctx, TopicSpec{Name: name, Partitions: 1})
					switch {
					case err == nil:
						record(w, in, call, linOutput{})
					case errors.Is(err, ErrTopicExists):
						record(w, in, call, linOutput{Exists: true})
					default:
						record(w, in, call, linOutput{Unknown: true})
					}
				}
				cancel()
			}
		}(w)
	}

	// Nemesis: partitions, message loss/duplication/delay, crash+restart.
	r := rand.New(rand.NewSource(seed))
	deadline := time.Now().Add(dur)
	faults := 0
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		switch r.Intn(4) {
		case 0:
			victim := uint64(r.Intn(3) + 1)
			c.hub.Partition(victim)
			time.Sleep(400 * time.Millisecond)
			c.hub.Heal()
		case 1:
			c.hub.Drop(0.1)
			c.hub.Duplicate(0.1)
			c.hub.Delay(0, 5*time.Millisecond)
			time.Sleep(400 * time.Millisecond)
			c.hub.Heal()
		case 2:
			ids := c.ids()
			victim := ids[r.Intn(len(ids))]
			c.stop(victim)
			time.Sleep(300 * time.Millisecond)
			c.start(victim, false)
		case 3:
			lead := c.node(c.ids()[0]).Leader()
			if lead != 0 && c.node(lead) != nil {
				c.stop(lead)
				time.Sleep(300 * time.Millisecond)
				c.start(lead, false)
			}
		}
		faults++
	}
	c.hub.Heal()
	close(stop)
	wg.Wait()
	c.waitConverged()

	unknown := 0
	for _, op := range history {
		if op.Output.(linOutput).Unknown {
			unknown++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(linModel, history, 60*time.Second)
	t.Logf("%d operations (%d with unknown outcome), %d faults, result %v", nOps.Load(), unknown, faults, res)
	if res != porcupine.Ok {
		if res == porcupine.Illegal {
			f := "lin.html"
			if d, err := os.MkdirTemp("", "metastore-lin-"); err == nil {
				f = d + "/lin.html" // kept after the test, unlike t.TempDir
			}
			_ = porcupine.VisualizePath(linModel, info, f)
			t.Fatalf("history is not linearizable (visualization: %s)", f)
		}
		t.Fatalf("linearizability check inconclusive: %v", res)
	}
	if nOps.Load() < 50 {
		t.Fatalf("too few operations completed: %d", nOps.Load())
	}
}

// The checker must be able to fail: a fetch that misses an acknowledged
// commit is rejected.
func TestLinearizabilityModelRejectsStaleRead(t *testing.T) {
	h := []porcupine.Operation{
		{ClientId: 0, Input: linInput{Op: "commit", Key: "o/0", Value: 5}, Call: 0, Output: linOutput{}, Return: 10},
		{ClientId: 1, Input: linInput{Op: "fetch", Key: "o/0"}, Call: 20, Output: linOutput{Value: -1}, Return: 30},
	}
	if porcupine.CheckOperations(linModel, h) {
		t.Fatal("stale read accepted")
	}
	h2 := []porcupine.Operation{
		{ClientId: 0, Input: linInput{Op: "create", Key: "t/a"}, Call: 0, Output: linOutput{}, Return: 10},
		{ClientId: 1, Input: linInput{Op: "create", Key: "t/a"}, Call: 20, Output: linOutput{}, Return: 30},
	}
	if porcupine.CheckOperations(linModel, h2) {
		t.Fatal("double create accepted")
	}
}
