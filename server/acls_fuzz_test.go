package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/protocol"
)

// aclSeedRequests are well-formed ACL requests, every version: the seed
// corpus beside testdata/fuzz/FuzzAclRequests.
func aclSeedRequests() []kmsg.Request {
	name, principal, host := "orders", "User:alice", "*"
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeMatch
	describe.ResourceName, describe.Principal, describe.Host = &name, &principal, &host
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, name, kmsg.ACLResourcePatternTypePrefixed
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	create.Creations = append(create.Creations, c)
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeDeny
	del.Filters = append(del.Filters, f)
	return []kmsg.Request{describe, create, del}
}

// aclFrame is a request frame (size prefix included) for key and version
// with body as its body, whatever body holds.
func aclFrame(key, version int16, corr int32, body []byte) []byte {
	flexible := version >= 2 // DescribeAcls, CreateAcls, DeleteAcls
	out := make([]byte, 4, 4+12+len(body))
	out = binary.BigEndian.AppendUint16(out, uint16(key))
	out = binary.BigEndian.AppendUint16(out, uint16(version))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = binary.BigEndian.AppendUint16(out, 4)
	out = append(out, "fuzz"...)
	if flexible {
		out = append(out, 0) // no header tags
	}
	out = append(out, body...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// FuzzAclRequests sends arbitrary DescribeAcls, CreateAcls and DeleteAcls
// bodies to a real broker with the authorizer on (the client a super user,
// so that every request reaches the filter and binding checks and the
// metastore). A body kmsg decodes must be answered, with a response that
// decodes and carries the request's correlation id; one it does not decode
// closes the connection; the broker never stalls or crashes.
func FuzzAclRequests(f *testing.F) {
	for _, req := range aclSeedRequests() {
		for v := int16(0); v <= 3; v++ {
			req.SetVersion(v)
			f.Add(uint8(req.Key()-29), uint8(v), req.AppendTo(nil))
		}
	}
	b := startBroker(f, func(c *configs.Config) {
		c.AuthorizerEnable = true
		c.SuperUsers = "User:ANONYMOUS"
	})
	var nc net.Conn
	var br *bufio.Reader
	defer func() {
		if nc != nil {
			nc.Close()
		}
	}()
	corr := int32(0)
	f.Fuzz(func(t *testing.T, which, version uint8, body []byte) {
		key, v := int16(29+which%3), int16(version%4)
		req := kmsg.RequestForKey(key)
		req.SetVersion(v)
		decodes := req.ReadFrom(body) == nil
		if nc == nil {
			var err error
			if nc, err = net.Dial("tcp", b.addr); err != nil {
				t.Fatal(err)
			}
			br = bufio.NewReader(nc)
		}
		corr++
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(aclFrame(key, v, corr, body)); err != nil {
			t.Fatal(err)
		}
		frame, err := protocol.ReadFrame(br, nil, 1<<30)
		if !decodes {
			if err == nil {
				t.Fatalf("a body kmsg does not decode was answered (key %d v%d)", key, v)
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("undecodable body: %v, want the connection closed", err)
			}
			nc.Close()
			nc = nil
			return
		}
		if err != nil {
			t.Fatalf("key %d v%d: no answer: %v", key, v, err)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
			t.Fatalf("correlation %d, want %d", got, corr)
		}
		resp := req.ResponseKind()
		resp.SetVersion(v)
		rb := frame[4:]
		if v >= 2 {
			rb = rb[1:]
		}
		if err := resp.ReadFrom(rb); err != nil {
			t.Fatalf("key %d v%d: the response does not decode: %v", key, v, err)
		}
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
