package txn

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metastore"
)

// Store is what the coordinator needs from the metastore;
// *metastore.Client implements it.
type Store interface {
	GetTxn(ctx context.Context, id string) (metastore.TxnState, bool, error)
	ListTxns(ctx context.Context) ([]metastore.TxnState, error)
	PutTxn(ctx context.Context, st metastore.TxnState, version uint64, end metastore.TxnEnd) (uint64, error)
	DeleteTxn(ctx context.Context, id string, version uint64) error
}

// MarkerWriter writes a transaction's COMMIT or ABORT marker to each of
// tps through the partition's leader (Kafka's WriteTxnMarkers). It
// returns nil once every partition has its marker; partitions of deleted
// topics count as done. Writing a marker twice is harmless: a producer
// without an open transaction in a partition ignores it.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Marker, tps []metastore.TopicPartition) error
}

// Marker is what a transaction's COMMIT or ABORT marker carries.
type Marker struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	// CoordinatorEpoch is the metastore index of the decision (capped at
	// MaxInt32): it only grows for a transactional id, whichever write
	// broker coordinates it, as Kafka's coordinator epoch grows with each
	// new coordinator of the id's __transaction_state partition.
	CoordinatorEpoch int32
	// TxnVersion is the transaction's version (WriteTxnMarkers v2,
	// KIP-1228): 2 when the marker's epoch is the one EndTxn bumped to.
	TxnVersion int8
}

// markerOf is the marker that completes the prepared state st.
func markerOf(st metastore.TxnState) Marker {
	return Marker{
		ProducerID: st.ProducerID, Epoch: st.Epoch, Commit: st.Status == metastore.TxnPrepareCommit,
		CoordinatorEpoch: int32(min(st.Version, math.MaxInt32)), TxnVersion: st.TxnVersion,
	}
}

// Config wires a Coordinator; zero durations take Kafka's defaults.
type Config struct {
	Store   Store
	Markers MarkerWriter
	// NewProducerID hands out a fresh producer id (the broker's blocks
	// reserved in the metastore, shared with idempotent producers).
	NewProducerID func(ctx context.Context) (int64, error)
	// Owns says whether this broker coordinates the transactional id
	// now (Owner over the live write brokers).
	Owns   func(id string) bool
	Now    func() time.Time // nil: time.Now
	Logger zerolog.Logger

	// MaxTimeout is transaction.max.timeout.ms (15 minutes).
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days): the state
	// of an id with no transaction open for that long is removed.
	IDExpiration time.Duration
	// AbortInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (10 s): how often timed-out transactions are looked for.
	AbortInterval time.Duration
	// ExpireInterval is transaction.remove.expired.transaction.cleanup.interval.ms (1 hour).
	ExpireInterval time.Duration
	// CompleteTimeout bounds the wait of EndTxn for its markers (10 s);
	// past it the answer goes out and the background loop finishes.
	CompleteTimeout time.Duration
}

func (c *Config) defaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.IDExpiration == 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.AbortInterval == 0 {
		c.AbortInterval = 10 * time.Second
	}
	if c.ExpireInterval == 0 {
		c.ExpireInterval = time.Hour
	}
	if c.CompleteTimeout == 0 {
		c.CompleteTimeout = 10 * time.Second
	}
	if c.Owns == nil {
		c.Owns = func(string) bool { return true }
	}
}

// Coordinator is the transaction coordinator of one write broker. Every
// state it reads and writes lives in the metastore: it keeps nothing but
// locks, so another write broker continues any transaction it leaves.
type Coordinator struct {
	cfg Config
	log zerolog.Logger

	// locks serialise the requests for one transactional id (striped).
	locks [64]sync.Mutex

	// stats counts the transactions this coordinator completed, by
	// outcome, and those it aborted for their timeout.
	committed, aborted, timedOut atomic.Int64

	mu         sync.Mutex
	completing map[string]bool // ids whose markers a goroutine writes
	wg         sync.WaitGroup
	ctx        context.Context
	cancel     context.CancelFunc
}

// New creates a coordinator; Start runs its timers.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil || cfg.Markers == nil || cfg.NewProducerID == nil {
		return nil, errors.New("txn: Store, Markers and NewProducerID are required")
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg: cfg, log: cfg.Logger.With().Str("component", "txn").Logger(),
		completing: map[string]bool{}, ctx: ctx, cancel: cancel,
	}, nil
}

