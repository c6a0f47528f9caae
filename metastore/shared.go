package metastore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Shared-storage mode (docs/shared-storage.md): a shared-mode partition
// keeps no raft group and no log. Its write leader uploads record batches
// to shared storage and then commits, here, which object holds which
// offsets; a reader of the partition finds the chunk holding an offset by
// a floor lookup over the partition's chunks. The metastore is the
// partition's only authority: its end offset (the high watermark) is the
// end of its last committed chunk, and its write leader is the broker that
// last claimed it, by compare-and-set on the leader epoch, so a deposed
// writer may still upload but never commit.

// isSharedTopic says whether t is a shared-mode topic: replication.mode
// shared in its own configs (pinned when it is created).
func isSharedTopic(t *Topic) bool {
	return strings.EqualFold(t.Configs["replication.mode"], "shared")
}

const (
	opClaimSharedLeader    op = "claim_shared_leader"
	opCommitSharedChunks   op = "commit_shared_chunks"
	opAdvanceSharedStart   op = "advance_shared_start"
	opCondemnSharedObjects op = "condemn_shared_objects"
	opReplaceSharedChunks  op = "replace_shared_chunks"
)

// SharedChunk is one partition's contiguous run of record batches inside
// one object of shared storage.
type SharedChunk struct {
	TopicID   TopicID `json:"t"`
	Partition int32   `json:"p"`
	// LeaderEpoch is the epoch the writer leads the partition in; the
	// commit is refused unless it is the partition's current one.
	LeaderEpoch int32 `json:"e"`
	// BaseOffset and LastOffset are the first and last offsets of the
	// chunk's batches; BaseOffset must be the partition's end offset.
	BaseOffset int64 `json:"b"`
	LastOffset int64 `json:"l"`
	// Key is the object; Pos and Len the chunk's bytes in it.
	Key string `json:"k"`
	Pos int64  `json:"o"`
	Len int64  `json:"n"`
	// MaxTimestamp is the largest timestamp in the chunk's batches.
	MaxTimestamp int64 `json:"ts,omitempty"`
	// Txns is the chunk's transaction summary, opaque here (package
	// shared writes and reads it): the transactions open at the chunk's
	// end and those its ABORT markers closed; empty when there are none.
	Txns string `json:"x,omitempty"`
}

// SharedPartition is what the metastore holds for one shared-mode
// partition: its end offset (the high watermark) and the chunks asked for.
type SharedPartition struct {
	// StartOffset is the first offset still held, EndOffset the offset
	// after the last committed chunk (0 and 0 before any commit).
	StartOffset int64 `json:"s"`
	EndOffset   int64 `json:"e"`
	// Chunks are in offset order, from the one holding the offset asked
	// for (the floor entry), at most as many as asked for.
	Chunks []SharedChunk `json:"c,omitempty"`
}

// Schema (schema.go):
//
//	shared_chunks topic id (16 bytes) partition(u32) base offset(u64) -> JSON SharedChunk
//	shared_ends   topic id (16 bytes) partition(u32) -> u64 end offset
func sharedPartKey(id TopicID, partition int32) []byte {
	return shareStateKey(id, partition)
}

func sharedChunkKey(id TopicID, partition int32, base int64) []byte {
	return binary.BigEndian.AppendUint64(sharedPartKey(id, partition), uint64(base))
}

// claimSharedLeader makes c.BrokerID, registered with incarnation c.Inc
// and a voter of the partition, its write leader in epoch c.Epoch+1,
// provided c.Epoch is the current epoch (compare-and-set: of two brokers
// claiming the same epoch, one wins and the other gets ErrFenced). The
// result's Int is the new epoch.
func (a *applier) claimSharedLeader(c *command) result {
	t, ok := a.topicByName(c.Name)
	if !ok || c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
		return result{Err: errCode(ErrUnknownTopic)}
	}
	p := &t.Partitions[c.Partition]
	if b, ok := a.broker(c.BrokerID); !ok || b.Incarnation != c.Inc {
		return result{Err: errCode(ErrFenced)}
	}
	if !slices.Contains(p.Voters, c.BrokerID) {
		return result{Err: errCode(fmt.Errorf("%w: broker %d is not a write replica of %s-%d", ErrInvalidRequest, c.BrokerID, c.Name, c.Partition))}
	}
	if p.LeaderEpoch != c.Epoch {
		return result{Err: errCode(ErrFenced)}
	}
	p.Leader, p.LeaderEpoch, p.ISR = c.BrokerID, c.Epoch+1, nil
	a.putTopic(t)
	return result{Int: int64(p.LeaderEpoch), Visible: true}
}

