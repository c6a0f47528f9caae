package server

import (
	"fmt"
	"math"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/metastore"
	"github.com/sluice-broker/sluice/quota"
)

// AlterClientQuotas (key 49). Supported: v0-1.
//
// Semantics: as Kafka's ClientQuotaControlManager: each entry names an
// entity (user, client-id, both, or ip alone; a null name is the
// <default> entity) and sets or removes quota keys. A user or client id
// entity takes producer_byte_rate and consumer_byte_rate (whole numbers),
// request_percentage and controller_mutation_rate; an ip entity takes
// connection_creation_rate (whole number). An empty entity, a repeated or
// unknown type, an empty name, ip mixed with the others, an IP that does
// not parse, an unknown key, a value not above 0 or not whole where it
// must be, a key given twice, or an entity given twice is INVALID_REQUEST
// for that entry; the valid entries are applied together in one metastore
// command. validate_only stops after the checks.
// Version notes: v1 flexible.
// Authorization: ALTER_CONFIGS on the cluster, as in Kafka
// (CLUSTER_AUTHORIZATION_FAILED for every entry otherwise).
// Roles: every broker (written to the metastore; every broker follows).
func init() { register(49, handleAlterClientQuotas) }

func handleAlterClientQuotas(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	var changes []metastore.QuotaChange
	var applied []int // resp.Entries answered by changes
	seen := map[metastore.QuotaEntity]int{}
	allowed := s.authorizeCluster(rc, acl.OpAlterConfigs)
	for _, re := range req.Entries {
		e := kmsg.NewAlterClientQuotasResponseEntry()
		for _, ent := range re.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = ent.Type, ent.Name
			e.Entity = append(e.Entity, ee)
		}
		ch, msg := quotaChange(re)
		if !allowed {
			e.ErrorCode, e.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, kmsg.StringPtr("ALTER_CONFIGS on the cluster is required")
			resp.Entries = append(resp.Entries, e)
			continue
		}
		if msg == "" {
			if i, dup := seen[ch.Entity]; dup {
				// Kafka fails both the first and the repeat.
				msg = "Ignoring duplicate entity"
				if resp.Entries[i].ErrorCode == 0 {
					resp.Entries[i].ErrorCode = kerr.InvalidRequest.Code
					resp.Entries[i].ErrorMessage = kmsg.StringPtr(msg)
				}
			} else {
				seen[ch.Entity] = len(resp.Entries)
			}
		}
		if msg != "" {
			e.ErrorCode, e.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		}
		resp.Entries = append(resp.Entries, e)
	}
	for i, e := range resp.Entries {
		if e.ErrorCode == 0 {
			ch, _ := quotaChange(req.Entries[i])
			changes = append(changes, ch)
			applied = append(applied, i)
		}
	}
	if req.ValidateOnly || len(changes) == 0 {
		return resp, nil
	}
	if err := s.catalog.AlterClientQuotas(rc.ctx(), changes); err != nil {
		for _, i := range applied {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = errorCode(err), kmsg.StringPtr(err.Error())
		}
	}
	return resp, nil
}

// quotaChange checks one entry and turns it into a change, or says what
// is wrong with it.
func quotaChange(re kmsg.AlterClientQuotasRequestEntry) (metastore.QuotaChange, string) {
	var ch metastore.QuotaChange
	if len(re.Entity) == 0 {
		return ch, "Invalid empty client quota entity"
	}
	for _, ent := range re.Entity {
		n := metastore.QuotaName{Set: true, Default: ent.Name == nil}
		if ent.Name != nil {
			if *ent.Name == "" {
				return ch, fmt.Sprintf("Empty %s not supported", ent.Type)
			}
			n.Name = *ent.Name
		}
		var dst *metastore.QuotaName
		switch ent.Type {
		case quotaUser:
			dst = &ch.Entity.User
		case quotaClientID:
			dst = &ch.Entity.ClientID
		case quotaIP:
			dst = &ch.Entity.IP
		default:
			return ch, "Unhandled client quota entity type: " + ent.Type
		}
		if dst.Set {
			return ch, "Invalid client quota entity, duplicate entity entry " + ent.Type
		}
		*dst = n
	}
	keys := quota.Kinds
	if ch.Entity.IP.Set {
		if ch.Entity.User.Set || ch.Entity.ClientID.Set {
			return ch, "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
		}
		if !ch.Entity.IP.Default {
			if _, err := netip.ParseAddr(ch.Entity.IP.Name); err != nil {
				return ch, ch.Entity.IP.Name + " is not a valid IP or resolvable host."
			}
		}
		keys = quota.IPKinds
	}
	seen := map[string]bool{}
	for _, op := range re.Ops {
		if seen[op.Key] {
			return ch, fmt.Sprintf("Duplicate quota key %s not updating quota for this entity", op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			ch.Del = append(ch.Del, op.Key)
			continue
		}
		whole, ok := keys[op.Key]
		if !ok {
			return ch, "Invalid configuration key " + op.Key
		}
		if !(op.Value > 0) || math.IsInf(op.Value, 0) {
			return ch, fmt.Sprintf("Quota %s must be greater than 0", op.Key)
		}
		if whole && (op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64) {
			return ch, fmt.Sprintf("%s must be a whole number", op.Key)
		}
		if ch.Set == nil {
			ch.Set = map[string]float64{}
		}
		ch.Set[op.Key] = op.Value
	}
	return ch, ""
}
