/*
Package log stores the record batches of one Kafka partition in one
directory, in Kafka's on-disk layout, and makes them durable through a
broker-wide group-commit Flusher, which with FlusherConfig.Dir keeps one
write-ahead log (WAL) for every partition of the broker.

# Usage

One Flusher per broker, one Log per partition:

	f, err := log.OpenFlusher(log.FlusherConfig{
		Policy: log.FlushGroup, Logger: lg,
		Dir: filepath.Join(dataDir, "wal"), // the broker-wide WAL; "" for none
	})
	// err: the WAL directory could not be opened or scanned (also
	// f.Err(), and every Open with f fails with it).
	f.Start()
	defer f.Close() // after every Log is closed, so the WAL ends empty

	// ... open every partition this broker hosts, then:
	f.ForgetUnopened() // WAL records of logs not opened (deleted topics)

	l, err := log.Open(dir, cfg, log.Options{Logger: lg, Flusher: f})
	// err: the directory could not be recovered; do not serve the partition.

	res, err := l.Append(batch)       // leader: assigns offsets in place
	err = l.WaitDurable(ctx, res.LastOffset+1) // acks=all: wait for the sync
	rr, err := l.Read(fetchOffset, maxBytes, highWatermark)
	fr, err := l.ReadRange(fetchOffset, maxBytes, highWatermark) // Fetch: same batches,
	defer fr.Range.Release()                                     // as a file range

Append takes exactly one v2 record batch whose framing and CRC the caller
has already checked, and whose partitionLeaderEpoch (bytes 12..16, outside the
CRC) the caller has stamped. It patches the batch's baseOffset (bytes 0..8,
also outside the CRC) with the log end offset and writes the bytes unchanged
otherwise, so every replica stores identical bytes. For LogAppendTime topics
the caller sets maxTimestamp and recomputes the CRC before Append. A follower
uses AppendReplicated, whose base offset must already equal the log end
offset. Append never waits for the disk; WaitDurable does.

Every method is safe for concurrent use. Appends to one log are serialised;
Read, OffsetForTimestamp and friends run in parallel with each other and hold
the log's read lock across their preads, so an append waits for them (and
they for it) only for the length of a page-cache copy; a segment roll holds
the write lock across the old segment's fdatasync. Data returned by Read is a
fresh buffer the caller owns. Append does not keep its argument.
ReadRange selects the same batches as Read but returns a range of the
segment file, which holds a reference on the open file until Release:
retention, truncation or Close may drop the segment meanwhile and the
range's bytes stay readable (the file is closed when its last holder lets
go), so a Fetch can send them with sendfile after the lock is released.

Locks: wal.syncMu (one WAL round at a time) before Log.syncMu (held
across a sync of the active segment, and by anything that closes or
removes files) before Log.mu before wal.mu; wal.mu is never held while a
Log lock is taken; Flusher.mu is never held while a Log lock is taken or
the other way round.

Errors: ErrOutOfOrderSequence, ErrInvalidProducerEpoch, ErrCorrupt,
ErrBatchTooLarge and ErrOffsetMismatch reject one call; ErrOffsetOutOfRange
answers a read; ErrClosed after Close; ErrLocked from Open when another
open Log (in this or another process) holds the directory's flock. Any failed write, fsync, truncate or
file creation is fatal: the log records the first such error and returns an
error wrapping ErrFatal and the cause from every later call (logged once at
error level). Nothing is retried, because after a failed fsync the state of
the page cache is unknown. The partition is then offline on this broker
until a restart recovers the log from its files; the broker's other
partitions go on.

A full file system is the exception (nospace.go): a write (segment batch,
index entry, a roll's final time index entry or new files) that fails with
ENOSPC or EDQUOT, however much of it reached the file, is cut back to the
last whole batch (segment and both index files truncated, in-memory state
restored) and returned as ErrNoSpace, which rejects that call only: reads go
on and the next append after space is freed continues at the same offset.
If the cut itself fails the log fails with ErrFatal. A failed fsync stays
ErrFatal whatever its errno, ENOSPC included. With the WAL, a round whose
write finds the disk full cuts the WAL file back to its last record and
syncs the segments that hold the round's batches instead (see below).
Close on a full disk leaves out the clean shutdown marker; DeleteRecords
that cannot persist the log start offset changes nothing.

# On-disk format

A partition directory holds, for each segment, three files named by the
segment's base offset as 20 decimal digits:

	00000000000000000000.log        record batches
	00000000000000000000.index      offset index
	00000000000000000000.timeindex  time index
	00000000000000004711.log        next segment, base offset 4711
	...
	log-start-offset                only after DeleteRecords: "0\n<offset>\n"
	.clean-shutdown                 only between a clean Close and the next
	                                Open: a snapshot of the log's state
	log-id                          the log's name in the WAL and its
	                                truncation epoch (see below)
	cleaner-offset-checkpoint       only for compacted logs: "0\n<offset>\n",
	                                where the next cleaning pass starts
	00000000000000000000.log.cleaned,
	00000000000000000000.log.swap   only while a cleaned segment is swapped
	                                in (see Compaction)

A .log file is a sequence of Kafka v2 record batches exactly as on the wire,
with absolute offsets, big-endian:

	baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
	magic int8 (2) | crc uint32 (CRC-32C of attributes..end) |
	attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
	maxTimestamp int64 | producerId int64 | producerEpoch int16 |
	baseSequence int32 | recordCount int32 | records

batchLength counts the bytes after itself, so a batch is batchLength+12
bytes. Only the 61-byte header is parsed on the hot path
(protocol.BatchHeader.Decode, the broker's one header codec, plus this
package's offset rules in parseHeader); records are decoded only by
OffsetForTimestamp and MaxTimestamp, inside one uncompressed batch.

The .index file is a sparse offset index of 8-byte entries, relative offset
uint32 | file position uint32, where the relative offset is the indexed
batch's last offset minus the segment's base offset. An entry is written for
a batch when more than index.interval.bytes were appended since the previous
entry (Kafka's LogSegment.append rule). Lookups find the last entry whose
offset is <= the target and scan batch headers from its position.

The .timeindex file holds 12-byte entries, timestamp int64 | relative
offset uint32: the largest batch maxTimestamp seen so far and the last offset
of the batch that first reached it, written at the same points as offset
index entries when the timestamp grew, plus one final entry when the segment
stops being active or the log is closed. Both index files are exactly as long
as their entries (Kafka preallocates and trims; its readers accept either).

A segment rolls before a batch that would make it larger than segment.bytes,
when the batch's max timestamp is more than segment.ms after the segment's
first batch's (the wall clock if batches have no timestamps), when an index
is full (segment.index.bytes), or when relative offsets would overflow.

The log-id file is written (temporary file, fsync, rename, directory
fsync) when a directory is first opened and by every TruncateTo:

	"SLID" | version uint16 (1) | crc uint32 (CRC-32C of the rest) |
	id [16]byte (random) | truncation epoch uint32

Open fails on a damaged log-id (ErrCorrupt) rather than guess: a new id
would skip acknowledged WAL records, a lost epoch could replay truncated
ones.

The WAL directory (FlusherConfig.Dir, one per broker, outside every
partition directory) holds files named by a sequence number:

	00000000000000000001.wal
	00000000000000000002.wal ...

	header: "SLWL" | version uint16 (1) | reserved uint16 | seq uint64 |
	        crc uint32 (CRC-32C of the 16 bytes before it)
	record: length uint32 (of the payload) |
	        crc uint32 (CRC-32C of the length field and the payload) |
	        payload: kind uint8 (1, a batch) | log id [16]byte |
	                 truncation epoch uint32 | base offset int64 |
	                 the batch exactly as written to the segment

A record is valid only if its length fits the file, its CRC matches, its
kind is 1 and its batch has a sane v2 header whose length is the rest of
the payload and whose base offset is the record's. Files are created with
O_EXCL, their header fdatasynced and the directory synced before any record
is written to them, and are never written again by a later process: a
restart starts a new file.

# Durability and recovery

Appends write to the page cache. A segment that stops being active is
fdatasynced with its indexes before the next segment file is created (and the
directory synced), so at any time only the last segment can hold unsynced
bytes. WaitDurable(ctx, off) returns when every offset below off is durable,
either in the WAL or in synced segment files; DurableOffset says how far
that is. Index files are never needed for durability because Open rebuilds
them.

Without a WAL (FlusherConfig.Dir empty, or no Flusher) the Flusher (or,
without one, the waiter itself) fdatasyncs the active segment of each dirty
log. With a WAL (design (b) below):

  - Append and AppendReplicated write the batch to the segment (page cache,
    no fsync) and then, under the log's lock, append a record to the WAL's
    in-memory buffer, so one log's records are in offset order.
  - A round (FlushGroup: as soon as there is anything buffered; FlushInterval:
    every Interval, or early once 4 MiB are buffered) takes the whole buffer,
    writes it to the active WAL file and fdatasyncs that file once, then
    advances the durable offset of every log that had records in it:
    waiters whose append reached the buffer before the round began are
    released by it, later ones by the next round. One fdatasync covers every
    partition's appends. Appenders block once 64 MiB wait for a round.
  - When the active file passes WALFileBytes (64 MiB) after a round, it is
    sealed and a new one started. A background checkpointer fdatasyncs the
    active segment of every log with records in a sealed file; a file is
    deleted once every such log has synced its segment past its last
    record there (a roll, Close, TruncateTo or a checkpoint does that). If
    more than two sealed files still wait, the round that rotates
    checkpoints inline. WAL disk use is therefore bounded by about
    4 x WALFileBytes plus one round's buffer (at most 64 MiB more), plus
    the files an earlier process left until the logs they hold records
    for are opened or ForgetUnopened is called.
  - A failed WAL write, fdatasync or file creation fails every log that uses
    the WAL (sticky ErrFatal), like a failed segment sync fails its log.
    Except on a full disk: a round whose write fails with ENOSPC truncates
    the WAL file back to its last whole record and makes the round durable
    by syncing its logs' segments, which already hold every batch of it
    (a checkpoint); waiters are released as usual and the WAL takes the
    next round. A new WAL file that cannot be created on a full disk is
    removed and the active one stays in use until the next rotation.
  - Flusher.Close runs a last round, stops taking WAL records and deletes
    the WAL files nothing needs; logs still open then append to their
    segments only and sync them as without a WAL.
  - FlushNever writes no WAL; a Flusher with Dir and FlushNever still
    replays the WAL files an earlier run left.

WAL recovery. NewFlusher scans the WAL files in sequence order, each up to
its first invalid record (a torn tail in the last file: a warning; damage in
an earlier file: an error, and that file's later records are lost; files
with no valid record are deleted), and indexes the records by log id. When
a Log opens it first recovers its segments as described below, then
replays its records: those of its current truncation epoch, in WAL order,
skipping those that end at or below the log end offset, appending the one
whose base offset equals the log end offset, and so on while each continues
the last. A record that would leave a gap or straddles the log end offset
stops replay (an error in the log: it cannot follow from a crash). The
replayed batches are appended exactly as an append would (producer state,
leader epochs and indexes follow) and the segment is synced before Open
returns; only then may the files holding those records go. So every batch
a WAL round made durable is back in the segment after a crash, byte for
byte, even if the segment's page cache was lost.

A log's WAL identity is the random id in its log-id file: a topic deleted
and created again gets a new directory and a new id, so it never receives
the old incarnation's records; records of a log that is never opened again
are dropped when Flusher.ForgetUnopened is called (the WAL file holding
them is then deleted). TruncateTo first syncs the active segment (every
batch the WAL made durable is then in a synced segment), then persists the
next truncation epoch in log-id, and only then cuts: replay takes only
records of the current epoch, so nothing written before a truncation can
come back, and a crash between the epoch and the cut leaves the whole
synced log for the caller to truncate again. Retention and DeleteRecords
only remove batches below the log end offset, which replay never touches.

Close syncs the active segment and its indexes, then writes .clean-shutdown
(temporary file, fsync, rename, directory fsync) holding a snapshot:

	"SLCS" | version uint16 (4) | crc uint32 (CRC-32C of the rest)
	segments uint32, each: base, size, next, firstBatchMaxTs, maxTs,
	                       maxTsBase, maxTsLast int64
	epochs uint32, each:   epoch int32 | start int64
	producers uint32, each: id int64 | epoch int16 | coordinator epoch int32 |
	                       last timestamp int64 | batches uint8, each:
	                       firstSeq, lastSeq int32 | firstOffset, lastOffset int64
	open txns uint32, each: producer id int64 | first offset int64
	aborted uint32, each:  producer id, first offset, marker offset int64

Open removes index files without a segment and temporary files. If
.clean-shutdown is there, its CRC is right, it lists exactly the segment
files present with their current sizes, and the index files pass shape
checks, Open takes segment statistics, producer state and leader epochs from
it and reads no batch (Kafka's clean-shutdown path with its producer .snapshot
and leader-epoch-checkpoint files). Otherwise the shutdown counts as unclean:
Open walks every segment batch by batch. Each batch must have a sane length
that fits the file, magic 2, a record count no larger than lastOffsetDelta+1,
and a base offset not below the end of the previous batch and segment; the
last segment's CRCs are checked too. At the first batch that fails, the
segment is truncated there and every later segment deleted (one warning with
the bytes dropped); every whole valid batch before it is kept. A segment
whose base offset lies past the end of the one before it, in a log that is
not compacted and has no cleaner checkpoint, means a segment was lost: it
and every later segment are deleted the same way (an error logged), rather
than serve a gap; in a compacted log such a gap is one the cleaner made. Index files
that differ in any way from what the walk rebuilds are rewritten. Producer
state and the leader epoch cache are rebuilt from the headers of the same
walk, and the last segment is synced once, so everything the previous
process wrote is durable before anything new is acknowledged on top of it.
Either way .clean-shutdown is removed (and the directory synced) before Open
returns. The snapshot only saves time: correctness never depends on it.

# Idempotence

For batches with producerId >= 0 the log keeps, per producer, the epoch and
the last five batches' first/last sequence and offsets, and applies Kafka 4's
ProducerAppendInfo rules (ProducerEntry.Check, exported so that package
replica applies the same code before proposing): a retry of one of the last
five batches of the current epoch is a duplicate, answered with its original
offsets and not written; an older epoch is ErrInvalidProducerEpoch; a newer
epoch must start at sequence 0; the same epoch must continue at last+1
(wrapping at MaxInt32); a producer the log holds nothing for is accepted at
any sequence (KIP-360). Control batches (transaction markers) only check
and bump the epochs, by Kafka's appendEndTxnMarker: the marker's producer
epoch must be at least the producer's (above it when the coordinator sent
the marker with transaction version 2, AppendMarker: EndTxn bumped the
epoch for it; equal is then taken only as the retry of the marker that
bumped it, when no batch of the producer is stored at that epoch since, or
at epoch 32767: Kafka 4.4's idempotent marker retry), else
ErrInvalidProducerEpoch; and its coordinator epoch
(the marker value's) at least that of the producer's last marker here,
else ErrCoordinatorFenced: a zombie coordinator's late marker must not end
a later transaction of the producer. The last marker's coordinator epoch
is kept per producer (in the snapshot, rebuilt from the markers after a
crash; DescribeProducers reports it).

Transactions (txn.go): from the transactional batches it stores, in log
order, the log keeps the first offset of each producer's open transaction
and the aborted transactions (producer, first offset, ABORT marker
offset), the content of Kafka's .txnindex. A marker's type is read from
its first record. FirstUnstableOffset bounds the last stable offset the
replica layer reports; AbortedTxns answers a read_committed fetch. Both
follow TruncateTo, are in the clean-shutdown snapshot (version 4; an
older snapshot is not used and the log is walked instead) and are
rebuilt from the log after a crash.
Replicated batches update the state without checks, so every replica dedupes
alike. The state comes from the clean-shutdown snapshot, or is rebuilt from batch
headers after a crash and after TruncateTo.

Producer expiry (Kafka's producer.id.expiration.ms): each entry keeps the
max timestamp of the producer's last batch, data or marker
(ProducerEntry.LastTimestamp, in the snapshot and rebuilt from the headers
like the rest). ProducerEntry.Expired is the rule, Kafka's
isProducerExpired: no transaction open here and now - last timestamp >=
the expiration. ExpireProducers drops such entries; the caller runs it
periodically (producer.id.expiration.check.interval.ms) with its own
clock, and after Open, so that a producer expired before a restart, whose
entry the snapshot or the walk rebuilds with the same old timestamp, is
dropped again before it serves anything. An expired producer's next
batch is accepted at any sequence, as a producer never seen (KIP-360);
nothing is checked per append. Not done yet: periodic snapshots: after a crash Open reads every segment's headers,
and the state of a producer whose batches were all deleted by retention is
then lost, so the producer is accepted as unknown.

# Compaction

A log whose Config has Compact (cleanup.policy=compact) is cleaned by the
broker's Cleaner (cleaner.go: log.cleaner.threads goroutines, each with an
offset map of its share of log.cleaner.dedupe.buffer.size, all throttled
together to log.cleaner.io.max.bytes.per.second, sleeping
log.cleaner.backoff.ms when no log needs cleaning). A pass (clean.go, after
Kafka's Cleaner.doClean) takes the log with the highest dirty ratio, bytes
after the cleaner checkpoint over all bytes below the first uncleanable
segment, at or above min.cleanable.dirty.ratio, or any log whose first
dirty segment is older than max.compaction.lag.ms. Uncleanable: the active
segment, segments with a timestamp younger than min.compaction.lag.ms and
segments reaching past the caller's limit (CleanTarget.Limit: the high
watermark). The pass maps every key of the dirty section to its last
offset (MD5 of the key, 24 bytes an entry, Kafka's SkimpyOffsetMap; where
the map is full the pass ends and the rest stays dirty), then rewrites the
segments from the log start to the end of what it mapped, in groups
(Kafka's groupSegmentsBySize: consecutive segments whose sizes add up to
at most segment.bytes and whose offsets stay within 2^31 of the first's
base are written into one cleaned segment named after the first, so small
cleaned segments merge), keeping a record
if it has a key, no later offset is mapped for the key, and, for a
tombstone, its batch's delete horizon has not passed. The first pass that
keeps a tombstone sets its batch's horizon to now + delete.retention.ms
(KIP-534: baseTimestamp holds the horizon, attribute bit 0x40 says so, the
records' timestamp deltas are re-encoded against it). Records keep their
offsets and bytes; a batch keeps its base offset, lastOffsetDelta, leader
epoch, producer fields and codec, and is compressed again with that codec
(protocol.Batch.Filter, Kafka's MemoryRecords.filterTo). Transactions
follow Kafka's CleanedTransactionMetadata (clean_txn.go): the records of
an aborted transaction's batches are removed (and never mapped); a
transaction marker stays while a batch of its transaction was seen in the
pass, and once none is, goes in two steps like a tombstone: one pass
stamps its batch with a delete horizon (protocol.Batch.StampDeleteHorizon),
a pass after the horizon removes it (kept as a header without records if
it may be its producer's last entry or the log is a raft partition's).
An ABORT marker's removal takes its entry out of the aborted list in the
same step as the swap, so read_committed fetches are never told of an
aborted transaction whose marker is gone. On a raft partition a batch
already emptied does not count as one of its transaction's. Other
control batches (raft's) are copied. A batch left without records is dropped unless it is an
idempotent producer's last data batch (kept as a header without records,
so the producer's sequence survives a restart) or the log is a raft
partition's (CleanTarget.RetainEmpty: every batch is a raft entry and
keeps its offsets). A segment left empty is deleted, except the first
(the log start stays). ReadRange, what Fetch sends, leaves such batches
without records out (RangeResult.Hidden: it stopped before one; a read
from NextOffset skips it): kafka-go panics on two in a row, and the
consumer steps over the gap with the next batch it gets. A Fetch
response holds one range per partition, so it ends at the first such
batch after data and the consumer's next fetch goes on past it: a log
where emptied batches alternate with surviving ones takes a round trip
per run of data. Read, what raft
reads its entries with, returns them. A compacted log's ReadRange reads
every header of the range rather than jump with the offset index, so
that it sees them.

Crash safety, as Kafka's swap: a rewritten group is written to
<base>.log.cleaned and fdatasynced, renamed to <base>.log.swap (directory
synced: the commit point), the group's other segments are deleted, the
swap is renamed over <base>.log, and then its index files are rebuilt
and synced; the checkpoint (cleaner-offset-checkpoint,
"0\n<offset>\n") moves once every segment of the pass is swapped. Open
deletes .cleaned files and finishes a .swap (deleting the segments
after its base up to its last offset, the rest of its group, then the
rename), before anything
else, and rebuilds index files that disagree with their segment; a lost
checkpoint only makes the next pass map the same section again. The swap
happens under the log's locks and only if the segment is still in the log
with the size it was planned with (retention, DeleteRecords and
truncation abort a pass); readers holding a FileRange of the old file keep
reading it. The epoch cache of a running log keeps its entries; one
rebuilt after a crash starts an epoch at its first surviving batch.

BenchmarkClean (clean_bench_test.go) measures a pass over a 32 MiB log of
20,000 keys written about 13 times each; see the figures there.

# Leader epochs

The batches' partitionLeaderEpoch fields feed an in-memory epoch cache like
Kafka's leader-epoch-checkpoint, rebuilt on Open; OffsetForLeaderEpoch
follows LeaderEpochFileCache.endOffsetFor.

# Choosing the durability design

One fdatasync on the target machines costs 0.4-2 ms at the median and 8-20 ms
at p99, and durable bandwidth grows with the bytes one sync covers, so one
sync must cover many partitions' appends. Two designs were measured with
BenchmarkFlushDesign (flushdesign_bench_test.go), 64 concurrent appenders,
each writing a batch and waiting for a group-commit sync that started after
its write. Three variants are models with nothing of this package in the
way, two are this package:

	a-serial      model: per-partition files, dirty files synced one after another
	a-concurrent  model: per-partition files, dirty files synced concurrently
	b-wal         model: one shared write-ahead file, one sync per group
	              (materialising segments from it is not modelled)
	log-segments  Log + Flusher without a WAL: design (a) as implemented
	log-wal       Log + Flusher with FlusherConfig.Dir: design (b) as
	              implemented, segments written too and checkpointed

Reproduce with (about eight minutes; two seconds per run):

	go test ./log/ -run '^$' -bench 'Append|FlushDesign' -benchtime 2s -count 3

Results on the 2-core development VM (ext4 on a virtio disk, shared with
other engineers' builds and tests, so the spread is wide; dd of 512 MiB with
conv=fdatasync gave 520-670 MB/s), MB/s of appended data made durable,
min-max of three runs:

	batch   partitions  a-serial  a-concurrent  b-wal    log-segments  log-wal
	1 KiB   16          2.8-3.4   9.6-14        94-105   18-28         24-51
	1 KiB   256         2.2-4.2   5.0-8.8       33-105   5.6-7.7       50-67
	16 KiB  16          94-115    179-229       208-371  153-191       169-265
	16 KiB  256         23-48     52-74         320-360  44-104        135-248

(An earlier, quieter run of the models alone, 1 s each: a-concurrent 19-23
and b-wal 118-125 at 1 KiB x 16; a-concurrent 82-180 and b-wal 392-733 at
16 KiB x 256. The machine was busier this time; compare within a table.)

The implemented WAL against the implemented per-partition syncs, by
medians: 2.0x at 1 KiB x 16 partitions, 9.3x at 1 KiB x 256, 1.0x at
16 KiB x 16 and 1.6x at 16 KiB x 256. log-wal makes one fdatasync per
about 32 appends (one per round, 0.03 fsyncs/op) whatever the number of
partitions; log-segments makes one per dirty log per round (0.22 at 16
partitions, 1.0 at 256). log-wal reaches the b-wal model at 1 KiB x 256 and
falls short of it with 16 KiB batches: every byte is written twice (WAL
and segment), the segments' page cache is written back by the kernel
while the WAL is synced, and each round also takes every dirty log's lock
to advance its durable offset.

BenchmarkAppend (16 KiB batches of 1 KiB records; group: 64 goroutines
doing Append then WaitDurable over N logs that share one FlushGroup
Flusher), same run:

	nosync (FlushNever)     347-690 MB/s   0 allocs/op
	group, 1 log            329-499 MB/s   0.032 syncs/append
	group, 16 logs          161-268 MB/s   0.23 syncs/append
	group-wal, 1 log        199-255 MB/s   0.032 syncs/append
	group-wal, 16 logs      164-285 MB/s   0.032 syncs/append

With one log and large batches the WAL costs about a third (one segment sync
per group already covers everything there, and the WAL adds a copy and a
second write of every byte); from 16 logs on it ties or wins, and with many
partitions or small batches it wins by 2-9x.

Choice: (b), the broker-wide WAL, for write brokers: the workloads that
matter (acks=all with 100+ partitions, small batches, latency) are where
per-partition syncs pay one fdatasync per partition per round and the WAL
pays one. It keeps Kafka's layout for everything else: segments are still
written by every append and serve Fetch, retention and the raft log; the
WAL only holds what their page cache may lose until a checkpoint. It is
switched on by FlusherConfig.Dir; without it the Flusher keeps design (a)
(concurrent per-segment syncs, at most MaxConcurrent in flight, 64 by
default). The broker still defaults to (a) (log.wal.enable=false):
end-to-end runs with a real client measured per-partition syncs faster
both for large batches and for many small ones (figures beside the key in
configs/config.go), so the choice stays open until the WAL wins there too. Left for later: raft hard state in the same WAL (one sync for
entries and votes of every group), preallocated and recycled WAL files (an
fdatasync that changes no file size skips the journal commit), and
checkpointing by time as well as by WAL size.

# Drop-behind

Written data stays in the page cache until the kernel reclaims it, and a
log is written once and mostly read near its end (consumers keeping up,
raft followers); on a write broker of the split cluster it is hardly read
at all. With FlusherConfig.CacheTailBytes set (the broker's
log.cache.tail.bytes, 16 MiB by default), each sync of the active segment
is followed by POSIX_FADV_DONTNEED over the segment's synced bytes further
than that behind its end, in 2 MiB-aligned steps (a large folio straddling
an unaligned edge would stay). Appends then write into pages the kernel
has just freed rather than growing the cache with fresh ones, and no
reclaim has to find the old pages later. Reads behind the tail go to disk
(with the kernel's read-ahead). Only synced bytes are dropped (dirty pages
would stay anyway), so FlushNever keeps everything cached.

Why: profiling W1 (8 partitions, 1 KiB records, acks=all, group fsync) put
82 % of the broker's CPU in the segment write, almost all of it in the
kernel's copy into fresh page-cache folios (copy_folio_from_iter_atomic, 56
% of samples), while the socket read of the same bytes took 5 %. On the
development VM a buffered write into pages never used before runs at about
a tenth of the speed of a write into pages just freed (a 4 GiB file written
in 512 KiB writes with an fdatasync every 16 MiB: 181-220 MB/s, write()
alone 212-264 MB/s; with drop-behind of everything 64 MiB behind: 529-653
MB/s, write() alone 1,504-2,071 MB/s). The cost of touching new memory
depends on the machine (a VM whose host backs guest memory lazily pays it
most); on any machine drop-behind saves the reclaim that would otherwise
evict the same pages later. TestDropBehind checks with mincore that the
synced head leaves the cache and the tail stays.

# Testing

Besides the table and crash tests, FuzzRecover feeds arbitrary bytes to Open
as a segment, and FuzzWALRecover feeds them to the WAL as a file left by an
earlier process and opens a log whose id its seed records use. Each run
syncs files, so keep minimisation short:

	go test ./log/ -run '^$' -fuzz FuzzRecover -fuzztime 60s -fuzzminimizetime 2s
	go test ./log/ -run '^$' -fuzz FuzzWALRecover -fuzztime 60s -fuzzminimizetime 2s

The WAL crash tests (wal_test.go) wrap the file sync to record each file's
size at its last sync, kill the Flusher and the logs without any sync, cut
every segment and WAL file back to that size (what a power cut leaves) and
reopen.

TestPowerLoss (powerloss_test.go) covers every flush policy the same way
with internal/powerloss, which sees every sync (they all go through
internal/fsutil) and rebuilds the directory as a power cut leaves it: the
exact last-synced state and seeded random images in which unsynced bytes
are partly kept or torn (zeros or garbage) and unsynced directory entries
undone. Each image must reopen dense (no gap, no corrupt batch served),
keep every batch acknowledged under log.fsync=group (with or without the
WAL) and everything below the durable offset under interval, and accept
each producer's next sequence. SLUICE_POWERLOSS_SEED=N replays a failure.

# Not implemented

An on-disk transaction index (the aborted transactions are kept in memory
and in the clean-shutdown snapshot, see txn.go),
periodic snapshots, tiered storage, and a
fault-injecting file system: fault tests use real files, truncating and corrupting them between a
simulated crash and the next Open, or rebuilding power-loss images from the
recorded sync points (internal/powerloss); the only seams are syncFile and writeAt
(nospace_test.go makes a write short and then fail with ENOSPC). A
segment missing from the middle of a compacted log (removed from outside)
is still read as an offset gap: the cleaner deletes a segment it emptied,
so gaps between segments are legitimate there, and telling the two apart
needs the cleaner checkpoint to cover every gap it makes before the
segment goes (in a log that is not compacted and was never cleaned,
recovery treats such a gap as damage, see above). For the WAL: raft hard state records,
preallocated or recycled WAL files, time-based checkpoints, and automatic
dropping of records for logs that are never opened again (the caller calls
Flusher.ForgetUnopened).
*/
package log
