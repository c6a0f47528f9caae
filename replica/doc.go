// Package replica owns the partitions a broker hosts. Every partition is a
// Replica (raft_*.go, Host in raft_host.go): one raft group over write
// brokers (voters) and read brokers (learners), which the server's handlers
// reach through package partition's interfaces (a Replica is a
// partition.Replica; Host.Hosted gives the host as a partition.Host, so
// server imports neither this package nor log). Every broker of a cluster hosts its partitions so, over a
// TCPTransport. A single node (a broker without replica.listen, `sluice
// dev`) runs one-voter groups: its Host has a LocalTransport
// (raft_transport_local.go), which opens no port and has no peers; a
// group's sole voter campaigns as soon as it opens, and Host.Open waits for
// that election. CheckDir refuses, before any replica opens, a data
// directory holding partitions written by the plain local logs of earlier
// versions (records and no raft.state).
//
// Partition (partition.go, Manager in manager.go) is a single local log with
// no raft: it serves no Kafka partition any more, only the read-only
// __consumer_offsets view every broker keeps (server/offsets_topic.go),
// which reaches it as partition.LocalLogs (Manager.Local).
//
// # High watermark
//
// The high watermark is the end of the committed prefix: what a consumer
// may read and what acks=all waits for. For a Replica it is the end of the
// last entry raft committed (below). For a Partition (the __consumer_offsets
// view) an entry is committed once it is durable under the broker's flush
// policy (the fsync the Flusher groups across partitions); with
// log.fsync=never it is committed once written. A per-partition goroutine
// follows the log end offset, waits for durability and advances the
// watermark, waking Fetch long-polls through a broadcast channel.
//
// # Raft-replicated partitions
//
// The raft_*.go files replicate a partition with one etcd raft group (go.etcd.io/raft/v3
// v3.7, RawNode) per partition. Voters are write brokers, learners read
// brokers (raft learners never vote or lead). One Host per broker owns all
// groups:
//
//	tr, _ := replica.NewTCPTransport(replica.TCPConfig{Self: id, Listen: addr, Resolve: peerAddr})
//	h, _ := replica.NewHost(replica.HostConfig{Node: id, Dir: dataDir, Transport: tr, Flusher: f})
//	r, _ := h.Open(topic, key, replica.Members{Voters: w, Learners: rd}, replica.ReplicaOptions{Mode: m, MinInsyncReplicas: n, Log: cfg})
//	p, err := r.Propose(batch, replica.AcksAll) // *NotLeaderError on a follower
//	res, err := p.Wait(ctx)                     // offsets, or why not
//	rr, err := r.Read(offset, maxBytes)         // up to the high watermark
//
// Host: a scheduler (raft_scheduler.go, after CockroachDB's) whose fixed
// pool of workers processes groups with pending work; one ticker for every
// group; one Transport with one stream per peer broker carrying the
// messages of all groups (raft_transport_tcp.go; raft_transport_mem.go is
// the fault-injecting network for tests). A worker's round for a group
// (Replica.process) steps the queued messages, applies the ticks owed,
// proposes the queued batches and handles Readys.
//
// # The partition log is the raft log
//
// A data entry of the group is one record batch of the partition log; no
// other store holds its bytes. The leader assigns offsets when it
// proposes: it first handles any pending Ready, so raft's log has no
// unstable tail and the new entry's index and offset follow the storage's
// last ones; it stamps baseOffset and partitionLeaderEpoch (= the raft
// term, which raft gives the entry in the same Propose call) into the
// batch, both outside the CRC, and proposes those bytes. Every replica
// appends them unchanged with log.AppendReplicated. If a stored normal
// entry's base offset or epoch were ever not the expected ones, every
// replica would stamp the same values into a copy.
//
// A group whose only member is its leader (one voter, no learners, no
// configuration change under way) proposes a reference instead of the
// batch (raft_ref.go): etcd raft clones every proposed entry
// (raft.appendEntry) and holds the clone until it is durable and applied,
// which for a group that sends nothing is only a second copy in memory.
// The entry's data is then 16 bytes, "SLRF" and a sequence number naming
// the batch the Proposal holds; step 1 writes that batch to the log, as it
// would the data of an entry, and only then releases it
// (Proposal.BatchReleased, when the server gives the request frame back),
// as the plain log does after its append; Propose runs that round in the
// caller's goroutine (below, "Locks"), so the batch is written before it
// returns. A reference exists only in
// raft's memory and this replica's entry cache: the log and raft.index
// hold the batch, so recovery and every read are unchanged. Entries
// serves a cached reference only while the group is solo; a
// configuration change ends that before it is proposed or applied, raft
// then reads the batches from the log for a new member, and no message
// carrying a reference is ever sent (handleReadyLocked fails the replica
// instead).
//
// # Offsets
//
// Kafka offsets are dense, as in Kafka: they count data batches only.
// raft's own entries (a new leader's empty entry, ConfChange and
// ConfChangeV2 entries), and the command entries of raft_command.go
// (DeleteRecords), take no offset and have no batch in the log, so a
// fresh partition starts at offset 0 on every replica, and elections,
// membership changes, truncated tails and snapshot installs leave no gap;
// the log holds nothing a client must not see. (Kafka's transaction
// markers, control records of types 0 and 1, will be data entries with
// offsets of their own when they come.) The translation between raft
// index and offset is raft.index (below), identical on every replica
// since each builds it from the same entries: a data entry's record holds
// its batch's offsets; the record of one of raft's own entries holds its
// kind and, as base, the offset the next data entry gets (last = base-1,
// so the records' offsets stay contiguous). A configuration change's or a
// command's bytes are kept in raft.confs. So the next entry's offset is always the
// end of the last record, the offset after entry i (the high watermark
// when i is the commit index) is the end of record i, truncating entries
// from index i cuts the log at record i's base, and a snapshot at index i
// starts the log at the end of record i (snapOffset). ListOffsets, Fetch,
// the high watermark and the log start are all plain log offsets.
//
// raft's own entries are the one thing the log cannot tell after a crash:
// the records of data entries are rebuilt from the batches' headers, but
// an empty entry leaves no trace there. So, in step 1, the records of
// raft's own entries (and raft.confs before them) are fsynced before any
// batch after them is written, so no batch can reach the disk ahead of
// the record of a raft entry before it, and once the entries are durable
// raft.state notes the index of the last one (lastRaft); Open refuses an
// index that lost that record (ErrLostCommitted) instead of rebuilding
// the batches after it under wrong indexes. That is one more fsync of
// each small file per election or membership change.
//
// OffsetForLeaderEpoch answers from the batches' leader epochs (the log's
// epoch cache): a term in which no data was written has no batch, so an
// epoch past every batch's, up to the current term, ends at the log end,
// as Kafka's leader answers for its own epoch before it wrote in it.
//
// Directories written by earlier versions, in which raft's own entries
// were control batches that took an offset each, are not read: raft.state
// without the dense-offsets flag makes Open fail with ErrOldFormat, naming
// the directory. Reading them would keep hiding those batches from
// clients (and keep their gaps), and a group whose members disagree on
// the format would assign different offsets to the same entries. There is
// no in-place upgrade: empty the brokers' data directories (the data is
// lost) or copy the topics to a new cluster with a Kafka client first.
//
// The high watermark is the offset after the last committed entry. A new
// leader's raft commit index advances only through an entry of its own
// term, so it exposes no high watermark it did not commit in its term. A
// follower whose log conflicts with the leader's truncates the tail
// (log.TruncateTo at the first conflicting entry's offset, synced).
//
// # Ready loop (etcd raft doc.go steps)
//
// raft runs with AsyncStorageWrites: a Ready's writes arrive as a
// MsgStorageAppend (entries, HardState, snapshot) and its committed
// entries as a MsgStorageApply, each carrying the messages to deliver
// once it is done, and no Advance is called. handleReadyLocked, for each
// Ready, with raftMu held:
//
//	step 2 first for Messages to peers: a leader's appends and heartbeats
//	        (etcd and the raft thesis 10.2.1 let a leader replicate before
//	        its own append is durable; raft counts its own acknowledgement
//	        only when the MsgStorageAppendResp below is stepped), vote
//	        requests, heartbeat responses. What depends on this node's
//	        durable state (MsgAppResp, vote responses) raft holds back as
//	        the append's Responses. MsgSnap is reported finished once sent.
//	step 1: persist (storageAppendLocked). A snapshot first (see below, a
//	        sync); then Entries, after truncating a conflicting tail,
//	        written to the log's page cache (raft's own entries to
//	        raft.index and raft.confs only, synced at once); then
//	        HardState, fdatasynced whenever term or vote changed (a
//	        commit-only change is written, never past the last entry
//	        known durable, to the page cache at each apply (step 3) and
//	        synced with the next sync or at Close: after a kill Open knows
//	        the commit index the replica had reached, after a power cut
//	        the last synced one). The Responses, raft's
//	        own MsgStorageAppendResp among them, wait in the group's
//	        durQueue (raft_durable.go) until the log is durable past the
//	        append: one goroutine per group with appends pending waits on
//	        log.WaitDurable and requeues the group, whose next round
//	        (durableLocked), in append order, saves raft.state's lastRaft
//	        if raft entries came, answers acks=1 and delivers them: stepped
//	        here if addressed to this node, sent otherwise. When the log is
//	        already durable past the append (log.fsync=never) and nothing
//	        earlier waits, they are delivered at once.
//	step 3: apply (storageApplyLocked). raft hands out committed entries
//	        only once they are stable here, so nothing is applied before it
//	        is durable on this replica (with one voter too). Conf changes
//	        are applied to the RawNode and raft.conf is rewritten; the high
//	        watermark moves to the last committed entry's end; acks=all
//	        waiters are answered; MsgStorageApplyResp is stepped. The
//	        applied index is saved in raft.state every 10,000 entries or
//	        minute (and at Close): after a crash raft hands back, read from
//	        the log, the committed entries after the saved one.
//
// So no worker waits for a log fsync: it stores a group's writes and moves
// on, and one round of the log's Flusher (log/flusher.go, which syncs every
// dirty log of the broker together) releases every group waiting; a
// group's ticks, heartbeats and proposals are processed meanwhile, and
// new proposals pipeline behind the appends in flight (their offsets
// follow the storage's last index, which every handled Ready brings up to
// raft's). The syncs left in a worker are rare: a term or vote change, a
// record of raft's own entry, a truncated tail, a snapshot install.
//
// Why AsyncStorageWrites rather than a pending Ready per group (a worker
// that leaves the group mid-Ready and Advances it once a goroutine saw
// the fsync): with one Ready in flight a group cannot emit another, so its
// heartbeats, heartbeat responses and appends to other followers would
// wait for its own fsync, proposals would have to be held back, and the
// peers' checks (raft_validate.go) would have to know about the pending
// state. With asynchronous writes raft itself says which messages need the
// durable state (it holds them as Responses and ignores a stale
// MsgStorageAppendResp after a term change), Ready can be called again at
// once, and storage reads see the written entries (raft keeps them in its
// unstable log until stepped stable).
//
// A follower's tail replaced by a new leader's entries (a truncation)
// while earlier appends still wait cuts what they wait for to the new log
// end: their entries are gone, raft ignores their stability (the term
// changed since) and the acknowledgements they carry were true in their
// term, when this replica held those entries.
//
// # Acknowledgements
//
// acks=1 is answered once the leader's append is durable (step 1). acks=all:
// ModeRaft at commit (a majority of voters durable); ModeSemiSync once the
// leader's write is durable and SemiSyncWaitReplicas other voters (learners
// do not count) have acknowledged it (raft progress Match), or, after
// SemiSyncTimeout without them, on the leader's write until they catch up
// (raft_semisync.go: MySQL's fallback, counted and logged; commit does not
// answer a semi-sync write, as the count may exceed a majority); ModeAsync
// once the leader's write is durable when it is the group's sole voter (the
// async master), otherwise at commit (asyncAnswersOnWriteLocked). In every mode the batch is still
// replicated by raft and becomes readable only at commit. A follower that
// truncates a divergent tail (a returning leader whose writes no majority
// held) logs the offsets cut and counts them (Host.TruncatedRecords): what
// async or a semi-sync fallback acknowledged and lost. A leader that loses its term fails its waiting
// writes with NotLeaderError (the entry may still commit; the idempotent
// producer's retry is then a duplicate). The leader's ISR (isrLocked) is
// the replicas, voters and learners, that caught up with its log end within
// MaxFollowerLag (replica.lag.time.max.ms; a new leader counts everyone for
// that long, as Kafka's new leader inherits the ISR), less a member that
// sent the offline notice (a replica that stops tells its group's other
// members, raft_nospace.go) and has not been heard from since: it leaves
// at once, as Kafka's controller drops a failed log directory's replicas;
// OnISRChange reports it to the metastore. min.insync.replicas (ModeRaft, acks=all) counts the
// voters in it, the leader included, and refuses with ErrNotEnoughReplicas
// before proposing.
//
// # Idempotence
//
// The leader checks producer sequence and epoch before proposing, so a
// refused or duplicate batch never becomes an entry. The rules are the log's
// own code (log.ProducerEntry's Check and Update, which Log.Append applies
// inside the write); the table (raft_producers.go) is updated by every
// replica from the batches it stores, in log order, so a follower that
// becomes leader dedupes as the old leader did, and it travels in
// snapshots. A producer the table has not seen since Open or a truncation
// is seeded from log.ProducerState, the log's window of its last five
// batches, when the leader checks its batch or any replica stores one (a
// follower that restarted and then stored only a producer's later batches
// must still know the earlier ones when it leads), and every producer the
// log holds state for is loaded before a snapshot encodes the table. The table
// also keeps the coordinator epoch of each producer's last transaction
// marker: ProposeMarker refuses a marker with a lower one
// (log.ErrCoordinatorFenced) and, sent with transaction version 2, one
// whose producer epoch is not above the producer's, unless it is the
// retry of the marker that bumped it (log.ProducerEntry.CheckMarker).
// Producer expiry (Replica.ExpireProducers, every
// producer.id.expiration.check.interval.ms, and when the replica opens,
// truncates or installs a snapshot) drops entries log.ProducerEntry's
// Expired finds idle from the log's state and the table under the
// storage lock, by this replica's clock.
//
// # Files
//
// Beside the log's segments in the partition directory:
//
//	raft.index  one 32-byte record per raft entry, in index order:
//	            index u64 | term u64 | baseOffset i64 | lastOffset-baseOffset u32 |
//	            crc32c u32 (of the 28 bytes before it). Bit 31 of the offset
//	            count marks raft's own entries: the low byte is then the
//	            kind (1 empty entry, 2 ConfChange, 3 ConfChangeV2, 4
//	            command, raft_command.go), the
//	            entry spans no offset and baseOffset is the next data
//	            entry's. Appends of data records are not synced: they are
//	            rebuilt from the log's batch headers (one entry per batch,
//	            term = partitionLeaderEpoch). Records of raft's own entries
//	            are synced at once ("Offsets"). Truncations and prefix
//	            drops rewrite it durably (temporary file, fsync, rename,
//	            directory fsync). In memory a group keeps only the
//	            records of entries in flight (not yet applied here or not
//	            yet held by every replica) and its last one; the others
//	            are read from the file (page cache) when raft or a lookup
//	            asks. Over the host's budget (raft.entry.cache.max.bytes,
//	            shared with the entry cache) a group keeps only its last.
//	raft.confs  the bytes of the ConfChange(V2) and command entries
//	            raft.index lists:
//	            index u64 | term u64 | length u32 | data | crc32c u32 per
//	            record, synced before the index records naming them;
//	            records the index does not name are dropped at Open.
//	raft.state  two 128-byte slots written alternately, each "SLRS" | version
//	            u16 (1) | flags u16 | seq | term | vote | commit | applied |
//	            snapIndex | snapTerm | snapOffset | lastRaft (u64 each) | zero padding |
//	            crc32c u32 of the rest. Flag bit 1 marks dense offsets
//	            (bit 0 was written by earlier versions). lastRaft is the
//	            index of the last of raft's own entries known durable.
//	            Every write goes to the slot not holding the last synced
//	            state and, but for a commit index that advanced, is
//	            fdatasynced before the caller goes on (Open syncs the
//	            file once); the valid slot with the higher seq wins, so a
//	            torn or lost write leaves the last synced state. snapIndex/snapTerm name
//	            the entry before the first one the log holds, which starts at
//	            snapOffset. Bit 62 of applied marks a snapshot install whose
//	            log reset may not have finished.
//	raft.conf   crc32c u32 | raftpb.ConfState with, as field 1000 (a
//	            varint ConfState does not use), the index of the entry it is
//	            as of; rewritten durably when it changes. A configuration
//	            change at or below that index, handed out again after a
//	            restart (the applied index is saved only at checkpoints), is
//	            in it already and is not applied again: entering a joint
//	            configuration twice makes raft panic.
//	raft.snap   crc32c u32 | the last snapshot's data (below), for the
//	            producer table after a restart.
//	raft.joining empty; present while a replica opened joining without
//	            state (OpenJoining) has not yet applied a configuration
//	            change naming it nor installed a snapshot. Created durably
//	            before raft.state, removed durably before the change's
//	            raft.conf is written. While it is there the replica is not
//	            ticked, so it never campaigns in its initial configuration
//	            (a founder moved away and back would elect itself).
//
// Snapshot data: "SLSN" | snapOffset i64 | producer count u32 | per producer:
// id i64 | epoch i16 | n u8 | n x (firstSeq i32 | lastSeq i32 | firstOffset i64 |
// lastOffset i64), the table as of snapOffset; then "SLCE" | count u32 |
// count x (id i64 | coordinator epoch i32) for the producers whose markers
// set one (absent in snapshots of earlier versions, which decode with none;
// earlier versions ignore it); then "SLTS" | count u32 | count x (id i64 |
// last timestamp i64), each producer's last batch timestamp for expiry
// (absent before: decoded with the decoding time, so such a producer
// expires a full producer.id.expiration.ms later). The snapshot's metadata holds
// the index, term and ConfState. It is a few hundred bytes: a replica behind
// the leader's first index resets its log to start at snapOffset and gets
// the entries after it by ordinary appends.
//
// # Recovery
//
// Open reads raft.state (a missing one means a new group, allowed only on an
// empty log), raft.conf (the members passed to Open are used only for a new
// group), then raft.index, keeping the records after snapIndex that are
// contiguous in index and offset, starting at snapOffset, and inside the
// log. A snapshot install marked pending is finished (the log reset to
// snapOffset). Records wholly below the log start (retention ran, the
// compaction after it did not persist) are compacted; a record of raft's
// own entry only when data after it was deleted (its base is below the
// start). raft.confs records the index does not hold are dropped, a
// configuration change without its bytes fails Open, and so does an
// index without the record raft.state's lastRaft names. Batches after the
// last record are turned back into records from their headers; a batch
// that cannot be an entry (no epoch, or an epoch below the previous term)
// is truncated. Open fails with ErrLostCommitted, and the replica is not
// opened, so it never votes or leads on a damaged log, when the log starts
// after the last entry the index knows or ends before the snapshot, or when
// the persisted commit index is past the last entry (the log lost synced,
// committed entries). Everything else gives the same raft log as before the
// crash for everything that was synced, so offsets never change.
//
// Retention and DeleteRecords go through Replica.ApplyRetention and
// Replica.DeleteRecordsBefore, which sync raft.index, let the log delete,
// then compact the raft log to the entry that holds the new log start (only
// applied entries), so a replica that needs older entries is sent a
// snapshot. Each replica applies retention itself. Kafka's DeleteRecords
// (Replica.DeleteRecords) is replicated instead: the leader proposes one
// normal entry whose data is a 12-byte command (raft_command.go: "SLDR" and
// the new log start), stored like raft's own entries (kind 4 in raft.index,
// its bytes in raft.confs, no batch and no offset); every voter and
// learner applies it when it commits, in log order, so all move their log
// start identically.
//
// Compaction (cleanup.policy=compact) is the log's cleaner, run over
// Host.CleanTargets (and the offsets view's Manager.CleanTargets): each
// replica's log below its high watermark (committed
// entries, never truncated) with every batch kept, emptied ones as headers
// without records (log.CleanTarget.RetainEmpty): each batch keeps its base
// and last offset and its epoch, so raft.index, raft's terms and the
// producer table stay valid, and Entries serves the cleaned batch to a
// follower that needs an older entry, which then holds the same survivors.
// Entries still in the entry cache go out as they were appended; the
// receiver's own cleaner compacts them. Each replica cleans itself,
// aborted transactions' records and spent transaction markers included
// (their headers stay too).
// Fetch (log.Log.ReadRange) leaves the emptied batches out: a response
// stops before one and the consumer's next fetch starts past it.
//
// # Locks
//
// Host.mu, then Replica.raftMu, then raftStorage.mu, then the log's locks.
// Replica.inMu (queued inputs), Replica.mu (high watermark notification),
// durQueue.mu and scheduler.mu are leaves: nothing else is taken while one
// is held. A worker holds raftMu for a whole round, which waits for no log
// fsync ("Ready loop"). Propose queues under inMu; in a solo group it then
// takes raftMu and runs the round itself, as the plain log's Append writes
// in the producer's goroutine (its batch is in the log when Propose
// returns, so the request frame goes back at once); in any other group
// producers never take it.
// OnLeaderChange runs with raftMu held.
//
// # Failures
//
// A failed log write or sync, or a raft panic (raft panics when its
// invariants break), stops that replica only: it steps and
// sends nothing more, its writes fail with ErrReplicaFailed (the server
// answers KAFKA_STORAGE_ERROR and Metadata from this broker shows the
// replica offline and no leader here), Replica.Failed says why,
// Host.FailedReplicas counts it and HostConfig.OnFailed is told. The
// broker's other partitions go on; the group goes on with its other
// members. A failed fsync stays fatal for that log: nothing is retried
// (the page cache's state is unknown after one), and only a restart,
// which recovers the log from its files, brings the replica back. A
// write that found the disk full is the exception (raft_nospace.go): the
// files are then as a kill -9 leaves them, so the host closes the replica
// and, once space is freed, reopens it from its files in place, as a
// restart would; it then catches up from the leader. Raft
// node ids are broker ids plus one, so a broker that lost its disk must
// not come back under the same id into groups that knew it; if it does, the heartbeats that commit entries it no
// longer has are refused (below) instead of panicking it.
//
// # Peers
//
// Nothing a peer sends reaches raft unchecked (raft_validate.go): the
// transport keeps a connection only from a registered broker at its
// registered IP, and refuses oversized or malformed frames; the host
// refuses messages of types no peer sends, addressed elsewhere, naming
// another sender than the connection's or this node, with term 0, for a
// group not open here, from a node that is neither in the group's
// configuration nor assigned to it by the metastore, a second leader's
// messages in a term, heartbeats committing past the log, appends out of
// sequence or not decodable, snapshots raft could not restore, and
// acknowledgements of entries the leader does not have. The offline
// notice is the one message of this package's own (raft's local type
// MsgUnreachable, never stepped into raft): it only takes its sender out
// of the receiver's ISR until the sender is heard from again. Each refusal is
// counted by reason (sluice_raft_refused_total). A registered broker's
// IP is not authentication; with TCPConfig.TLS (internal.ssl.*) the
// connection is mutual TLS and the declared node must be the one the
// peer's certificate names (DNS name broker-<id>), so only the holder of
// a node's key can speak as that node. A member that forges consistent
// raft messages is outside raft's model; at worst it takes the replicas
// it talks to offline.
//
// # Not done
//
// Heartbeat coalescing (heartbeats of all groups travel in the same frames
// per peer but are one message per group) and quiescence of idle groups
// (every group ticks; 1,000 idle partitions cost about 3% of a core per
// broker with the default 200ms tick, see TestRaftIdleCPU); leader placement beyond "the first voter
// of a new group campaigns at once, and again every 2 ticks for one
// election timeout while no leader is known" (a voter that is not open
// yet misses a campaign; if the first voter is down, another wins after
// an election timeout and TransferLeadership rebalances);
// the syncs a worker still makes
// on elections and membership changes (raft.state's term and vote, the
// records of raft's own entries), rare but one per group per election.
//
// # Membership
//
// Replica.ChangeMembership proposes one ConfChangeV2 from the applied
// configuration to the wanted one (joint consensus, left automatically,
// when more than one voter changes) and waits until it is applied. Conf
// change entries take no offset (their bytes are in raft.confs) and are
// applied in step 3; raft.conf is rewritten then.
// Replica.TransferLeadership hands leadership to another voter (preferred
// leader election). A new leader accepts a change only once it applied an
// entry of its own term (raft would otherwise drop it silently).
// Host.OpenJoining starts a broker that joins a running group from the
// group's initial configuration, whatever it is now: the conf changes in
// the log are diffs against it and the joining replica replays them.
// CaughtUp and MembershipSettled let the caller (server/reassign.go) add a
// new voter as a learner first and promote it once it has the log.
//
// # Async master failover
//
// In the async master/replica configuration (docs/replication-modes.md)
// the master is the group's sole voter and every other replica a learner;
// Replica.EnterAsync and Replica.LeaveAsync move a group into it and out of
// it with ordinary membership changes. raft cannot elect a learner, so a
// failover is done on the files (raft_failover.go): Host.Promote closes a
// learner, cuts its log back to its recorded Claim, rewrites raft.state
// (the claim's term, its log committed) and raft.conf (itself the sole
// voter) and opens it again; Host.Follow
// rewrites any other replica the same way as a learner of the new master,
// first cutting its log to the takeover point (logged, counted in
// TruncatedRecords) unless what follows it is the new master's own. Both
// write raft.forced (crc32c u32 | index u64): the configuration changes in
// the log up to that index are superseded by the forced configuration and
// never applied here (a learner that lagged receives them later). The
// broker drives them (server/async_master.go).
package replica
