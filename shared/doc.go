// Package shared serves the partitions of topics in replication.mode=shared
// (docs/shared-storage.md): partitions that keep no raft group and no log
// of their own. Their record batches live in shared storage (package
// objstore: an S3-compatible bucket or a shared directory) and which
// object holds which offsets lives in the metastore (commit_shared_chunks).
//
// A Host is one broker's set of shared partitions; each Partition
// implements partition.Partition, so the Kafka front end (package server)
// serves it as it serves a raft replica, without importing this package:
// the broker's main wires a Host into the server as a partition.SharedHost.
//
// # Write path
//
// A partition's write leader is the broker that last claimed it in the
// metastore (claim_shared_leader: compare-and-set on the leader epoch). A
// voter claims a partition when the metastore names it leader or the
// leader it names is not registered (its lease lapsed). The claim fences
// every earlier leader, this broker's previous incarnation included: their
// commits carry an older epoch and are refused.
//
// Propose checks the idempotent producer's sequence with the log's rules
// (log.ProducerEntry's Check and Update, the one implementation a log and
// a raft replica use too), assigns the batch its offsets (the committed
// end plus what is in flight), stamps them, and appends it to the Host's
// upload buffer, shared by all its partitions.
//
// The upload pipeline (upload.go): the uploader cuts an object from the
// head of the buffer when it holds shared.upload.bytes or its oldest batch
// waited shared.upload.linger.ms, at most shared.upload.bytes of batches
// (or one larger batch); each partition's batches are one contiguous run
// of the object, in offset order. It starts the object's PutIfAbsent,
// under data/<node>/<incarnation>/<sequence>, at once, so up to
// shared.upload.parallel objects upload together: with an object store
// whose PUT takes 50-100 ms, one upload at a time would bound a broker to
// 10-20 objects a second and make every batch wait behind the previous
// object's PUT. The committer takes the objects in the order they were
// cut, waits for each one's upload and commits all of its chunks in one
// metastore command, one object at a time, so a partition's chunks reach
// the metastore in offset order (it refuses a chunk whose base offset is
// not the partition's end). acks=1 and acks=all are answered once the
// commit applied (there is no local copy for acks=1 to mean anything
// else). An object holds its slot from its cut to the end of its commit.
// The buffer and the objects in flight hold at most
// shared.upload.parallel × shared.upload.bytes of batches: Propose waits
// for room beyond it (back-pressure, before it takes any partition lock).
// Close cuts no more objects, lets those in flight upload and commit (or
// fail) as usual, and answers the batches still in the buffer, and a
// Propose waiting for room, NOT_LEADER_OR_FOLLOWER.
//
// Any failure of an upload or a commit (an error, a fenced or refused
// chunk, a commit whose outcome is unknown) answers the batches involved
// NOT_LEADER_OR_FOLLOWER and ends the partition's writer generation. Its
// batches in objects cut after the failed one, of the same generation,
// are answered so too and left out of their objects' commits: their
// offsets follow offsets that did not commit (or, after a commit whose
// answer was lost, may have). The other partitions of those objects
// commit as usual. The metastore would refuse most such chunks by itself
// (an older epoch, a base offset past the end), but not one that follows
// a commit that applied and whose answer was lost: the writer checks the
// generation before every commit. The next Propose (or the leadership
// check) claims the partition again, reads the committed end from the
// metastore and rebuilds the producer table from the tail of the
// partition, so a producer's retry of a batch that did commit is answered
// as the duplicate it is.
//
// # Read path
//
// Any broker serves Fetch for a shared partition: the chunk holding an
// offset is the floor entry of the partition's chunks in the metastore,
// and its bytes come from a bounded in-memory cache of whole chunks, then
// from a bounded disk cache (diskcache.go: files checked by their CRC on
// every read), else from one ranged read (GetRange) of the chunk, shared
// by every reader of it at that moment; read-ahead (readahead.go) fills
// the memory cache with the chunks after the one a reader stopped in. A
// broker restarted with an empty disk serves the whole history at once.
// A broker that is not
// the partition's writer learns the high watermark from the metastore
// (linearizable reads, at most one per partition every refreshEvery, and
// a poll while fetches wait).
//
// Retention and DeleteRecords (retention.go) move the partition's start
// offset in the metastore, on its writer only and fenced by its leader
// epoch, and then delete the objects no chunk references any more; the
// registered write broker with the lowest id sweeps the objects that were
// uploaded but never committed once they are older than a grace period.
// An object is condemned in the metastore before it is deleted, so no
// commit can reference it afterwards. The metastore keeps a reference
// count per object, so the question "does any chunk name this object" is
// one lookup.
//
// # Transactions
//
// Transactional batches and the coordinator's markers (ProposeMarker)
// are proposed like any other batch, markers checked with
// log.ProducerEntry.CheckMarker. The open transactions follow the log's
// rule (log.TxnTracker); each chunk entry carries their summary
// (metastore.SharedChunk.Txns, txn.go): what is open at its end and the
// aborted transactions its ABORT markers closed. The last stable offset
// and a read_committed fetch's aborted transactions are answered from
// the chunk entries on every broker; a new writer takes the open
// transactions from the last entry, so no rebuild window applies to
// them (it bounds only the producer table).
//
// # Compaction
//
// The writer's compactor (compact.go) merges runs of more than
// shared.compact.chunks consecutive chunks smaller than
// shared.compact.chunk.bytes into one object of at most
// shared.compact.object.bytes, with the batches' bytes unchanged, and
// swaps the chunk entries in one fenced metastore command
// (replace_shared_chunks). Readers that still know the old chunks read
// them until they are collected, then look the offsets up again.
//
// Not built yet: a producer table rebuilt from more than the partition's
// last rebuildOffsets offsets.
package shared
