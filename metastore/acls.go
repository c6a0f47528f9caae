package metastore

import (
	"context"
	"sort"

	"github.com/sluice-broker/sluice/acl"
)

// ACLs are part of the cache-visible state: every broker's view holds all
// of them (a few thousand bindings at most in practice), follows their
// changes through the watch like topics, and its authorizer rebuilds its
// index when the view's ACL generation moves.

// createACLs stores each binding once: a binding already present is a
// success that changes nothing, as in Kafka. Bindings are validated by the
// caller (the broker answers INVALID_REQUEST per binding); apply checks
// again so that no invalid binding is ever stored.
func (a *applier) createACLs(c *command) result {
	for _, b := range c.ACLs {
		if b.Validate() != nil {
			return result{Err: errCode(ErrInvalidRequest)}
		}
	}
	bk := a.tx.Bucket(bucketACLs)
	changed := false
	for _, b := range c.ACLs {
		k := []byte(b.Key())
		if bk.Get(k) != nil {
			continue
		}
		a.put(bk, k, mustJSON(b))
		cp := b
		a.events = append(a.events, event{Rev: a.index, Kind: "acl", ACL: &cp})
		changed = true
	}
	return result{Visible: changed}
}

// deleteACLs removes the bindings each filter matches. A binding matched by
// several filters is reported under the first, as Kafka's AclAuthorizer
// reports it.
func (a *applier) deleteACLs(c *command) result {
	bk := a.tx.Bucket(bucketACLs)
	var all []acl.Binding
	_ = bk.ForEach(func(_, v []byte) error {
		var b acl.Binding
		mustUnmarshal(v, &b)
		all = append(all, b)
		return nil
	})
	out := make([][]acl.Binding, len(c.ACLFilters))
	gone := map[string]bool{}
	for i, f := range c.ACLFilters {
		if f.Validate() != nil {
			continue
		}
		for _, b := range all {
			k := b.Key()
			if gone[k] || !f.Matches(b) {
				continue
			}
			gone[k] = true
			out[i] = append(out[i], b)
			a.del(bk, []byte(k))
			cp := b
			a.events = append(a.events, event{Rev: a.index, Kind: "acl", ACL: &cp, Deleted: true})
		}
	}
	return result{Deleted: out, Visible: len(gone) > 0}
}

// CreateACLs stores bindings (each valid: acl.Binding.Validate); present
// ones are left as they are.
func (c *Client) CreateACLs(ctx context.Context, bs []acl.Binding) error {
	_, err := c.write(ctx, command{Op: opCreateACLs, ACLs: bs})
	return err
}

// DeleteACLs deletes the bindings the filters match and returns, per
// filter, those it deleted.
func (c *Client) DeleteACLs(ctx context.Context, fs []acl.Filter) ([][]acl.Binding, error) {
	r, err := c.write(ctx, command{Op: opDeleteACLs, ACLFilters: fs})
	if err != nil {
		return nil, err
	}
	if len(r.Deleted) != len(fs) {
		r.Deleted = append(r.Deleted, make([][]acl.Binding, len(fs)-len(r.Deleted))...)
	}
	return r.Deleted, nil
}

// ACLs returns every binding in the cache, in a stable order, with the
// cache's ACL generation (acl.Source).
func (c *Client) ACLs() (uint64, []acl.Binding) { return c.v.ACLs() }

// ACLGeneration changes whenever the cached bindings do (acl.Source).
func (c *Client) ACLGeneration() uint64 { return c.v.aclGen.Load() }

func (v *view) ACLs() (uint64, []acl.Binding) {
	v.mu.RLock()
	out := make([]acl.Binding, 0, len(v.acls))
	for _, b := range v.acls {
		out = append(out, b)
	}
	gen := v.aclGen.Load()
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return gen, out
}
