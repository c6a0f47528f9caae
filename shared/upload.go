package shared

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// The upload pipeline. The uploader cuts the buffer into objects and
// starts each one's PUT at once, so up to Parallel objects upload
// together; the committer takes them in the order they were cut, waits
// for each one's PUT and commits its chunks, one object at a time, so a
// partition's chunks reach the metastore in offset order (the metastore
// refuses a chunk whose base offset is not the partition's end). A slot
// is held from the cut to the end of the commit.

// object is one cut of the upload buffer: its batches grouped into one
// run per partition, the body holding them, and the bytes of the Host's
// budget it holds until its commit ended. put is closed once its upload
// ended, err set if it failed.
type object struct {
	key  string
	inc  uint64
	body []byte
	runs []*run
	held int64
	put  chan struct{}
	err  error
}

// run is one partition's batches in an object, all of one writer
// generation, and their chunk entry.
type run struct {
	p     *Partition
	gen   uint64
	pds   []*pending
	chunk metastore.SharedChunk
}

// admit reserves n bytes of the Host's budget for a batch about to be
// accepted, waiting while the buffer and the objects in flight hold
// Parallel × UploadBytes (back-pressure when shared storage or the
// metastore is slower than the producers). A batch is admitted whenever
// nothing is held, so one larger than the budget still passes. Called
// without partition locks: the committer that makes room takes them.
func (h *Host) admit(n int64) error {
	limit := int64(h.cfg.Parallel) * h.cfg.UploadBytes
	h.bufMu.Lock()
	defer h.bufMu.Unlock()
	for !h.bufClosed && h.held > 0 && h.held+n > limit {
		h.room.Wait()
	}
	if h.bufClosed {
		return partition.ErrPartitionClosed
	}
	h.held += n
	return nil
}

// release gives n bytes of the budget back.
func (h *Host) release(n int64) {
	h.bufMu.Lock()
	h.held -= n
	h.room.Broadcast()
	h.bufMu.Unlock()
}

// enqueue adds an accepted batch, admitted already, to the upload
// buffer and says so; once Close answered the buffer, it answers the
// batch at once instead.
func (h *Host) enqueue(pd *pending) bool {
	h.bufMu.Lock()
	if h.bufClosed {
		h.bufMu.Unlock()
		pd.prop.finish(partition.ProduceResult{}, partition.ErrPartitionClosed)
		return false
	}
	pd.queued = time.Now()
	if len(h.buf) == 0 {
		h.oldest = pd.queued
	}
	h.buf = append(h.buf, pd)
	h.bufBytes += pd.size
	h.bufMu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
	return true
}