// Start runs the timeout and expiry loop until Close.
func (c *Coordinator) Start() {
	c.wg.Add(1)
	go c.loop()
}

// Close stops the loop and waits for marker writes under way.
func (c *Coordinator) Close() {
	c.cancel()
	c.wg.Wait()
}

// Owner is the write broker that coordinates transactional id: brokers
// with the write role (write or combined) that are not shutting down are
// ranked by a hash of the id and the broker id (rendezvous hashing), so
// only the ids of a broker that leaves move. -1 with none.
func Owner(id string, brokers []metastore.Broker) int32 {
	best, bestScore := int32(-1), uint64(0)
	for _, b := range brokers {
		if (b.Role != metastore.RoleWrite && b.Role != metastore.RoleCombined) || b.ShuttingDown {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{byte(b.ID >> 24), byte(b.ID >> 16), byte(b.ID >> 8), byte(b.ID)})
		if score := h.Sum64(); best < 0 || score > bestScore {
			best, bestScore = b.ID, score
		}
	}
	return best
}

func (c *Coordinator) lock(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &c.locks[h.Sum32()%uint32(len(c.locks))]
	m.Lock()
	return m.Unlock
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// storeCode maps a metastore failure to the code a client retries on.
func storeCode(err error) int16 {
	if errors.Is(err, metastore.ErrTxnConflict) {
		return kerr.ConcurrentTransactions.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// maxEpoch is the last epoch a producer id is used with (Kafka's
// Short.MaxValue - 1): past it the producer gets a new id.
const maxEpoch = 32766

// InitProducerID is InitProducerId with a transactional id: it returns
// the producer id and epoch to use, or a Kafka error code. expectID and
// expectEpoch are the producer's current ones (v3+, KIP-360), -1 if none.
// A transaction left open by the previous epoch is aborted first, and the
// producer retries on CONCURRENT_TRANSACTIONS until that is done.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expectID int64, expectEpoch int16) (int64, int16, int16) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest.Code
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	if !c.cfg.Owns(id) {
		return -1, -1, kerr.NotCoordinator.Code
	}
	defer c.lock(id)()
	st, found, err := c.cfg.Store.GetTxn(ctx, id)
	if err != nil {
		return -1, -1, storeCode(err)
	}
	now := c.nowMs()
	if !found {
		pid, err := c.cfg.NewProducerID(ctx)
		if err != nil {
			return -1, -1, kerr.CoordinatorNotAvailable.Code
		}
		st = metastore.TxnState{
			TransactionalID: id, ProducerID: pid, Epoch: 0, LastProducerID: -1, LastEpoch: -1,
			TimeoutMs: timeoutMs, Status: metastore.TxnEmpty, UpdateMs: now,
		}
		if _, err := c.cfg.Store.PutTxn(ctx, st, 0, metastore.TxnKeepOffsets); err != nil {
			return -1, -1, storeCode(err)
		}
		return st.ProducerID, st.Epoch, 0
	}
	if expectID >= 0 {
		switch {
		case expectID == st.ProducerID && expectEpoch == st.Epoch:
		case expectID == st.ProducerID && expectEpoch == st.LastEpoch && st.Status == metastore.TxnEmpty,
			expectID == st.LastProducerID && expectEpoch == st.LastEpoch && st.Status == metastore.TxnEmpty:
			// A retry whose answer was lost: the bump it asked for is done.
			return st.ProducerID, st.Epoch, 0
		default:
			return -1, -1, kerr.ProducerFenced.Code
		}
	}
	switch st.Status {
	case metastore.TxnPrepareCommit, metastore.TxnPrepareAbort:
		c.completeAsync(st)
		return -1, -1, kerr.ConcurrentTransactions.Code
	case metastore.TxnOngoing:
		// Fence the old epoch and abort its transaction (Kafka's
		// prepareFenceProducerEpoch): the markers carry the new epoch.
		next := st
		if next.Epoch < maxEpoch {
			next.Epoch++
		}
		// A fence, not the producer's own EndTxn: version 0, so that
		// the fenced producer's EndTxn at its old epoch is not taken for
		// a retry of a version 2 bump (Kafka's PrepareEpochFence).
		next.Status, next.UpdateMs, next.TxnVersion = metastore.TxnPrepareAbort, now, 0
		v, err := c.cfg.Store.PutTxn(ctx, next, st.Version, metastore.TxnDiscardOffsets)
		if err != nil {
			return -1, -1, storeCode(err)
		}
		next.Version = v
		c.completeAsync(next)
		return -1, -1, kerr.ConcurrentTransactions.Code
	}
	next := st
	next.LastProducerID, next.LastEpoch = st.ProducerID, st.Epoch
	if st.Epoch >= maxEpoch-1 {
		pid, err := c.cfg.NewProducerID(ctx)
		if err != nil {
			return -1, -1, kerr.CoordinatorNotAvailable.Code
		}
		next.ProducerID, next.Epoch = pid, 0
	} else {
		next.Epoch++
	}
	next.TimeoutMs, next.Status, next.UpdateMs, next.TxnVersion = timeoutMs, metastore.TxnEmpty, now, 0
	next.Partitions, next.Groups, next.StartMs = nil, nil, 0
	if _, err := c.cfg.Store.PutTxn(ctx, next, st.Version, metastore.TxnKeepOffsets); err != nil {
		return -1, -1, storeCode(err)
	}
	return next.ProducerID, next.Epoch, 0
}

// check loads id's state for a request of producer pid at epoch: its
// code is INVALID_PRODUCER_ID_MAPPING for an unknown id or another
// producer id, PRODUCER_FENCED for another epoch.
func (c *Coordinator) check(ctx context.Context, id string, pid int64, epoch int16) (metastore.TxnState, int16) {
	if id == "" {
		return metastore.TxnState{}, kerr.InvalidRequest.Code
	}
	if !c.cfg.Owns(id) {
		return metastore.TxnState{}, kerr.NotCoordinator.Code
	}
	st, found, err := c.cfg.Store.GetTxn(ctx, id)
	switch {
	case err != nil:
		return st, storeCode(err)
	case !found || st.ProducerID != pid:
		return st, kerr.InvalidProducerIDMapping.Code
	case st.Epoch != epoch:
		return st, kerr.ProducerFenced.Code
	}
	return st, 0
}

// add moves the transaction to Ongoing with the partitions and groups
// added; AddPartitionsToTxn and AddOffsetsToTxn.
func (c *Coordinator) add(ctx context.Context, id string, pid int64, epoch int16, tps []metastore.TopicPartition, group string) int16 {
	defer c.lock(id)()
	st, code := c.check(ctx, id, pid, epoch)
	if code != 0 {
		return code
	}
	return addTo(ctx, c.cfg.Store, st, tps, group, c.nowMs(), c.completeAsync)
}

// addTo is the transition of an add to the state st (read for the
// producer's id and epoch): Prepare* answers CONCURRENT_TRANSACTIONS (and
// has prepared completed, if not nil), anything else becomes Ongoing with
// tps and group in it, written by compare-and-set on st's Version.
func addTo(ctx context.Context, store Store, st metastore.TxnState, tps []metastore.TopicPartition, group string, now int64, prepared func(metastore.TxnState)) int16 {
	switch st.Status {
	case metastore.TxnPrepareCommit, metastore.TxnPrepareAbort:
		if prepared != nil {
			prepared(st)
		}
		return kerr.ConcurrentTransactions.Code
	}
	next := st
	if st.Status != metastore.TxnOngoing {
		next.Partitions, next.Groups, next.StartMs = nil, nil, now
	}
	changed := st.Status != metastore.TxnOngoing
	for _, tp := range tps {
		if !slices.Contains(next.Partitions, tp) {
			next.Partitions = append(next.Partitions, tp)
			changed = true
		}
	}
	if group != "" && !slices.Contains(next.Groups, group) {
		next.Groups = append(next.Groups, group)
		changed = true
	}
	if !changed {
		return 0
	}
	next.Status, next.UpdateMs = metastore.TxnOngoing, now
	if _, err := store.PutTxn(ctx, next, st.Version, metastore.TxnKeepOffsets); err != nil {
		return storeCode(err)
	}
	return 0
}

// AddImplicit is the implicit add of transaction version 2 (KIP-890 part
// 2), made by the broker that receives the request rather than by the
// transactional id's coordinator: a partition leader adds a partition
// when a Produce v12+ brings a producer's first transactional batch to
// it, a group coordinator adds its group when TxnOffsetCommit v5+ brings
// a transaction's offsets (the client sends neither AddPartitionsToTxn
// nor AddOffsetsToTxn). Kafka's brokers ask the coordinator with
// AddPartitionsToTxn v5; here the state is the metastore's, so the
// broker moves it itself by compare-and-set, as a coordinator would, and
// a write that meets another (ErrTxnConflict) is tried again on the new
// state. Codes as AddPartitionsToTxn.
func AddImplicit(ctx context.Context, store Store, id string, pid int64, epoch int16, tps []metastore.TopicPartition, group string, now int64) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	for try := 0; ; try++ {
		st, found, err := store.GetTxn(ctx, id)
		switch {
		case err != nil:
			return storeCode(err)
		case !found || st.ProducerID != pid:
			return kerr.InvalidProducerIDMapping.Code
		case st.Epoch != epoch:
			return kerr.ProducerFenced.Code
		}
		code := addTo(ctx, store, st, tps, group, now, nil)
		if code != kerr.ConcurrentTransactions.Code || try == 2 || st.Status == metastore.TxnPrepareCommit || st.Status == metastore.TxnPrepareAbort {
			return code
		}
	}
}

// AddPartitions is AddPartitionsToTxn (v0-3): the partitions join the
// transaction, which becomes Ongoing.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []metastore.TopicPartition) int16 {
	return c.add(ctx, id, pid, epoch, tps, "")
}

