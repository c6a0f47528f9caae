package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/metastore"
)

// Registrar is the part of the metastore a broker's lease needs.
type Registrar interface {
	// RegisterBroker records b and returns its new incarnation.
	RegisterBroker(ctx context.Context, b metastore.Broker) (uint64, error)
	// Heartbeat renews the lease of incarnation; metastore.ErrFenced once
	// it lapsed or a newer incarnation registered.
	Heartbeat(ctx context.Context, brokerID int32, incarnation uint64) error
	// ShutdownBroker marks the registration as in its controlled
	// shutdown; UnregisterBroker ends it.
	ShutdownBroker(ctx context.Context, brokerID int32, incarnation uint64) error
	UnregisterBroker(ctx context.Context, brokerID int32, incarnation uint64) error
}

// Lease keeps this broker registered in the metastore. A broker whose
// lease lapsed is fenced and registers again, with a new incarnation.
type Lease struct {
	reg      Registrar
	broker   metastore.Broker
	duration time.Duration
	every    time.Duration
	log      zerolog.Logger
	// OnLapse, when set, is called once the metastore says the lease
	// lapsed (before registering again): what this broker owned under
	// it (groups) may belong to another broker now.
	OnLapse func()
	// Recorded, when set, returns the cluster's recorded broker lease
	// (metastore.Client.BrokerLease; 0 while unknown). The lease is held
	// for the shorter of it and the configured duration, so a broker
	// configured longer than the metastore never believes in a lease the
	// metastore has already expired.
	Recorded func() time.Duration
	warned   atomic.Bool

	incarnation atomic.Uint64
	mu          sync.Mutex
	validUntil  time.Time // monotonic: last acknowledged renewal's send time + duration
}

// NewLease heartbeats three times per lease duration.
func NewLease(reg Registrar, b metastore.Broker, leaseDuration time.Duration, lg zerolog.Logger) *Lease {
	return &Lease{reg: reg, broker: b, duration: leaseDuration, every: leaseDuration / 3, log: lg.With().Str("component", "lease").Logger()}
}

// Incarnation is the incarnation of the current registration: the fence
// of what this broker writes as an owner (group state and offsets).
func (l *Lease) Incarnation() uint64 { return l.incarnation.Load() }

// Valid says whether the lease certainly still holds: less than the lease
// duration has passed since the send of the last renewal the metastore
// acknowledged. The metastore measures the lease from its receipt of that
// renewal, later, so a broker paused or cut off past its lease (SIGSTOP, a
// partition) knows it may be fenced before it hears so, and serves nothing
// it owned under the lease meanwhile.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.validUntil)
}

// held is how long a renewal holds the lease: the configured duration, or
// the cluster's recorded one when that is shorter.
func (l *Lease) held() time.Duration {
	d := l.duration
	if l.Recorded == nil {
		return d
	}
	if r := l.Recorded(); r > 0 && r != d {
		if l.warned.CompareAndSwap(false, true) {
			l.log.Warn().Dur("configured", d).Dur("recorded", r).Dur("held_for", min(d, r)).
				Msg("broker.session.timeout.ms differs from the cluster's recorded broker lease; the lease is held for the shorter")
		}
		d = min(d, r)
	}
	return d
}

func (l *Lease) renewed(sent time.Time) {
	d := l.held()
	l.mu.Lock()
	if v := sent.Add(d); v.After(l.validUntil) {
		l.validUntil = v
	}
	l.mu.Unlock()
}

// Register registers the broker; call it before serving.
func (l *Lease) Register(ctx context.Context) error {
	sent := time.Now()
	inc, err := l.reg.RegisterBroker(ctx, l.broker)
	if err != nil {
		return err
	}
	l.incarnation.Store(inc)
	l.renewed(sent)
	l.log.Info().Uint64("incarnation", inc).Msg("registered broker")
	return nil
}

// Run heartbeats until ctx ends.
func (l *Lease) Run(ctx context.Context) {
	for {
		// Three heartbeats per lease, of the length the lease is held
		// for (shorter than configured when the cluster records less).
		every := l.every
		if h := l.held(); h/3 < every {
			every = h / 3
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, every)
		sent := time.Now()
		err := l.reg.Heartbeat(hctx, l.broker.ID, l.incarnation.Load())
		cancel()
		switch {
		case err == nil:
			l.renewed(sent)
		case errors.Is(err, metastore.ErrFenced):
			l.log.Warn().Msg("lease lapsed: registering again")
			if l.OnLapse != nil {
				l.OnLapse()
			}
			if err := l.Register(ctx); err != nil && ctx.Err() == nil {
				l.log.Error().Err(err).Msg("registering again")
			}
		case ctx.Err() == nil:
			l.log.Warn().Err(err).Msg("heartbeat failed")
		}
	}
}

// ShuttingDown tells the metastore this broker is in its controlled
// shutdown: nothing is handed to it any more (leadership, new groups).
func (l *Lease) ShuttingDown(ctx context.Context) error {
	return l.reg.ShutdownBroker(ctx, l.broker.ID, l.incarnation.Load())
}

// Release ends the registration at once, as the last step of a controlled
// shutdown, instead of letting it lapse: the broker leaves Metadata and its
// groups can be claimed by another read broker right away.
func (l *Lease) Release(ctx context.Context) error {
	err := l.reg.UnregisterBroker(ctx, l.broker.ID, l.incarnation.Load())
	if err == nil {
		l.log.Info().Msg("released the broker lease")
	}
	return err
}