// commitSharedChunks applies each chunk of c.Chunks on its own: a chunk
// whose partition is unknown (ErrUnknownTopic), whose leader epoch is not
// the partition's current one or whose writer (c.BrokerID, registered
// with c.Inc) is not its leader (ErrFenced), or whose base offset is not
// the partition's end offset (ErrInvalidRequest) is refused; the others
// are stored and move their partition's end offset past them. The
// result's Errs holds one code per chunk, "" for a committed one.
func (a *applier) commitSharedChunks(c *command) result {
	if b, ok := a.broker(c.BrokerID); !ok || b.Incarnation != c.Inc {
		return result{Err: errCode(ErrFenced)}
	}
	chunks := a.tx.Bucket(bucketSharedChunks)
	ends := a.tx.Bucket(bucketSharedEnds)
	topics := map[TopicID]*Topic{}
	errs := make([]string, len(c.Chunks))
	for i, ch := range c.Chunks {
		t, ok := topics[ch.TopicID]
		if !ok {
			if t, ok = a.topicByID(ch.TopicID); ok {
				topics[ch.TopicID] = t
			}
		}
		if !ok || ch.Partition < 0 || int(ch.Partition) >= len(t.Partitions) {
			errs[i] = errCode(ErrUnknownTopic)
			continue
		}
		p := t.Partitions[ch.Partition]
		if ch.LeaderEpoch != p.LeaderEpoch || c.BrokerID != p.Leader {
			errs[i] = errCode(ErrFenced)
			continue
		}
		if a.condemned(ch.Key) {
			// Garbage collection or retention condemned the object:
			// it may be gone already, so it is never referenced.
			errs[i] = errCode(fmt.Errorf("%w: object %s was condemned", ErrFenced, ch.Key))
			continue
		}
		pk := sharedPartKey(ch.TopicID, ch.Partition)
		end, start := sharedOffsets(ends.Get(pk))
		if ch.BaseOffset != end || ch.LastOffset < ch.BaseOffset || ch.Len <= 0 || ch.Pos < 0 || ch.Key == "" {
			errs[i] = errCode(fmt.Errorf("%w: chunk %d..%d of %s-%d, end offset %d", ErrInvalidRequest, ch.BaseOffset, ch.LastOffset, t.Name, ch.Partition, end))
			continue
		}
		a.putSharedChunk(chunks, ch)
		a.put(ends, pk, sharedOffsetsValue(ch.LastOffset+1, start))
	}
	return result{Errs: errs}
}

// sharedOffsets decodes a shared_ends value: the end offset, then the
// start offset a retention or DeleteRecords stored (-1 when none did: the
// start is then the first chunk's base offset, or 0).
func sharedOffsets(v []byte) (end, start int64) {
	if len(v) == 16 {
		return int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
	}
	return int64(getU64(v)), -1
}

func sharedOffsetsValue(end, start int64) []byte {
	if start < 0 {
		return u64(uint64(end))
	}
	return binary.BigEndian.AppendUint64(u64(uint64(end)), uint64(start))
}

// sharedObjectWriter splits an object key of shared storage,
// "data/<node>/<incarnation>/<sequence>" (a broker's uploads) or
// "data/<node>/<incarnation>-c/<sequence>" (its compactor's merged
// objects, a sequence of their own), into its writer's prefix and its
// sequence; ok is false for any other key.
func sharedObjectWriter(key string) (writer string, seq uint64, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "data" {
		return "", 0, false
	}
	for i, p := range parts[1:3] {
		if i == 1 {
			p = strings.TrimSuffix(p, "-c")
		}
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return "", 0, false
		}
	}
	seq, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return strings.Join(parts[:3], "/"), seq, true
}

