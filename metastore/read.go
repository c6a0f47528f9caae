package metastore

import (
	"context"
	"crypto/rand"
	"time"
)

// Linearizable reads use raft's ReadIndex, batched like etcd's
// linearizableReadLoop: every reader that arrives while a round is in
// flight joins the next round, so one ReadIndex (one heartbeat round at the
// leader) serves all of them. A round ends when this node has applied up to
// the read index the leader confirmed; then the readers read bbolt.

type readWaiter struct {
	done chan struct{}
}

// linearizableRead returns once this node's state includes every write
// committed before the call.
func (n *Node) linearizableRead(ctx context.Context) error {
	n.readMu.Lock()
	if n.readNext == nil {
		n.readNext = &readWaiter{done: make(chan struct{})}
	}
	w := n.readNext
	n.readMu.Unlock()
	select {
	case n.readReqc <- struct{}{}:
	default:
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ErrTimeout
	case <-n.stopc:
		return ErrStopped
	}
}

func (n *Node) readLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.readReqc:
		case <-n.stopc:
			return
		}
		n.readMu.Lock()
		w := n.readNext
		n.readNext = nil
		n.readMu.Unlock()
		if w == nil {
			continue
		}
		for !n.readRound() {
			select {
			case <-n.stopc:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		close(w.done)
	}
}

// readRound runs one ReadIndex round; false means retry (no leader, lost
// message, timeout).
func (n *Node) readRound() bool {
	var key [8]byte
	_, _ = rand.Read(key[:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.rn.ReadIndex(ctx, key[:]); err != nil {
		return false
	}
	for {
		select {
		case rs := <-n.readStatec:
			if string(rs.RequestCtx) != string(key[:]) {
				continue // a stale round's answer
			}
			return n.waitApplied(ctx, rs.Index) == nil
		case <-ctx.Done():
			return false
		case <-n.stopc:
			return false
		}
	}
}