// AddOffsets is AddOffsetsToTxn: group's offsets commit with the
// transaction.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string) int16 {
	if group == "" {
		return kerr.InvalidGroupID.Code
	}
	return c.add(ctx, id, pid, epoch, nil, group)
}

// VerifyPartitions is KIP-890 part 1's check, made by a partition leader
// before it takes a producer's first transactional batch, with the codes
// of Kafka's handleVerifyPartitionsInTransaction: 0 if every partition is
// in the producer's ongoing transaction at this epoch;
// INVALID_PRODUCER_ID_MAPPING (no state, another producer id),
// PRODUCER_FENCED (another epoch), CONCURRENT_TRANSACTIONS (a Prepare*
// state) or TRANSACTION_ABORTABLE (a partition not in the transaction,
// none open); COORDINATOR_NOT_AVAILABLE if the metastore cannot answer.
// The leader turns them into Produce codes by the request's version (the
// broker's verifyTxnBatch). Any broker can ask: the state is read from the
// metastore, not from the id's coordinator.
func VerifyPartitions(ctx context.Context, store Store, id string, pid int64, epoch int16, tps []metastore.TopicPartition) int16 {
	st, found, err := store.GetTxn(ctx, id)
	switch {
	case err != nil:
		return storeCode(err)
	case !found || st.ProducerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case st.Epoch != epoch:
		return kerr.ProducerFenced.Code
	case st.Status == metastore.TxnPrepareCommit || st.Status == metastore.TxnPrepareAbort:
		return kerr.ConcurrentTransactions.Code
	}
	for _, tp := range tps {
		if st.Status != metastore.TxnOngoing || !slices.Contains(st.Partitions, tp) {
			return kerr.TransactionAbortable.Code
		}
	}
	return 0
}