// condemned says whether object key is at or below its writer's
// condemned sequence.
func (a *applier) condemned(key string) bool {
	w, seq, ok := sharedObjectWriter(key)
	if !ok {
		return false
	}
	v := a.tx.Bucket(bucketSharedFence).Get([]byte(w))
	return v != nil && seq <= getU64(v)
}

// advanceSharedStart moves the start offset of partition c.TopicID /
// c.Partition to c.Count (retention, DeleteRecords), provided c.BrokerID,
// registered with c.Inc, is its write leader in epoch c.Epoch (ErrFenced
// otherwise: compare-and-set on the epoch, as a commit). An offset past
// the end offset is ErrInvalidRequest; one at or below the start
// changes nothing. The chunk entries wholly below the new start are
// dropped (a chunk holding the start stays). The result's Int is the
// start afterwards and its Keys the objects of the dropped chunks, which
// the caller offers to condemn_shared_objects.
func (a *applier) advanceSharedStart(c *command) result {
	if b, ok := a.broker(c.BrokerID); !ok || b.Incarnation != c.Inc {
		return result{Err: errCode(ErrFenced)}
	}
	if c.TopicID == nil {
		return result{Err: errCode(ErrInvalidRequest)}
	}
	t, ok := a.topicByID(*c.TopicID)
	if !ok || c.Partition < 0 || int(c.Partition) >= len(t.Partitions) {
		return result{Err: errCode(ErrUnknownTopic)}
	}
	p := t.Partitions[c.Partition]
	if c.Epoch != p.LeaderEpoch || c.BrokerID != p.Leader {
		return result{Err: errCode(ErrFenced)}
	}
	ends := a.tx.Bucket(bucketSharedEnds)
	pk := sharedPartKey(*c.TopicID, c.Partition)
	end, stored := sharedOffsets(ends.Get(pk))
	cur := a.tx.Bucket(bucketSharedChunks).Cursor()
	start := max(stored, 0)
	if k, _ := cur.Seek(pk); k != nil && bytes.HasPrefix(k, pk) {
		start = max(start, int64(binary.BigEndian.Uint64(k[len(pk):])))
	}
	if c.Count > end {
		return result{Err: errCode(fmt.Errorf("%w: offset %d past the end offset %d of %s-%d", ErrInvalidRequest, c.Count, end, t.Name, c.Partition))}
	}
	if c.Count <= start {
		return result{Int: start}
	}
	var drop []SharedChunk
	var keys []string
	for k, v := cur.Seek(pk); k != nil && bytes.HasPrefix(k, pk); k, v = cur.Next() {
		var ch SharedChunk
		mustUnmarshal(v, &ch)
		if ch.LastOffset >= c.Count {
			break
		}
		drop = append(drop, ch)
		if !slices.Contains(keys, ch.Key) {
			keys = append(keys, ch.Key)
		}
	}
	chunks := a.tx.Bucket(bucketSharedChunks)
	for _, ch := range drop {
		a.delSharedChunk(chunks, ch)
	}
	a.put(ends, pk, sharedOffsetsValue(end, c.Count))
	return result{Int: c.Count, Keys: keys}
}

// condemnSharedObjects answers which of the objects c.Keys no chunk entry
// references, and condemns them: their writers' condemned sequence moves
// up to them, so no commit references them afterwards (a commit naming
// an object at or below it is refused, fenced), and they may be deleted.
// Keys not of the writers' form are left out.
func (a *applier) condemnSharedObjects(c *command) result {
	out := unreferencedObjects(a.tx, c.Keys)
	fence := a.tx.Bucket(bucketSharedFence)
	for _, k := range out {
		w, seq, _ := sharedObjectWriter(k)
		if seq > getU64(fence.Get([]byte(w))) {
			a.put(fence, []byte(w), u64(seq))
		}
	}
	return result{Keys: out}
}

// unreferencedObjects returns, in their order and once each, the keys of
// the writers' form that no chunk entry references: one lookup in the
// reference counts per key.
func unreferencedObjects(tx *bolt.Tx, keys []string) []string {
	refs := tx.Bucket(bucketSharedRefs)
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if _, _, ok := sharedObjectWriter(k); !ok || seen[k] {
			continue
		}
		seen[k] = true
		if refs.Get([]byte(k)) == nil {
			out = append(out, k)
		}
	}
	return out
}

