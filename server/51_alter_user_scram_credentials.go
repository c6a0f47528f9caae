package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/internal/sasl"
	"github.com/sluice-broker/sluice/metastore"
)

// AlterUserScramCredentials (key 51). Supported: v0.
//
// Semantics: upserts and deletes SCRAM credentials in the metastore, as
// Kafka's ScramControlManager: the client sends the salted password (never
// the password); the broker keeps StoredKey and ServerKey derived from it.
// Per user: an empty name or an iteration count outside the mechanism's
// bounds (4096-16384) gets UNACCEPTABLE_CREDENTIAL, an unknown mechanism
// UNSUPPORTED_SASL_MECHANISM, a user and mechanism named twice in one
// request DUPLICATE_RESOURCE, the deletion of a credential that does not exist
// RESOURCE_NOT_FOUND. The valid alterations are applied together, in one
// metastore command. It needs ALTER on the cluster (else every user gets
// CLUSTER_AUTHORIZATION_FAILED).
// Version notes: v0 flexible.
// Roles: every broker (forwarded to the metastore).
func init() { register(51, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	cc, _ := s.catalog.(credentialCatalog)
	type outcome struct {
		code int16
		msg  string
	}
	var order []string
	results := map[string]*outcome{}
	// Kafka refuses a (user, mechanism) pair named twice; one user's two
	// mechanisms in one request is what kafka-configs sends.
	count := map[[2]string]int{}
	note := func(user string, mech int8) {
		if _, ok := results[user]; !ok {
			order = append(order, user)
			results[user] = &outcome{}
		}
		count[[2]string{user, string(rune(mech))}]++
	}
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
	}
	setErr := func(user string, code int16, msg string) {
		if r := results[user]; r.code == 0 {
			r.code, r.msg = code, msg
		}
	}
	if !s.authorizeCluster(rc, acl.OpAlter) {
		for _, user := range order {
			setErr(user, kerr.ClusterAuthorizationFailed.Code, "ALTER on the cluster is required")
		}
	}
	for k, n := range count {
		if n > 1 {
			setErr(k[0], kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		}
	}
	var users map[string][]metastore.ScramCredential
	if cc != nil {
		users = cc.ScramUsers()
	}
	var candidates, changes []metastore.ScramCredential
	changed := map[string]bool{}
	for _, d := range req.Deletions {
		mech := scramMechanismName(d.Mechanism)
		switch {
		case d.Name == "":
			setErr(d.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			setErr(d.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case !hasMechanism(users[d.Name], mech):
			setErr(d.Name, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
		}
		candidates = append(candidates, metastore.ScramCredential{User: d.Name, Mechanism: mech, Delete: true})
	}
	for _, u := range req.Upsertions {
		mech := scramMechanismName(u.Mechanism)
		lo, hi, _ := sasl.ScramIterationBounds(mech)
		switch {
		case u.Name == "":
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			setErr(u.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case u.Iterations < lo:
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Too few iterations")
		case u.Iterations > hi:
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Too many iterations")
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			setErr(u.Name, kerr.UnacceptableCredential.Code, "Salt and salted password must not be empty")
		}
		if results[u.Name].code != 0 {
			continue
		}
		cred, err := sasl.CredentialFromSalted(mech, u.SaltedPassword, u.Salt, u.Iterations)
		if err != nil {
			setErr(u.Name, kerr.UnacceptableCredential.Code, err.Error())
			continue
		}
		candidates = append(candidates, metastore.ScramCredential{User: u.Name, Mechanism: mech, Salt: cred.Salt,
			StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations})
	}
	// A user with any invalid alteration has none applied.
	for _, c := range candidates {
		if results[c.User].code == 0 {
			changes = append(changes, c)
			changed[c.User] = true
		}
	}
	if len(changes) > 0 {
		var err error
		if cc == nil {
			err = errNoCredentialStore
		} else {
			err = cc.AlterScramCredentials(rc.ctx(), changes)
		}
		if err != nil {
			for user := range changed {
				setErr(user, errorCode(err), err.Error())
			}
		}
	}
	for _, user := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		if o := results[user]; o.code != 0 {
			r.ErrorCode, r.ErrorMessage = o.code, kmsg.StringPtr(o.msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func hasMechanism(creds []metastore.ScramCredential, mech string) bool {
	for _, c := range creds {
		if c.Mechanism == mech {
			return true
		}
	}
	return false
}
