package metastore

import (
	"bytes"
	"context"
	"errors"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// ScramCredential is one user's SCRAM credential for one mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512), as Kafka's UserScramCredentialRecord:
// never the password, only what RFC 5802 has a server keep. Delete marks a
// removal in an alter_scram command.
type ScramCredential struct {
	User       string `json:"u"`
	Mechanism  string `json:"m"`
	Salt       []byte `json:"salt,omitempty"`
	StoredKey  []byte `json:"sk,omitempty"`
	ServerKey  []byte `json:"svk,omitempty"`
	Iterations int32  `json:"i,omitempty"`
	Delete     bool   `json:"del,omitempty"`
}

// The credentials bucket: user 0x00 mechanism -> JSON ScramCredential.
// Credentials are cache-visible (every broker authenticates from its own
// view, as Kafka brokers do from their metadata image).
func scramKey(user, mech string) []byte {
	k := make([]byte, 0, len(user)+1+len(mech))
	k = append(k, user...)
	k = append(k, 0)
	return append(k, mech...)
}

// applyAlterScram applies one alter_scram command: every upsertion and
// deletion in it, together. Deleting a credential that does not exist is
// not an error here (the broker answers RESOURCE_NOT_FOUND from its view
// before proposing).
func (a *applier) applyAlterScram(c *command) result {
	if len(c.Scram) == 0 {
		return result{Err: errCode(ErrInvalidRequest)}
	}
	for _, cr := range c.Scram {
		if cr.User == "" || bytes.IndexByte([]byte(cr.User), 0) >= 0 || cr.Mechanism == "" {
			return result{Err: errCode(ErrInvalidRequest)}
		}
	}
	b := a.tx.Bucket(bucketCredentials)
	var emptied []string // users whose credentials this command deleted
	for _, cr := range c.Scram {
		k := scramKey(cr.User, cr.Mechanism)
		if cr.Delete {
			if b.Get(k) != nil {
				a.del(b, k)
				emptied = append(emptied, cr.User)
			}
			a.events = append(a.events, event{Rev: a.index, Kind: "scram", Scram: &ScramCredential{User: cr.User, Mechanism: cr.Mechanism}, Deleted: true})
			continue
		}
		cr := cr
		a.put(b, k, mustJSON(cr))
		a.events = append(a.events, event{Rev: a.index, Kind: "scram", Scram: &cr})
	}
	// A user left without any credential stops being a stored super
	// user (superusers.go): one created later under the same name is
	// not the bootstrap user.
	for _, u := range emptied {
		prefix := scramKey(u, "")
		if k, _ := b.Cursor().Seek(prefix); k == nil || !bytes.HasPrefix(k, prefix) {
			a.removeSuperUser("User:" + u)
		}
	}
	return result{Visible: true}
}

func loadScram(tx *bolt.Tx, img *image) {
	_ = tx.Bucket(bucketCredentials).ForEach(func(_, v []byte) error {
		var c ScramCredential
		mustUnmarshal(v, &c)
		img.Scram = append(img.Scram, c)
		return nil
	})
}

func (v *view) applyScramLocked(e *event) {
	if e.Scram == nil {
		return
	}
	if v.scram == nil {
		v.scram = map[string]map[string]ScramCredential{}
	}
	u := e.Scram.User
	if e.Deleted {
		delete(v.scram[u], e.Scram.Mechanism)
		if len(v.scram[u]) == 0 {
			delete(v.scram, u)
		}
		return
	}
	if v.scram[u] == nil {
		v.scram[u] = map[string]ScramCredential{}
	}
	v.scram[u][e.Scram.Mechanism] = *e.Scram
}

// ScramCredential returns user's credential for mechanism from the local
// view.
func (c *Client) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	c.v.mu.RLock()
	defer c.v.mu.RUnlock()
	cr, ok := c.v.scram[user][mechanism]
	return cr, ok
}

// ScramUsers lists every user with a SCRAM credential and their
// credentials (without keys), by name, from the local view.
func (c *Client) ScramUsers() map[string][]ScramCredential {
	c.v.mu.RLock()
	defer c.v.mu.RUnlock()
	out := make(map[string][]ScramCredential, len(c.v.scram))
	for u, m := range c.v.scram {
		for _, cr := range m {
			out[u] = append(out[u], ScramCredential{User: u, Mechanism: cr.Mechanism, Iterations: cr.Iterations})
		}
		sort.Slice(out[u], func(i, j int) bool { return out[u][i].Mechanism < out[u][j].Mechanism })
	}
	return out
}

// AlterScramCredentials upserts and deletes credentials in one command;
// it returns once the change is visible in this client's view.
func (c *Client) AlterScramCredentials(ctx context.Context, creds []ScramCredential) error {
	if len(creds) == 0 {
		return errors.New("metastore: no credential to alter")
	}
	_, err := c.write(ctx, command{Op: opAlterScram, Scram: creds})
	return err
}
