package metastore

import (
	"context"
	"slices"
	"strings"
)

// Stored super users: principals ("User:alice") that every broker's
// authorizer treats as super users besides its own super.users. The
// bootstrap user (SLUICE_BOOTSTRAP_USER) is recorded here when it is
// created, so that it stays a super user on every broker, on later starts
// and on brokers that never had the variable, as the SCRAM credentials it
// comes with do.
//
// The set lives in meta/"super_users", a sorted JSON list, absent while
// empty (so a cluster created before it decodes as it did); it is
// cache-visible, and a change moves the view's ACL generation, which makes
// the authorizer rebuild its index. Deleting a user's last SCRAM
// credential removes User:<name> from the set (scram.go).

const (
	opAddSuperUser    op = "add_super_user"
	opRemoveSuperUser op = "remove_super_user"
)

var keySuperUsers = []byte("super_users")

func validPrincipal(p string) bool {
	kind, name, ok := strings.Cut(p, ":")
	return ok && kind != "" && name != ""
}

func (a *applier) superUsers() []string {
	var out []string
	if v := a.tx.Bucket(bucketMeta).Get(keySuperUsers); v != nil {
		mustUnmarshal(v, &out)
	}
	return out
}

// applySuperUser applies add_super_user and remove_super_user (c.Name is
// the principal). Adding one already present, or removing one absent,
// changes nothing.
func (a *applier) applySuperUser(c *command) result {
	if !validPrincipal(c.Name) {
		return result{Err: errCode(ErrInvalidRequest)}
	}
	if c.Op == opRemoveSuperUser {
		return result{Visible: a.removeSuperUser(c.Name)}
	}
	cur := a.superUsers()
	i, found := slices.BinarySearch(cur, c.Name)
	if found {
		return result{}
	}
	a.putSuperUsers(slices.Insert(cur, i, c.Name))
	return result{Visible: true}
}

// removeSuperUser removes principal from the stored set; false if it was
// not there.
func (a *applier) removeSuperUser(principal string) bool {
	cur := a.superUsers()
	i, found := slices.BinarySearch(cur, principal)
	if !found {
		return false
	}
	a.putSuperUsers(slices.Delete(cur, i, i+1))
	return true
}

func (a *applier) putSuperUsers(cur []string) {
	m := a.tx.Bucket(bucketMeta)
	if len(cur) == 0 {
		a.del(m, keySuperUsers)
	} else {
		a.put(m, keySuperUsers, mustJSON(cur))
	}
	a.events = append(a.events, event{Rev: a.index, Kind: "super", SuperUsers: slices.Clone(cur)})
}

// AddSuperUser records principal ("User:alice") as a super user of the
// cluster; it returns once this client's view has it.
func (c *Client) AddSuperUser(ctx context.Context, principal string) error {
	_, err := c.write(ctx, command{Op: opAddSuperUser, Name: principal})
	return err
}

// RemoveSuperUser removes principal from the stored super users (not from
// any broker's super.users).
func (c *Client) RemoveSuperUser(ctx context.Context, principal string) error {
	_, err := c.write(ctx, command{Op: opRemoveSuperUser, Name: principal})
	return err
}

// StoredSuperUsers returns the stored super users, sorted, from the local
// view (acl.SuperUserSource).
func (c *Client) StoredSuperUsers() []string {
	c.v.mu.RLock()
	defer c.v.mu.RUnlock()
	return slices.Clone(c.v.superUsers)
}
