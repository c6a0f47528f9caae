package server

import (
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// hostileRequest is a request built to make its decoding allocate as much
// as its size allows: one array of n default (minimal) elements, or n
// unknown tagged fields.
type hostileRequest struct {
	name string
	req  kmsg.Request
}

// hostileRequests returns, for one API at one version, a request for each
// array field of the request and of its elements (one level down, inside
// a single element), each filled with n default elements, and again
// with an unknown tag in each element, and one with n unknown tags at the
// top level. Fields a version does not have encode to
// nothing; what is left is still a valid request.
func hostileRequests(key, version int16, n int) []hostileRequest {
	fresh := func() (kmsg.Request, reflect.Value) {
		r := kmsg.RequestForKey(key)
		r.SetVersion(version)
		return r, reflect.ValueOf(r).Elem()
	}
	var out []hostileRequest
	_, top := fresh()
	for i := range top.NumField() {
		ft := top.Type().Field(i)
		if !ft.IsExported() || ft.Type.Kind() != reflect.Slice || ft.Type.Elem().Kind() == reflect.Uint8 {
			continue
		}
		r, rv := fresh()
		rv.Field(i).Set(defaultSlice(ft.Type, n))
		out = append(out, hostileRequest{fmt.Sprintf("%T v%d %s[%d]", r, version, ft.Name, n), r})
		et := ft.Type.Elem()
		if et.Kind() != reflect.Struct {
			continue
		}
		if _, ok := et.FieldByName("UnknownTags"); ok {
			r, rv := fresh()
			s := defaultSlice(ft.Type, n)
			for k := range n {
				s.Index(k).FieldByName("UnknownTags").Addr().Interface().(*kmsg.Tags).Set(1000, nil)
			}
			rv.Field(i).Set(s)
			out = append(out, hostileRequest{fmt.Sprintf("%T v%d %s[%d] each with an unknown tag", r, version, ft.Name, n), r})
		}
		for j := range et.NumField() {
			gt := et.Field(j)
			if !gt.IsExported() || gt.Type.Kind() != reflect.Slice || gt.Type.Elem().Kind() == reflect.Uint8 {
				continue
			}
			r, rv := fresh()
			one := defaultSlice(ft.Type, 1)
			one.Index(0).Field(j).Set(defaultSlice(gt.Type, n))
			rv.Field(i).Set(one)
			out = append(out, hostileRequest{fmt.Sprintf("%T v%d %s[1].%s[%d]", r, version, ft.Name, gt.Name, n), r})
		}
	}
	if f := top.FieldByName("UnknownTags"); f.IsValid() {
		r, rv := fresh()
		tags := rv.FieldByName("UnknownTags").Addr().Interface().(*kmsg.Tags)
		for k := range n {
			tags.Set(uint32(1000+k), nil)
		}
		out = append(out, hostileRequest{fmt.Sprintf("%T v%d UnknownTags[%d]", r, version, n), r})
	}
	return out
}

// defaultSlice makes a slice of n elements of type t, each set to its
// kmsg default.
func defaultSlice(t reflect.Type, n int) reflect.Value {
	s := reflect.MakeSlice(t, n, n)
	if d, ok := reflect.PointerTo(t.Elem()).MethodByName("Default"); ok {
		for i := range n {
			d.Func.Call([]reflect.Value{s.Index(i).Addr()})
		}
	}
	return s
}