// putSharedChunk stores chunk entry ch and counts the reference to its
// object (replacing an entry at the same base offset drops that one's).
func (a *applier) putSharedChunk(b *bolt.Bucket, ch SharedChunk) {
	k := sharedChunkKey(ch.TopicID, ch.Partition, ch.BaseOffset)
	if v := b.Get(k); v != nil {
		var old SharedChunk
		mustUnmarshal(v, &old)
		a.refSharedObject(old.Key, -1)
	}
	a.put(b, k, mustJSON(ch))
	a.refSharedObject(ch.Key, 1)
}

// delSharedChunk drops chunk entry ch and its reference to its object.
func (a *applier) delSharedChunk(b *bolt.Bucket, ch SharedChunk) {
	a.del(b, sharedChunkKey(ch.TopicID, ch.Partition, ch.BaseOffset))
	a.refSharedObject(ch.Key, -1)
}

// refSharedObject adds d to object key's reference count; a count that
// reaches zero is removed.
func (a *applier) refSharedObject(key string, d int64) {
	refs := a.tx.Bucket(bucketSharedRefs)
	n := int64(getU64(refs.Get([]byte(key)))) + d
	if n <= 0 {
		a.del(refs, []byte(key))
		return
	}
	a.put(refs, []byte(key), u64(uint64(n)))
}

// rebuildSharedRefs recomputes the reference counts from the chunk
// entries (a database from before they were kept).
func rebuildSharedRefs(tx *bolt.Tx) error {
	if tx.Bucket(bucketSharedRefs) != nil {
		if err := tx.DeleteBucket(bucketSharedRefs); err != nil {
			return err
		}
	}
	refs, err := tx.CreateBucket(bucketSharedRefs)
	if err != nil {
		return err
	}
	counts := map[string]uint64{}
	if err := tx.Bucket(bucketSharedChunks).ForEach(func(_, v []byte) error {
		var ch SharedChunk
		if err := json.Unmarshal(v, &ch); err != nil {
			return fmt.Errorf("shared chunk entry: %w", err)
		}
		counts[ch.Key]++
		return nil
	}); err != nil {
		return err
	}
	for k, n := range counts {
		if err := refs.Put([]byte(k), u64(n)); err != nil {
			return err
		}
	}
	return nil
}

// deleteSharedTopic drops every chunk entry and end offset of topic id.
// The objects stay in shared storage until garbage collection finds them
// unreferenced.
func (a *applier) deleteSharedTopic(id TopicID) {
	chunks := a.tx.Bucket(bucketSharedChunks)
	var drop []SharedChunk
	cur := chunks.Cursor()
	for k, v := cur.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, v = cur.Next() {
		var ch SharedChunk
		mustUnmarshal(v, &ch)
		drop = append(drop, ch)
	}
	for _, ch := range drop {
		a.delSharedChunk(chunks, ch)
	}
	ends := a.tx.Bucket(bucketSharedEnds)
	var keys [][]byte
	cur = ends.Cursor()
	for k, _ := cur.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, _ = cur.Next() {
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		a.del(ends, k)
	}
}

