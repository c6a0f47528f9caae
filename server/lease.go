package server

import (
	"context"
	"errors"
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
}

// Lease keeps this broker registered in the metastore. A broker whose
// lease lapsed is fenced and registers again, with a new incarnation.
type Lease struct {
	reg         Registrar
	broker      metastore.Broker
	every       time.Duration
	log         zerolog.Logger
	incarnation uint64
}

// NewLease heartbeats three times per lease duration.
func NewLease(reg Registrar, b metastore.Broker, leaseDuration time.Duration, lg zerolog.Logger) *Lease {
	return &Lease{reg: reg, broker: b, every: leaseDuration / 3, log: lg.With().Str("component", "lease").Logger()}
}

// Register registers the broker; call it before serving.
func (l *Lease) Register(ctx context.Context) error {
	inc, err := l.reg.RegisterBroker(ctx, l.broker)
	if err != nil {
		return err
	}
	l.incarnation = inc
	l.log.Info().Uint64("incarnation", inc).Msg("registered broker")
	return nil
}

// Run heartbeats until ctx ends.
func (l *Lease) Run(ctx context.Context) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, l.every)
		err := l.reg.Heartbeat(hctx, l.broker.ID, l.incarnation)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, metastore.ErrFenced):
			l.log.Warn().Msg("lease lapsed: registering again")
			if err := l.Register(ctx); err != nil && ctx.Err() == nil {
				l.log.Error().Err(err).Msg("registering again")
			}
		case ctx.Err() == nil:
			l.log.Warn().Err(err).Msg("heartbeat failed")
		}
	}
}