// VerifyEach is AddPartitionsToTxn v4+ with VerifyOnly (Kafka's
// handleVerifyPartitionsInTransaction): a code for each partition, 0 if
// it is in the producer's transaction and TRANSACTION_ABORTABLE if not;
// every partition gets INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED or
// CONCURRENT_TRANSACTIONS (a Prepare* state) instead where that holds.
func (c *Coordinator) VerifyEach(ctx context.Context, id string, pid int64, epoch int16, tps []metastore.TopicPartition) map[metastore.TopicPartition]int16 {
	out := make(map[metastore.TopicPartition]int16, len(tps))
	all := func(code int16) map[metastore.TopicPartition]int16 {
		for _, tp := range tps {
			out[tp] = code
		}
		return out
	}
	st, code := c.check(ctx, id, pid, epoch)
	switch {
	case code != 0:
		return all(code)
	case st.Status == metastore.TxnPrepareCommit || st.Status == metastore.TxnPrepareAbort:
		return all(kerr.ConcurrentTransactions.Code)
	}
	for _, tp := range tps {
		out[tp] = 0
		if st.Status != metastore.TxnOngoing || !slices.Contains(st.Partitions, tp) {
			out[tp] = kerr.TransactionAbortable.Code
		}
	}
	return out
}

// EndResult is EndTxn's answer: a Kafka error code, and the producer id
// and epoch the producer continues with (EndTxn v5).
type EndResult struct {
	ProducerID int64
	Epoch      int16
	Code       int16
}

