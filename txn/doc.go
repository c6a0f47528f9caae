/*
Package txn is the transaction coordinator (KIP-98, KIP-447): Kafka's
TransactionCoordinator and TransactionStateManager for one write broker.

It keeps no state of its own. Each transactional id's state
(metastore.TxnState: producer id and epoch, the previous ones for KIP-360
retries, timeout, Kafka's status Empty, Ongoing, PrepareCommit,
PrepareAbort, CompleteCommit, CompleteAbort, the partitions and groups in
the transaction, start and update times) is one metastore entry, read
linearizably on every request and written by compare-and-set on its
Version. So any write broker can continue a transaction: the owner of an
id is chosen by rendezvous hashing over the live write brokers (Owner), and
when that broker's lease lapses the next in the ranking finds the state
where the old one left it. Two brokers that both think they own an id (one
about to learn its lease lapsed) cannot both move it: the second write on
a version fails (ErrTxnConflict, answered CONCURRENT_TRANSACTIONS).

Transitions (Kafka's):

	InitProducerId   none -> Empty (new producer id, epoch 0)
	                 Empty/Complete* -> Empty, epoch+1 (new id past 32766)
	                 Ongoing -> PrepareAbort with epoch+1, then the abort
	                   completes; CONCURRENT_TRANSACTIONS, the client retries
	                 Prepare* -> CONCURRENT_TRANSACTIONS
	AddPartitions/   Empty/Ongoing/Complete* -> Ongoing
	AddOffsets       Prepare* -> CONCURRENT_TRANSACTIONS
	EndTxn           Ongoing -> Prepare{Commit,Abort} -> markers -> Complete*
	                 Complete* of the same kind -> OK (a retry)
	                 Prepare* of the same kind -> CONCURRENT_TRANSACTIONS
	                 anything else -> INVALID_TXN_STATE
	timeout          Ongoing past its timeout -> PrepareAbort, epoch+1
	expiry           Empty/Complete* idle past transactional.id.expiration.ms -> removed

A request with another producer id (or an unknown transactional id) is
INVALID_PRODUCER_ID_MAPPING, with another epoch PRODUCER_FENCED.

The Prepare* write carries the decision for the transaction's pending
group offsets (metastore.TxnCommitOffsets): committed or discarded in the
same metastore write. The markers then go to every partition through the
MarkerWriter (the broker: its own partitions directly, the others with
WriteTxnMarkers to their leaders); only once all are written does the
state complete. A marker write that fails is retried in the background,
and a broker that takes over an id finishes a Prepare* state it finds
(Sweep, or the client's next request).

VerifyPartitions is KIP-890 part 1's check, which partition leaders make
themselves from the metastore (no AddPartitionsToTxn v4 round trip).

Transaction version 2 (KIP-890 part 2, EndTxn with tv 2):

	EndTxn           Ongoing -> Prepare* with epoch+1 (at the exhausted
	                   epoch: NextProducerID, epoch 0 at Complete*);
	                   markers at epoch+1
	                 Prepare* or Complete* at the request's epoch+1 -> a retry
	                 Empty/Complete* at the request's epoch, abort -> an
	                   empty abort, epoch+1
	                 Complete* at the request's epoch, commit -> INVALID_TXN_STATE
	AddImplicit      as AddPartitions/AddOffsets, made by the broker that
	                   takes Produce v12+ or TxnOffsetCommit v5+, not the
	                   coordinator: a compare-and-set like any other write

Fences (InitProducerId over an open transaction, timeouts) are written at
version 0, so that the fenced producer's EndTxn at its old epoch is not a
retry. VerifyEach is AddPartitionsToTxn v4+ with VerifyOnly.

Not implemented: KIP-939 (two-phase commit).
*/
package txn