// replaceSharedChunks swaps the partition's consecutive chunk entries
// c.Replace for the one chunk c.Chunks[0] holding the same offsets (the
// compactor's merged object), all or nothing: refused (ErrFenced) unless
// c.BrokerID, registered with c.Inc, leads the partition in the merged
// chunk's epoch and the merged object was not condemned; refused
// (ErrInvalidRequest) unless every chunk of c.Replace is still stored as
// given, they are consecutive and the merged chunk spans exactly their
// offsets. The old objects lose a reference each; garbage collection
// deletes them once unreferenced and past the grace period.
func (a *applier) replaceSharedChunks(c *command) result {
	if b, ok := a.broker(c.BrokerID); !ok || b.Incarnation != c.Inc {
		return result{Err: errCode(ErrFenced)}
	}
	if len(c.Chunks) != 1 || len(c.Replace) == 0 {
		return result{Err: errCode(fmt.Errorf("%w: a replacement is one chunk for one or more", ErrInvalidRequest))}
	}
	m := c.Chunks[0]
	t, ok := a.topicByID(m.TopicID)
	if !ok || m.Partition < 0 || int(m.Partition) >= len(t.Partitions) {
		return result{Err: errCode(ErrUnknownTopic)}
	}
	p := t.Partitions[m.Partition]
	if m.LeaderEpoch != p.LeaderEpoch || c.BrokerID != p.Leader {
		return result{Err: errCode(ErrFenced)}
	}
	if a.condemned(m.Key) {
		return result{Err: errCode(fmt.Errorf("%w: object %s was condemned", ErrFenced, m.Key))}
	}
	if m.Key == "" || m.Pos < 0 || m.Len <= 0 || m.BaseOffset != c.Replace[0].BaseOffset ||
		m.LastOffset != c.Replace[len(c.Replace)-1].LastOffset {
		return result{Err: errCode(fmt.Errorf("%w: merged chunk %d..%d does not span the chunks it replaces", ErrInvalidRequest, m.BaseOffset, m.LastOffset))}
	}
	chunks := a.tx.Bucket(bucketSharedChunks)
	for i, old := range c.Replace {
		if old.TopicID != m.TopicID || old.Partition != m.Partition ||
			i > 0 && old.BaseOffset != c.Replace[i-1].LastOffset+1 {
			return result{Err: errCode(fmt.Errorf("%w: replaced chunks not consecutive at %d", ErrInvalidRequest, old.BaseOffset))}
		}
		v := chunks.Get(sharedChunkKey(old.TopicID, old.Partition, old.BaseOffset))
		var cur SharedChunk
		if v != nil {
			mustUnmarshal(v, &cur)
		}
		if v == nil || cur != old {
			return result{Err: errCode(fmt.Errorf("%w: chunk %d..%d of %s-%d is no longer stored as read", ErrInvalidRequest, old.BaseOffset, old.LastOffset, t.Name, m.Partition))}
		}
	}
	for _, old := range c.Replace {
		a.delSharedChunk(chunks, old)
	}
	a.putSharedChunk(chunks, m)
	return result{}
}

// readSharedChunks answers "shared_chunks": the partition's offsets and
// up to r.Max chunks (at least one) from the one holding r.From.
func readSharedChunks(tx *bolt.Tx, r *readRequest, resp *Response) error {
	if r.TopicID == nil {
		return ErrInvalidRequest
	}
	pk := sharedPartKey(*r.TopicID, r.Partition)
	end, stored := sharedOffsets(tx.Bucket(bucketSharedEnds).Get(pk))
	sp := &SharedPartition{EndOffset: end, StartOffset: max(stored, 0)}
	cur := tx.Bucket(bucketSharedChunks).Cursor()
	if k, _ := cur.Seek(pk); k != nil && bytes.HasPrefix(k, pk) {
		sp.StartOffset = max(sp.StartOffset, int64(binary.BigEndian.Uint64(k[len(pk):])))
	}
	max := r.Max
	if max <= 0 {
		max = 1
	}
	from := r.From
	if from < sp.StartOffset {
		from = sp.StartOffset
	}
	// The floor entry: the last chunk based at or below from.
	k, v := cur.Seek(sharedChunkKey(*r.TopicID, r.Partition, from))
	if k == nil || !bytes.Equal(k, sharedChunkKey(*r.TopicID, r.Partition, from)) {
		k, v = cur.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, pk) {
		k, v = cur.Seek(pk)
	}
	for ; k != nil && bytes.HasPrefix(k, pk) && len(sp.Chunks) < max; k, v = cur.Next() {
		var ch SharedChunk
		mustUnmarshal(v, &ch)
		if ch.LastOffset < from {
			continue // the floor entry ends before from: from is past the end
		}
		sp.Chunks = append(sp.Chunks, ch)
	}
	resp.Shared = sp
	return nil
}

// ClaimSharedLeader makes broker f.Broker (registered with f.Incarnation)
// the write leader of a shared-mode partition, in the epoch after
// current, and returns that epoch; ErrFenced when current is no longer
// the partition's epoch (another claim won) or the incarnation is stale.
func (c *Client) ClaimSharedLeader(ctx context.Context, f Fence, topic string, partition, current int32) (int32, error) {
	r, err := c.write(ctx, command{Op: opClaimSharedLeader, Name: topic, Partition: partition, Epoch: current,
		BrokerID: f.Broker, Inc: f.Incarnation})
	if err != nil {
		return 0, err
	}
	return int32(r.Int), nil
}