// uploader cuts an object when the buffer holds UploadBytes or its
// oldest batch waited Linger, and a slot is free; it starts the object's
// PUT and hands it to the committer, in the order it cut them.
func (h *Host) uploader() {
	defer h.wg.Done()
	defer close(h.objects)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		h.bufMu.Lock()
		n, size, oldest := len(h.buf), h.bufBytes, h.oldest
		h.bufMu.Unlock()
		if n > 0 && (size >= h.cfg.UploadBytes || time.Since(oldest) >= h.cfg.Linger) {
			select {
			case h.slots <- struct{}{}:
			case <-h.stop:
				return
			}
			o := h.cut()
			if len(o.runs) == 0 {
				h.release(o.held)
				<-h.slots
				continue
			}
			h.objects <- o // never blocks: it has a slot
			h.wg.Add(1)
			go h.put(o)
			continue
		}
		wait := time.Hour
		if n > 0 {
			wait = h.cfg.Linger - time.Since(oldest)
		}
		timer.Reset(wait)
		select {
		case <-h.stop:
			return
		case <-h.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// cut takes the buffer's first batches, at most UploadBytes of them (at
// least one), into an object.
func (h *Host) cut() *object {
	h.bufMu.Lock()
	var took int64
	i := 0
	for i < len(h.buf) && (i == 0 || took+h.buf[i].size <= h.cfg.UploadBytes) {
		took += h.buf[i].size
		i++
	}
	buf := slices.Clone(h.buf[:i])
	clear(h.buf[:i])
	h.buf = h.buf[i:]
	if len(h.buf) == 0 {
		h.buf = nil
	} else {
		h.oldest = h.buf[0].queued
	}
	h.bufBytes -= took
	h.bufMu.Unlock()
	return h.newObject(buf, took)
}

// newObject groups buf's batches by partition, one contiguous run each
// in offset order, and lays out the object's body and chunk entries.
// Batches already answered (their writer generation ended) are left out.
func (h *Host) newObject(buf []*pending, held int64) *object {
	o := &object{inc: h.cfg.Incarnation(), held: held, put: make(chan struct{})}
	byPart := map[*Partition]*run{}
	for _, pd := range buf {
		select {
		case <-pd.prop.done:
			continue // its writer generation ended: already answered
		default:
		}
		r := byPart[pd.p]
		if r != nil && r.gen != pd.gen {
			// A new generation behind an old one that was not
			// answered yet: the old one's commit will fail (its
			// epoch is gone), and this batch's offsets follow
			// offsets that will not commit, so the new generation
			// ends too.
			pd.p.reset(pd.gen, fmt.Errorf("%w: partition leadership changed", partition.ErrNotLeader))
			continue
		}
		if r == nil {
			r = &run{p: pd.p, gen: pd.gen}
			byPart[pd.p] = r
			o.runs = append(o.runs, r)
		}
		r.pds = append(r.pds, pd)
	}
	if len(o.runs) == 0 {
		return o
	}
	// The sequence is taken in cut order, so objects commit in sequence
	// order (what condemning by sequence relies on: docs/shared-storage.md).
	o.key = fmt.Sprintf("data/%d/%d/%020d", h.cfg.NodeID, o.inc, h.seq.Add(1))
	for _, r := range o.runs {
		first, last := r.pds[0], r.pds[len(r.pds)-1]
		pos := int64(len(o.body))
		ch := metastore.SharedChunk{TopicID: r.p.key.TopicID, Partition: r.p.key.Index, LeaderEpoch: first.epoch,
			BaseOffset: first.base, LastOffset: last.last, Key: o.key, Pos: pos, MaxTimestamp: -1}
		for _, pd := range r.pds {
			o.body = append(o.body, pd.batch...)
			ch.MaxTimestamp = max(ch.MaxTimestamp, pd.maxTs)
		}
		ch.Len = int64(len(o.body)) - pos
		r.p.wmu.Lock()
		ch.Txns = r.p.cutTxnsLocked(r.pds)
		r.p.wmu.Unlock()
		for _, pd := range r.pds {
			pd.batch = nil // the body holds it now
		}
		r.chunk = ch
	}
	return o
}

// put uploads o, and tells the committer it ended.
func (h *Host) put(o *object) {
	defer h.wg.Done()
	defer close(o.put)
	ctx, cancel := h.ctx()
	defer cancel()
	if err := h.cfg.Store.PutIfAbsent(ctx, o.key, o.body); err != nil {
		o.err = err
		return
	}
	h.puts.Add(1)
	h.putBytes.Add(int64(len(o.body)))
}

// committer commits the objects in the order they were cut, each once
// its upload ended, one at a time; then it frees the object's bytes and
// slot. It ends once the uploader stopped and every object it cut is
// done with.
func (h *Host) committer() {
	defer h.wg.Done()
	for o := range h.objects {
		<-o.put
		h.commit(o)
		h.release(o.held)
		<-h.slots
	}
}

// commit commits the chunks of an uploaded object and answers their
// batches. A failed upload or commit, or a refused chunk, answers the
// batches involved NOT_LEADER_OR_FOLLOWER and ends their partition's
// writer generation, so the same generation's runs in the objects cut
// after this one are not committed either (live).
func (h *Host) commit(o *object) {
	if o.err != nil {
		h.cfg.Logger.Warn().Err(o.err).Str("key", o.key).Msg("shared storage upload failed")
		fail(o.runs, fmt.Errorf("%w: upload to shared storage failed: %v", partition.ErrNotLeader, o.err))
		return
	}
	runs := live(o.runs)
	if len(runs) == 0 {
		return // an object no chunk names: garbage collection deletes it
	}
	chunks := make([]metastore.SharedChunk, len(runs))
	for i, r := range runs {
		chunks[i] = r.chunk
	}
	ctx, cancel := h.ctx()
	defer cancel()
	errs, err := h.cfg.Catalog.CommitSharedChunks(ctx, metastore.Fence{Broker: h.cfg.NodeID, Incarnation: o.inc}, chunks)
	if err != nil {
		h.cfg.Logger.Warn().Err(err).Str("key", o.key).Msg("committing shared chunks failed")
		fail(runs, fmt.Errorf("%w: commit to the metastore failed: %v", partition.ErrNotLeader, err))
		return
	}
	h.commits.Add(1)
	for i, r := range runs {
		if errs[i] != nil {
			if !errors.Is(errs[i], metastore.ErrFenced) {
				h.cfg.Logger.Warn().Err(errs[i]).Str("topic", r.p.topic).Int32("partition", r.p.key.Index).Msg("shared chunk refused")
			}
			r.p.reset(r.gen, fmt.Errorf("%w: chunk refused by the metastore: %v", partition.ErrNotLeader, errs[i]))
			continue
		}
		// The bytes the writer just uploaded are what its readers ask
		// for next: keep them (a copy, so the cache's byte bound is what
		// it holds, not the whole object behind a slice).
		ch := r.chunk
		h.cache.put(ch, slices.Clone(o.body[ch.Pos:ch.Pos+ch.Len]))
		r.p.committed(ch, r.pds)
	}
}

// live returns the runs whose writer generation still writes. A run
// whose generation ended after the cut (an earlier object of its
// partition failed, or leadership moved) was answered already, and its
// offsets follow offsets that did not commit as far as its producers
// know. The metastore would refuse most such chunks (an older epoch, a
// base offset past the end), but not all: after a commit whose outcome
// was unknown and that did apply, the next run's base offset is the end.
func live(runs []*run) []*run {
	out := make([]*run, 0, len(runs))
	for _, r := range runs {
		if r.p.writing(r.gen) {
			out = append(out, r)
		}
	}
	return out
}

// fail ends the writer generation of each run with err.
func fail(runs []*run, err error) {
	for _, r := range runs {
		r.p.reset(r.gen, err)
	}
}
