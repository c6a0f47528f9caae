package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupConfigs checks the GROUP config resource: the share configs
// Sluice honours are set, validated with Kafka's rules, described with
// their source, and removed.
func TestGroupConfigs(t *testing.T) {
	b := startBroker(t, nil)
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alter := func(name string, op kmsg.IncrementalAlterConfigOp, value *string) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, op, value
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	for _, bad := range []struct {
		name, value string
	}{{"share.auto.offset.reset", "sometimes"}, {"share.record.lock.duration.ms", "1000"}, {"share.record.lock.duration.ms", "x"}, {"no.such.config", "1"}} {
		v := bad.value
		if code := alter(bad.name, kmsg.IncrementalAlterConfigOpSet, &v); code != kerr.InvalidConfig.Code {
			t.Errorf("%s=%s: code %d, want INVALID_CONFIG", bad.name, bad.value, code)
		}
	}
	if c := describe()["share.auto.offset.reset"]; *c.Value != "latest" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("default: %+v", c)
	}
	v := "earliest"
	if code := alter("share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, &v); code != 0 {
		t.Fatalf("set: %d", code)
	}
	if c := describe()["share.auto.offset.reset"]; *c.Value != "earliest" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("after set: %+v", c)
	}
	if code := alter("share.auto.offset.reset", kmsg.IncrementalAlterConfigOpDelete, nil); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	if c := describe()["share.auto.offset.reset"]; *c.Value != "latest" {
		t.Fatalf("after delete: %+v", c)
	}
}
