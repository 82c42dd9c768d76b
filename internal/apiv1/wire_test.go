package apiv1_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	api "github.com/lightpath/lightpath/internal/apiv1"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.golden")

// TestWireFormat pins the JSON of every body: each type, every field set
// (fill gives each a value of its own), encoded as the server and the
// client encode it. The golden file was written by the same test run on
// the types before they moved from package api, so the move changed no
// byte on the wire; a change to it is a change of the contract.
func TestWireFormat(t *testing.T) {
	var b strings.Builder
	for _, v := range []any{
		api.ErrorBody{}, api.ReservationRequest{}, api.ReservationResponse{}, api.ReservationList{},
		api.ModifyRequest{}, api.ActionRequest{}, api.FindRequest{}, api.ExclusiveRequest{}, api.ExclusiveList{},
		api.Topology{}, api.TopologyReload{}, api.Timeline{}, api.UserRequest{}, api.UserList{},
		api.TokenRequest{}, api.TokenList{}, api.Whoami{}, api.Health{}, api.AuditList{}, api.Event{},
		api.Policy{}, api.AgentList{}, api.HeartbeatRequest{}, api.AgentWork{}, api.NodeReport{},
		api.LinkReport{}, api.LinkReportResult{}, api.PushResult{}, api.QueryResult{}, api.MetricNames{},
		api.TransferList{}, api.TransferPage{}, api.Live{}, api.StreamEnd{}, api.SignInHint{},
		api.SignInRequest{}, api.SignIn{},
		api.JobResponse{}, api.JobList{}, api.JobPage{}, api.JobRefusal{}, api.EndpointList{},
		api.EndpointAllow{}, api.EndpointAdd{}, api.DataNodeHeartbeat{}, api.DataNodeWork{}, api.ClaimRequest{}, api.Claim{},
		api.Listing{}, api.TaskReport{}, api.TaskAnswer{},
	} {
		p := reflect.New(reflect.TypeOf(v))
		fill(p.Elem(), "", 0)
		out, err := json.Marshal(p.Interface())
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		fmt.Fprintf(&b, "%s %s\n", reflect.TypeOf(v).Name(), out)
	}
	path := filepath.Join("testdata", "wire.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(b.String(), "\n")
	for i, w := range strings.Split(string(want), "\n") {
		if i >= len(got) || got[i] != w {
			g := ""
			if i < len(got) {
				g = got[i]
			}
			t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
	if len(got) != len(strings.Split(string(want), "\n")) {
		t.Errorf("%d lines, golden %d", len(got), len(strings.Split(string(want), "\n")))
	}
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// fill sets every field of v to a value derived from its name, one element
// in every list and map, so that no omitempty hides a field.
func fill(v reflect.Value, name string, depth int) {
	if depth > 8 {
		return
	}
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 11, 25, 12, 0, depth, 0, time.UTC)))
		return
	case v.Type() == rawType:
		v.Set(reflect.ValueOf(json.RawMessage(`{"raw":true}`)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(v.Field(i), f.Name, depth+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), name, depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), name, depth+1)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), name, depth+1)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, name+"Key", depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, name, depth+1)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString(strings.ToLower(name))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(len(name) + depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(len(name) + depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(len(name)) + 0.5)
	case reflect.Interface:
		v.Set(reflect.ValueOf(name))
	}
}