// CommitSharedChunks commits chunks uploaded by broker f.Broker, all in one
// metastore command. The error is for the command (ErrFenced: f's
// incarnation is stale; a timeout: the outcome is unknown); the slice has
// one error per chunk, nil for a committed one (ErrFenced: not the
// partition's leader in that epoch; ErrInvalidRequest: the base offset is
// not the partition's end offset).
func (c *Client) CommitSharedChunks(ctx context.Context, f Fence, chunks []SharedChunk) ([]error, error) {
	r, err := c.write(ctx, command{Op: opCommitSharedChunks, Chunks: chunks, BrokerID: f.Broker, Inc: f.Incarnation})
	if err != nil {
		return nil, err
	}
	if len(r.Errs) != len(chunks) {
		return nil, fmt.Errorf("%w: %d chunk results for %d chunks", ErrInvalidRequest, len(r.Errs), len(chunks))
	}
	out := make([]error, len(chunks))
	for i, e := range r.Errs {
		out[i] = codeErr(e)
	}
	return out, nil
}

// ReplaceSharedChunks swaps a shared-mode partition's consecutive chunks
// old for merged, holding the same offsets in one object, in one
// command: all of them or none (ErrFenced: broker f.Broker no longer
// leads the partition in merged's epoch, or merged's object was
// condemned; ErrInvalidRequest: old are no longer the partition's chunks
// as given, after a retention or another replacement).
func (c *Client) ReplaceSharedChunks(ctx context.Context, f Fence, old []SharedChunk, merged SharedChunk) error {
	_, err := c.write(ctx, command{Op: opReplaceSharedChunks, Chunks: []SharedChunk{merged}, Replace: old,
		BrokerID: f.Broker, Inc: f.Incarnation})
	return err
}

// AdvanceSharedStart moves a shared-mode partition's start offset to
// offset, fenced by the write leadership of broker f.Broker in epoch
// (ErrFenced when another claim or a new incarnation came since; an
// offset past the end is ErrInvalidRequest). It returns the start
// afterwards and the objects whose chunks it dropped, for
// CondemnSharedObjects.
func (c *Client) AdvanceSharedStart(ctx context.Context, f Fence, topic TopicID, partition, epoch int32, offset int64) (int64, []string, error) {
	r, err := c.write(ctx, command{Op: opAdvanceSharedStart, TopicID: &topic, Partition: partition, Epoch: epoch,
		Count: offset, BrokerID: f.Broker, Inc: f.Incarnation})
	if err != nil {
		return 0, nil, err
	}
	return r.Int, r.Keys, nil
}

// CondemnSharedObjects returns which of the objects keys no chunk entry
// references and makes sure none ever will (a commit naming one is
// refused): those may be deleted from shared storage.
func (c *Client) CondemnSharedObjects(ctx context.Context, keys []string) ([]string, error) {
	r, err := c.write(ctx, command{Op: opCondemnSharedObjects, Keys: keys})
	if err != nil {
		return nil, err
	}
	return r.Keys, nil
}

// UnreferencedSharedObjects reads linearizably which of the objects keys
// no chunk entry references now (without condemning them: one may be
// committed right after; CondemnSharedObjects decides).
func (c *Client) UnreferencedSharedObjects(ctx context.Context, keys []string) ([]string, error) {
	resp, err := c.read(ctx, &readRequest{What: "shared_unreferenced", Keys: keys})
	if err != nil {
		return nil, err
	}
	return resp.Keys, nil
}

// SharedChunks reads a shared-mode partition linearizably: its start and
// end offsets and up to max chunks (at least one) from the one holding
// offset from (the floor entry; none when from is at or past the end).
func (c *Client) SharedChunks(ctx context.Context, topic TopicID, partition int32, from int64, max int) (SharedPartition, error) {
	resp, err := c.read(ctx, &readRequest{What: "shared_chunks", TopicID: &topic, Partition: partition, From: from, Max: max})
	if err != nil {
		return SharedPartition{}, err
	}
	if resp.Shared == nil {
		return SharedPartition{}, nil
	}
	return *resp.Shared, nil
}