func endErr(code int16) EndResult { return EndResult{ProducerID: -1, Epoch: -1, Code: code} }

// EndTxn commits or aborts the producer's transaction: the decision and
// the group offsets the transaction commits reach the metastore in one
// write (PrepareCommit or PrepareAbort), then the markers are written to
// every partition and the state completes. The answer waits for the
// markers up to CompleteTimeout; the decision stands either way.
//
// tv is the transaction version the request asks for (2 from EndTxn v5,
// KIP-890 part 2): the decision bumps the producer's epoch (a new
// producer id at epoch 0 once the epoch is exhausted), the markers carry
// the bumped epoch, and the producer continues with what EndResult says.
// A retry of a version 2 EndTxn comes with the epoch before the bump; an
// abort of a version 2 transaction that nothing reached (Empty, or
// Complete* at the current epoch) is an empty abort that bumps the epoch.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool, tv int8) EndResult {
	if id == "" {
		return endErr(kerr.InvalidRequest.Code)
	}
	if !c.cfg.Owns(id) {
		return endErr(kerr.NotCoordinator.Code)
	}
	unlock := c.lock(id)
	st, found, err := c.cfg.Store.GetTxn(ctx, id)
	if err != nil {
		unlock()
		return endErr(storeCode(err))
	}
	want := metastore.TxnPrepareAbort
	done := metastore.TxnCompleteAbort
	end := metastore.TxnDiscardOffsets
	if commit {
		want, done, end = metastore.TxnPrepareCommit, metastore.TxnCompleteCommit, metastore.TxnCommitOffsets
	}
	// Kafka's TransactionCoordinator.endTransaction: with version 2 the
	// state's epoch is one past the request's once the decision is made,
	// so a retry is told apart from the next transaction's EndTxn.
	// Kafka's handleEndTransaction picks the version 1 rules (the
	// request's epoch must be the state's) for a request before v5
	// whatever the state's version (a timed-out transaction's abort
	// leaves version 2, abortTimedOut).
	v2 := st.TxnVersion >= 2 && tv >= 2
	retryBump := v2 && st.ProducerID == pid && int(st.Epoch) == int(epoch)+1 && !st.HasNext
	retryOverflow := v2 && st.LastProducerID == pid && st.LastEpoch == epoch+1 && epoch >= maxEpoch && st.Epoch == 0
	current := st.ProducerID == pid && st.Epoch == epoch
	var valid bool
	switch {
	case !found:
	case !v2:
		valid = current
	case st.Status == metastore.TxnOngoing || st.Status == metastore.TxnEmpty:
		valid = current
	case st.Status == want || st.Status == metastore.TxnPrepareCommit || st.Status == metastore.TxnPrepareAbort:
		valid = retryBump || (st.HasNext && st.ProducerID == pid && int(st.Epoch) == int(epoch)+1)
	default: // Complete*
		valid = retryBump || retryOverflow || (current && tv >= 2)
	}
	emptyAbort := false
	switch {
	case !found || (st.ProducerID != pid && !retryOverflow):
		unlock()
		return endErr(kerr.InvalidProducerIDMapping.Code)
	case !valid:
		unlock()
		return endErr(kerr.ProducerFenced.Code)
	case st.Status == metastore.TxnOngoing:
	case tv >= 2 && !commit && current && (st.Status == metastore.TxnEmpty || st.Status == metastore.TxnCompleteCommit || st.Status == metastore.TxnCompleteAbort):
		emptyAbort = true
	case st.Status == done && !(v2 && current):
		// A retry of an EndTxn that completed (with version 2 one at
		// the epoch before the bump: the current one asks to end the
		// next transaction, which holds nothing).
		unlock()
		return EndResult{ProducerID: st.ProducerID, Epoch: st.Epoch}
	case st.Status == want:
		unlock()
		c.completeAsync(st)
		return endErr(kerr.ConcurrentTransactions.Code)
	default:
		unlock()
		return endErr(kerr.InvalidTxnState.Code)
	}
	next := st
	next.Status, next.UpdateMs, next.TxnVersion = want, c.nowMs(), tv
	next.HasNext, next.NextProducerID = false, 0
	if emptyAbort {
		next.Partitions, next.Groups, next.StartMs = nil, nil, next.UpdateMs
	}
	if tv >= 2 {
		next.LastProducerID, next.LastEpoch = st.ProducerID, st.Epoch
		next.Epoch = st.Epoch + 1
		if st.Epoch >= maxEpoch {
			npid, err := c.cfg.NewProducerID(ctx)
			if err != nil {
				unlock()
				return endErr(kerr.CoordinatorNotAvailable.Code)
			}
			next.HasNext, next.NextProducerID = true, npid
		}
	}
	v, err := c.cfg.Store.PutTxn(ctx, next, st.Version, end)
	unlock()
	if err != nil {
		return endErr(storeCode(err))
	}
	next.Version = v
	res := EndResult{ProducerID: next.ProducerID, Epoch: next.Epoch}
	if next.HasNext {
		res.ProducerID, res.Epoch = next.NextProducerID, 0
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CompleteTimeout)
	defer cancel()
	if err := c.complete(cctx, next); err != nil {
		c.log.Warn().Err(err).Str("transactional_id", id).Msg("markers not all written yet; completing in the background")
		c.completeAsync(next)
	}
	return res
}

