package shared

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/log"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/partition"
)

// Transactions on shared partitions (KIP-98), by the log's rules
// (log.TxnTracker: the update a Log applies to every batch it stores).
//
// The writer keeps two trackers: one of every batch it accepted (for
// InOpenTxn and DescribeProducers), and one of the batches it cut into
// objects so far, from which each chunk entry gets its transaction
// summary (metastore.SharedChunk.Txns): the transactions open at the
// chunk's end and the aborted transactions whose ABORT marker the chunk
// holds. Every broker, writer or not, answers from the committed chunk
// entries alone, without reading objects: the last stable offset is the
// first offset of the earliest transaction open at the end of the last
// committed chunk (the high watermark without one), and the aborted
// transactions of a fetch are those of the chunks from the one holding
// its first offset on, until every transaction open at the fetch's end
// was closed. A new writer (a claim after a failover or a restart) takes
// the open transactions from the last chunk, so an open transaction is
// never lost however old it is; only the producer table is rebuilt from
// the tail (rebuildOffsets).

// txnSummary is what one chunk entry says about transactions.
type txnSummary struct {
	open    []log.OpenTxn
	aborted []partition.AbortedTxn
}

// encode is the Txns string of a chunk entry: "o" then producer:first
// pairs, "a" then producer:first:last triples, each list ";"-separated;
// empty for a chunk with neither.
func (s txnSummary) encode() string {
	if len(s.open) == 0 && len(s.aborted) == 0 {
		return ""
	}
	var b strings.Builder
	for i, o := range s.open {
		if i == 0 {
			b.WriteString("o")
		} else {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d:%d", o.ProducerID, o.FirstOffset)
	}
	b.WriteString(";")
	for i, a := range s.aborted {
		if i == 0 {
			b.WriteString("a")
		} else {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d:%d:%d", a.ProducerID, a.FirstOffset, a.LastOffset)
	}
	return b.String()
}

// decodeTxns reads a chunk entry's Txns.
func decodeTxns(v string) (txnSummary, error) {
	var s txnSummary
	if v == "" {
		return s, nil
	}
	open, aborted, ok := strings.Cut(v, ";")
	if !ok {
		return s, fmt.Errorf("%w: transaction summary %q", partition.ErrCorrupt, v)
	}
	nums := func(list, prefix string, n int, fn func([]int64)) error {
		if list == "" {
			return nil
		}
		rest, ok := strings.CutPrefix(list, prefix)
		if !ok {
			return fmt.Errorf("%w: transaction summary %q", partition.ErrCorrupt, v)
		}
		for _, item := range strings.Split(rest, ",") {
			parts := strings.Split(item, ":")
			if len(parts) != n {
				return fmt.Errorf("%w: transaction summary %q", partition.ErrCorrupt, v)
			}
			xs := make([]int64, n)
			for i, p := range parts {
				x, err := strconv.ParseInt(p, 10, 64)
				if err != nil {
					return fmt.Errorf("%w: transaction summary %q", partition.ErrCorrupt, v)
				}
				xs[i] = x
			}
			fn(xs)
		}
		return nil
	}
	if err := nums(open, "o", 2, func(x []int64) {
		s.open = append(s.open, log.OpenTxn{ProducerID: x[0], FirstOffset: x[1]})
	}); err != nil {
		return txnSummary{}, err
	}
	if err := nums(aborted, "a", 3, func(x []int64) {
		s.aborted = append(s.aborted, partition.AbortedTxn{ProducerID: x[0], FirstOffset: x[1], LastOffset: x[2]})
	}); err != nil {
		return txnSummary{}, err
	}
	return s, nil
}

// mergeTxns is the summary of consecutive chunks merged into one (the
// compactor): every aborted transaction of theirs, and what was open at
// the end of the last.
func mergeTxns(run []metastore.SharedChunk) (string, error) {
	var m txnSummary
	for i, ch := range run {
		s, err := decodeTxns(ch.Txns)
		if err != nil {
			return "", err
		}
		m.aborted = append(m.aborted, s.aborted...)
		if i == len(run)-1 {
			m.open = s.open
		}
	}
	return m.encode(), nil
}

// cutTxnsLocked applies the batches of one chunk to the writer's cut
// tracker and returns the chunk's summary; "" when pds belong to an
// ended writer generation (their commit fails anyway). Under wmu.
func (p *Partition) cutTxnsLocked(pds []*pending) string {
	if p.cutTxns == nil || pds[0].gen != p.gen {
		return ""
	}
	var s txnSummary
	for _, pd := range pds {
		if !pd.txn {
			continue
		}
		if a, ok := p.cutTxns.Apply(pd.batch, &pd.hd); ok {
			s.aborted = append(s.aborted, a)
		}
	}
	s.open = p.cutTxns.OpenTxns()
	return s.encode()
}

// openAtEnd reads the transactions open at the partition's committed end
// from its last chunk entry (none when no chunk is left: retention
// dropped them all).
func (p *Partition) openAtEnd(ctx context.Context, sp metastore.SharedPartition) ([]log.OpenTxn, error) {
	if sp.EndOffset <= sp.StartOffset {
		return nil, nil
	}
	last, err := p.h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, sp.EndOffset-1, 1)
	if err != nil {
		return nil, err
	}
	if len(last.Chunks) == 0 {
		return nil, nil
	}
	s, err := decodeTxns(last.Chunks[0].Txns)
	return s.open, err
}

// LastStableOffset is the first offset of the earliest transaction open
// at the end of the last committed chunk, the high watermark without one.
// When the chunk entry cannot be read, the last answer stands.
func (p *Partition) LastStableOffset() int64 {
	hw := p.HighWatermark()
	p.mu.Lock()
	if p.lsoAt == hw {
		lso := p.lso
		p.mu.Unlock()
		return lso
	}
	start, prev := p.start, p.lso
	p.mu.Unlock()
	if hw <= start {
		return hw
	}
	ch, err := p.lastChunk(hw)
	if err != nil {
		return min(prev, hw)
	}
	s, err := decodeTxns(ch.Txns)
	if err != nil {
		return min(prev, hw)
	}
	lso := hw
	if fu := log.NewTxnTracker(s.open).FirstUnstable(); fu >= 0 {
		lso = min(fu, hw)
	}
	p.mu.Lock()
	if hw >= p.lsoAt {
		p.lso, p.lsoAt = lso, hw
	}
	p.mu.Unlock()
	return lso
}

// lastChunk returns the chunk ending at hw (the last committed one), from
// the known chunks or the metastore. A chunk looked up is added to the
// known ones only when it extends them (a tailing reader), so that the
// window of a reader deep in the history is not moved to the tail.
func (p *Partition) lastChunk(hw int64) (metastore.SharedChunk, error) {
	p.mu.Lock()
	ch, ok := p.floorLocked(hw - 1)
	p.mu.Unlock()
	if ok {
		return ch, nil
	}
	ctx, cancel := p.h.ctx()
	defer cancel()
	sp, err := p.h.cfg.Catalog.SharedChunks(ctx, p.key.TopicID, p.key.Index, hw-1, 1)
	if err != nil {
		return metastore.SharedChunk{}, err
	}
	if len(sp.Chunks) == 0 || sp.Chunks[0].LastOffset < hw-1 {
		return metastore.SharedChunk{}, partition.ErrOffsetOutOfRange
	}
	ch = sp.Chunks[0]
	p.mu.Lock()
	if n := len(p.chunks); n == 0 || p.chunks[n-1].LastOffset+1 == ch.BaseOffset {
		p.addChunksLocked([]metastore.SharedChunk{ch})
	}
	p.mu.Unlock()
	return ch, nil
}

// AbortedTxns lists the aborted transactions a read_committed fetch of
// [from, upTo) must be told about, from the committed chunk entries: the
// chunks from the one holding from, and after the one holding upTo-1 as
// long as a transaction open there that began below upTo is still open.
func (p *Partition) AbortedTxns(from, upTo int64) []partition.AbortedTxn {
	hw := p.HighWatermark()
	ctx, cancel := p.h.ctx()
	defer cancel()
	var out []partition.AbortedTxn
	var waiting []log.OpenTxn // open past upTo, begun below it
	past := false
	for off := max(from, p.LogStartOffset()); off < hw; {
		ch, err := p.chunkAt(ctx, off)
		if err != nil {
			p.h.cfg.Logger.Warn().Err(err).Str("topic", p.topic).Int32("partition", p.key.Index).
				Int64("offset", off).Msg("reading aborted transactions")
			break
		}
		s, err := decodeTxns(ch.Txns)
		if err != nil {
			p.h.cfg.Logger.Warn().Err(err).Str("topic", p.topic).Int32("partition", p.key.Index).Msg("reading aborted transactions")
			break
		}
		for _, a := range s.aborted {
			if log.AbortedInRange(a, from, upTo) {
				out = append(out, a)
			}
		}
		if past {
			waiting = slices.DeleteFunc(waiting, func(w log.OpenTxn) bool { return !slices.Contains(s.open, w) })
		} else if ch.LastOffset+1 >= upTo {
			past = true
			for _, o := range s.open {
				if o.FirstOffset < upTo {
					waiting = append(waiting, o)
				}
			}
		}
		if past && len(waiting) == 0 {
			break
		}
		off = ch.LastOffset + 1
	}
	return out
}

// InOpenTxn: on the writer, whether an accepted batch of the producer
// opened a transaction not closed by an accepted marker since.
func (p *Partition) InOpenTxn(producerID int64) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.txns == nil {
		return false
	}
	_, ok := p.txns.Open(producerID)
	return ok
}
