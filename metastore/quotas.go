package metastore

import (
	"context"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// QuotaName is one part of a client quota entity: absent (Set false),
// Kafka's <default> of its type (Default), or a name.
type QuotaName struct {
	Set     bool   `json:"s,omitempty"`
	Default bool   `json:"d,omitempty"`
	Name    string `json:"n,omitempty"`
}

// QuotaEntity is whom a client quota applies to, as Kafka's
// ClientQuotaEntity: a user, a client id, a user and a client id, or an
// IP address (connection_creation_rate only).
type QuotaEntity struct {
	User     QuotaName `json:"u"`
	ClientID QuotaName `json:"c"`
	IP       QuotaName `json:"ip"`
}

// ClientQuota is the quota values (producer_byte_rate and the like) set
// for one entity.
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

// QuotaChange sets and removes quota values of one entity.
type QuotaChange struct {
	Entity QuotaEntity        `json:"e"`
	Set    map[string]float64 `json:"set,omitempty"`
	Del    []string           `json:"del,omitempty"`
}

// ClientQuotas returns the quotas set, and a generation that changes
// whenever they do, so a reader can keep what it derives from them until
// then. The slice is shared: callers must not modify it.
func (c *Client) ClientQuotas() (uint64, []ClientQuota) { return c.v.ClientQuotas() }

// AlterClientQuotas applies the changes in one metastore command. The
// caller validates them (server, Kafka's rules).
func (c *Client) AlterClientQuotas(ctx context.Context, changes []QuotaChange) error {
	_, err := c.write(ctx, command{Op: opAlterClientQuotas, Quotas: changes})
	return err
}

func (a *applier) alterClientQuotas(c *command) result {
	b := a.tx.Bucket(bucketClientQuotas)
	for _, ch := range c.Quotas {
		k := mustJSON(ch.Entity)
		var cur map[string]float64
		if v := b.Get(k); v != nil {
			mustUnmarshal(v, &cur)
		}
		cur = maps.Clone(cur)
		if cur == nil {
			cur = map[string]float64{}
		}
		maps.Copy(cur, ch.Set)
		for _, d := range ch.Del {
			delete(cur, d)
		}
		if len(cur) == 0 {
			a.del(b, k)
			cur = nil
		} else {
			a.put(b, k, mustJSON(cur))
		}
		a.events = append(a.events, event{Rev: a.index, Kind: "quota", Quota: &ClientQuota{Entity: ch.Entity, Values: cur}})
	}
	return result{Visible: true}
}

func loadClientQuotas(tx *bolt.Tx) []ClientQuota {
	var out []ClientQuota
	_ = tx.Bucket(bucketClientQuotas).ForEach(func(k, v []byte) error {
		var q ClientQuota
		mustUnmarshal(k, &q.Entity)
		mustUnmarshal(v, &q.Values)
		out = append(out, q)
		return nil
	})
	return out
}

// quotaSet is the view's client quotas and a generation that moves with
// every change. It is replaced, never modified: ClientQuotas, read on
// every request the broker measures, loads it without the view's lock.
type quotaSet struct {
	gen  uint64
	list []ClientQuota
}

// storeQuotasLocked replaces the quotas (v.mu held for writing).
func (v *view) storeQuotasLocked(list []ClientQuota) {
	var gen uint64
	if cur := v.quotas.Load(); cur != nil {
		gen = cur.gen + 1
	}
	v.quotas.Store(&quotaSet{gen: gen, list: list})
}

// setQuotaLocked records q (no values: removed) in the view.
func (v *view) setQuotaLocked(q ClientQuota) {
	cur := v.quotas.Load().list
	i := slices.IndexFunc(cur, func(c ClientQuota) bool { return c.Entity == q.Entity })
	next := slices.Clone(cur)
	switch {
	case i >= 0 && len(q.Values) == 0:
		next = slices.Delete(next, i, i+1)
	case i >= 0:
		next[i] = ClientQuota{Entity: q.Entity, Values: maps.Clone(q.Values)}
	case len(q.Values) > 0:
		next = append(next, ClientQuota{Entity: q.Entity, Values: maps.Clone(q.Values)})
	}
	v.storeQuotasLocked(next)
}

func (v *view) ClientQuotas() (uint64, []ClientQuota) {
	qs := v.quotas.Load()
	return qs.gen, qs.list
}

func cloneQuotas(qs []ClientQuota) []ClientQuota {
	out := make([]ClientQuota, len(qs))
	for i, q := range qs {
		out[i] = ClientQuota{Entity: q.Entity, Values: maps.Clone(q.Values)}
	}
	return out
}