// complete writes the markers of a prepared transaction and moves it to
// CompleteCommit or CompleteAbort. A state that moved meanwhile (another
// coordinator completed it) is left alone.
func (c *Coordinator) complete(ctx context.Context, st metastore.TxnState) error {
	commit := st.Status == metastore.TxnPrepareCommit
	if !commit && st.Status != metastore.TxnPrepareAbort {
		return nil
	}
	if err := c.cfg.Markers.WriteMarkers(ctx, markerOf(st), st.Partitions); err != nil {
		return err
	}
	defer c.lock(st.TransactionalID)()
	next := st
	next.Status = metastore.TxnCompleteAbort
	if commit {
		next.Status = metastore.TxnCompleteCommit
	}
	if st.HasNext {
		// Version 2 with the epoch exhausted: the producer continues
		// with the new id (Kafka's prepareComplete).
		next.LastProducerID, next.LastEpoch = st.ProducerID, st.Epoch
		next.ProducerID, next.Epoch = st.NextProducerID, 0
		next.HasNext, next.NextProducerID = false, 0
	}
	next.Partitions, next.Groups, next.UpdateMs = nil, nil, c.nowMs()
	_, err := c.cfg.Store.PutTxn(ctx, next, st.Version, metastore.TxnKeepOffsets)
	switch {
	case err == nil && commit:
		c.committed.Add(1)
	case err == nil:
		c.aborted.Add(1)
	case !errors.Is(err, metastore.ErrTxnConflict):
		return err
	}
	return nil
}

// Stats returns how many transactions this coordinator completed with a
// commit and with an abort, and how many of the aborts it began because
// the transaction timed out, since start.
func (c *Coordinator) Stats() (committed, aborted, timedOut int64) {
	return c.committed.Load(), c.aborted.Load(), c.timedOut.Load()
}

// completeAsync completes st in the background, retrying until it is
// done, the state moved on, or the coordinator closes; one goroutine per
// transactional id.
func (c *Coordinator) completeAsync(st metastore.TxnState) {
	c.mu.Lock()
	if c.completing[st.TransactionalID] || c.ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	c.completing[st.TransactionalID] = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.completing, st.TransactionalID)
			c.mu.Unlock()
		}()
		backoff := 100 * time.Millisecond
		for c.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.CompleteTimeout)
			err := c.complete(ctx, st)
			cancel()
			if err == nil {
				return
			}
			c.log.Debug().Err(err).Str("transactional_id", st.TransactionalID).Msg("writing transaction markers")
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			// Reload: another coordinator may have finished it.
			ctx, cancel = context.WithTimeout(c.ctx, c.cfg.CompleteTimeout)
			cur, found, err := c.cfg.Store.GetTxn(ctx, st.TransactionalID)
			cancel()
			if err == nil && (!found || cur.Version != st.Version) {
				return
			}
		}
	}()
}

func (c *Coordinator) loop() {
	defer c.wg.Done()
	abort := time.NewTicker(c.cfg.AbortInterval)
	defer abort.Stop()
	lastExpire := c.cfg.Now()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-abort.C:
		}
		expire := c.cfg.Now().Sub(lastExpire) >= c.cfg.ExpireInterval
		if expire {
			lastExpire = c.cfg.Now()
		}
		c.Sweep(c.ctx, expire)
	}
}

