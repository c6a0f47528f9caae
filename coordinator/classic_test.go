package coordinator

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestJoinSyncSingleMember(t *testing.T) {
	e := newEnv(t)
	r := e.join(9, "g", "", nil)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("v9 first join: code %d member %q, want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	id := r.MemberID
	r = e.join(9, "g", id, nil)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != id || r.Protocol == nil || *r.Protocol != "range" ||
		r.ProtocolType == nil || *r.ProtocolType != "consumer" || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
	s := e.sync("g", id, 1, nil, map[string]string{id: "A"})
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("sync: %+v", s)
	}
	if code := e.heartbeat("g", id, 1, nil); code != 0 {
		t.Fatalf("heartbeat: %d", code)
	}
}