// Sweep is one round of the timers over the ids this broker coordinates:
// it aborts every Ongoing transaction open longer than its timeout
// (fencing the producer's epoch, as Kafka's abortTimedOutTransactions),
// finishes prepared ones (left by a coordinator that died), and with
// expire removes the state of ids idle for IDExpiration.
func (c *Coordinator) Sweep(ctx context.Context, expire bool) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.CompleteTimeout)
	all, err := c.cfg.Store.ListTxns(lctx)
	cancel()
	if err != nil {
		c.log.Debug().Err(err).Msg("listing transactions")
		return
	}
	now := c.nowMs()
	for _, st := range all {
		if !c.cfg.Owns(st.TransactionalID) {
			continue
		}
		switch st.Status {
		case metastore.TxnPrepareCommit, metastore.TxnPrepareAbort:
			c.completeAsync(st)
		case metastore.TxnOngoing:
			if now-st.StartMs > int64(st.TimeoutMs) {
				c.abortTimedOut(ctx, st)
			}
		case metastore.TxnEmpty, metastore.TxnCompleteCommit, metastore.TxnCompleteAbort:
			if expire && now-st.UpdateMs > c.cfg.IDExpiration.Milliseconds() {
				c.expireID(ctx, st)
			}
		}
	}
}

// abortTimedOut aborts a transaction past its timeout as Kafka 4.4's
// abortTimedOutTransactions does with transaction version 2 finalized
// (it ends the transaction at the cluster's version, not the client's):
// the abort bumps the epoch by one (to 32767 at most, no new producer id)
// and keeps the epoch before it as the last epoch, the markers carry the
// bumped epoch at version 2. The producer's batches at its old epoch are
// then refused by the partitions (INVALID_PRODUCER_EPOCH), and its EndTxn
// is answered as EndTxn answers after a version 2 bump: from v5 an abort
// at the old epoch is the retry of that abort (answered with the bumped
// epoch, so the producer goes on) and a commit INVALID_TXN_STATE; before
// v5 PRODUCER_FENCED (Kafka's endTransactionWithTV1 wants the epoch
// itself).
func (c *Coordinator) abortTimedOut(ctx context.Context, st metastore.TxnState) {
	defer c.lock(st.TransactionalID)()
	next := st
	next.LastProducerID, next.LastEpoch = st.ProducerID, st.Epoch
	if next.Epoch < math.MaxInt16 {
		next.Epoch++
	}
	next.HasNext, next.NextProducerID = false, 0
	next.Status, next.UpdateMs, next.TxnVersion = metastore.TxnPrepareAbort, c.nowMs(), 2
	wctx, cancel := context.WithTimeout(ctx, c.cfg.CompleteTimeout)
	v, err := c.cfg.Store.PutTxn(wctx, next, st.Version, metastore.TxnDiscardOffsets)
	cancel()
	if err != nil {
		return // moved meanwhile, or the metastore is away: next round
	}
	c.log.Info().Str("transactional_id", st.TransactionalID).Int64("producer_id", st.ProducerID).
		Int32("timeout_ms", st.TimeoutMs).Msg("aborting timed-out transaction")
	c.timedOut.Add(1)
	next.Version = v
	c.completeAsync(next)
}

func (c *Coordinator) expireID(ctx context.Context, st metastore.TxnState) {
	defer c.lock(st.TransactionalID)()
	wctx, cancel := context.WithTimeout(ctx, c.cfg.CompleteTimeout)
	defer cancel()
	if err := c.cfg.Store.DeleteTxn(wctx, st.TransactionalID, st.Version); err == nil {
		c.log.Info().Str("transactional_id", st.TransactionalID).Msg("expired transactional id")
	}
}

// Describe returns the states of ids (DescribeTransactions); found says
// which exist.
func (c *Coordinator) Describe(ctx context.Context, id string) (metastore.TxnState, bool, int16) {
	if !c.cfg.Owns(id) {
		return metastore.TxnState{}, false, kerr.NotCoordinator.Code
	}
	st, found, err := c.cfg.Store.GetTxn(ctx, id)
	if err != nil {
		return st, false, storeCode(err)
	}
	return st, found, 0
}

// List returns the states of the ids this broker coordinates
// (ListTransactions).
func (c *Coordinator) List(ctx context.Context) ([]metastore.TxnState, int16) {
	all, err := c.cfg.Store.ListTxns(ctx)
	if err != nil {
		return nil, storeCode(err)
	}
	var out []metastore.TxnState
	for _, st := range all {
		if c.cfg.Owns(st.TransactionalID) {
			out = append(out, st)
		}
	}
	return out, 0
}
