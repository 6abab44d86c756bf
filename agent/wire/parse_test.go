package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"testing"
)

// twoPassKeys and parseTwoPass are the parser the wire format was first
// defined by: a token scan for the object's shape, its version and unknown
// keys, then encoding/json into wireMessage. parseWire does both in one
// pass; FuzzParseWire holds it to the same results.
var twoPassKeys = map[string]bool{
	"v": true, "group": true, "type": true, "from": true, "to": true,
	"term": true, "seq": true, "granted": true, "alive": true,
	"nominee": true, "initiator": true, "candidate": true, "participants": true, "conn": true,
	"ep": true, "n": true, "alg": true, "drained": true, "inst": true, "pv": true, "promise": true, "fence": true, "fenceconn": true, "nofence": true,
}

func parseTwoPass(data []byte) (wireMessage, error) {
	var w wireMessage
	version, unknown, err := scanTwoPass(data)
	if err != nil {
		return w, &BadMessageError{Reason: ReasonMalformed, Err: err}
	}
	if version != WireVersion {
		return w, bad(ReasonUnknownVersion, "version %d", version)
	}
	if unknown != "" {
		return w, bad(ReasonMalformed, "unknown field %q", unknown)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return w, &BadMessageError{Reason: ReasonMalformed, Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return w, bad(ReasonMalformed, "trailing data")
	}
	return w, nil
}

func scanTwoPass(data []byte) (version uint64, unknown string, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return 0, "", err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, "", errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, "", err
		}
		key, ok := tok.(string)
		if !ok {
			return 0, "", errors.New("object key is not a string")
		}
		if seen[key] {
			return 0, "", fmt.Errorf("repeated key %q", key)
		}
		seen[key] = true
		if !twoPassKeys[key] && unknown == "" {
			unknown = key
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, "", err
		}
		if key == "v" {
			if version, err = strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 64); err != nil {
				return 0, "", err
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return 0, "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, "", errors.New("trailing data")
	}
	return version, unknown, nil
}

func parseSeeds() []string {
	return []string{
		``, `{}`, `[]`, `null`, `{"v":1}`, `{"v":2,"x":1}`, `{"v":1,"v":1}`, `{"V":1}`, `{"v":1,"Group":"g"}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1,"alive":["a","b"],"conn":"x"}`,
		`{"v":1,"group":"g","type":"vote","from":"a","to":"b","term":3,"granted":false}`,
		`{"v":1,"group":"g","type":"vote","from":"a","term":3,"granted":null,"alive":null}`,
		`{"v":1,"group":"g","type":"heartbeat","from":"a","term":1,"seq":1} {}`,
		`{"v":1,"term":"1"}`, `{"v":1,"term":-1}`, `{"v":1,"term":1.5}`, `{"v":1,"alive":"a"}`,
		`{"v":1,"term":"1","x":2}`, `{"v":3,"term":"1"}`, `{"term":"1"}`, `{"v":null}`, `{"v":"1"}`,
		`{"v":1e0,"group":"g"}`, "{\"v\":1,\"from\":\"a\xff\"}", `{"v":1,"alive":[[[[[]]]]]}`,
		`{"v":1,"group":"g","type":"ring_token","from":"a","to":"b","seq":1,"initiator":"c","participants":["zz"],"ep":9,"n":2,"alg":"ring"}`,
		`{"v":1,"type":"ack","from":"w","drained":true,"pv":2,"inst":"x","drained":false}`, `{"v":1,"pv":-2,"drained":1}`,
		`{"\u0076":1,"group":"g"}`, `{"v":1,"\u0076":1}`, "{\"v\":2,\"a\xff\":1,\"a\xfe\":1}", `{"v":2,"x":1,"x":2}`,
		` { "v" : 1 , "term" : 18446744073709551615 , "seq" : 0 } `, `{"v":1,"term":18446744073709551616}`,
		`{"v":1,"alive":["]","}",",","\""],"conn":"a\"b\\"}`, `{"v":1,"group":"g\u00e9","from":"\t"}`,
		`{"v":1,"type":"ack","promise":300}`, `{"v":1,"promise":"300"}`, `{"v":1,"promise":-5}`, `{"v":1,"promise":1e3}`, `{"v":1,"type":"ack","fence":10}`, `{"v":1,"fence":"10"}`, `{"v":1,"fence":-1}`, `{"v":1,"fence":2,"fenceconn":"S/1"}`, `{"v":1,"fenceconn":7}`,
		`{"v":1,"term":0e5}`, `{"v":1,"term":-0}`, `{"v":1,"granted":{"a":[1,{"b":"}"}]}}`, `{"v":01}`, "{\"v\":1,\"from\":\"a\x01\"}",
	}
}

// TestParseWireMatchesTwoPass runs the seeds of FuzzParseWire.
func TestParseWireMatchesTwoPass(t *testing.T) {
	for _, s := range parseSeeds() {
		checkParseMatches(t, []byte(s))
	}
}

// FuzzParseWire checks that the one-pass parser accepts exactly what the
// two-pass parser accepts, with the same value, and rejects the rest for
// the same reason.
func FuzzParseWire(f *testing.F) {
	for _, s := range parseSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(checkParseMatches)
}

func checkParseMatches(t *testing.T, data []byte) {
	checkParser(t, data, "token-by-token", parseTokens)
	checkParser(t, data, "two passes", parseTwoPass)
}

func checkParser(t *testing.T, data []byte, name string, ref func([]byte) (wireMessage, error)) {
	got, gerr := parseWire(data)
	want, werr := ref(data)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: parseWire %v, %s %v", data, gerr, name, werr)
	}
	if gerr != nil {
		var g, w *BadMessageError
		if !errors.As(gerr, &g) || !errors.As(werr, &w) || g.Reason != w.Reason {
			t.Fatalf("%q: parseWire %v, %s %v", data, gerr, name, werr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: parseWire %+v, %s %+v", data, got, name, want)
	}
}

// parseTokens is the parser parseWire replaced, the reference it is held
// to: it turns data into a wireMessage in one pass over the JSON
// tokens, reporting malformed or unknown_version: data must be exactly one
// JSON object with no repeated key, its "v" must be WireVersion (checked
// before unknown keys, so that a newer version's new fields are reported as
// a version skew), keys are matched case-sensitively and each value must
// have its field's JSON type.
func parseTokens(data []byte) (wireMessage, error) {
	var w wireMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return w, &BadMessageError{Reason: ReasonMalformed, Err: err}
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return w, bad(ReasonMalformed, "not a JSON object")
	}
	var (
		version  uint64
		unknown  *string // the first key the wire format does not have
		valueErr error
		seen     = make(map[string]bool, 17)
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return w, &BadMessageError{Reason: ReasonMalformed, Err: err}
		}
		key, ok := tok.(string)
		if !ok {
			return w, bad(ReasonMalformed, "object key is not a string")
		}
		if seen[key] {
			return w, bad(ReasonMalformed, "repeated key %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return w, &BadMessageError{Reason: ReasonMalformed, Err: err}
		}
		switch _, field := w.field(key); {
		case key == "v":
			version, err = strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 64)
			if err != nil {
				return w, bad(ReasonMalformed, "v is %s, not a version number", raw)
			}
		case field == nil:
			if unknown == nil {
				unknown = &key
			}
		case valueErr == nil:
			if err := json.Unmarshal(raw, field); err != nil {
				valueErr = fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return w, &BadMessageError{Reason: ReasonMalformed, Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return w, bad(ReasonMalformed, "trailing data after the object")
	}
	switch {
	case version != WireVersion:
		return w, bad(ReasonUnknownVersion, "version %d, want %d", version, WireVersion)
	case unknown != nil:
		return w, bad(ReasonMalformed, "unknown field %q", *unknown)
	case valueErr != nil:
		return w, &BadMessageError{Reason: ReasonMalformed, Err: valueErr}
	}
	w.V = WireVersion
	return w, nil
}

// BenchmarkParseWire parses a heartbeat of a three-member group, what a
// witness receives most, with parseWire and with the parser it replaced.
func BenchmarkParseWire(b *testing.B) {
	hb := []byte(`{"v":1,"group":"site0042","type":"heartbeat","from":"gw1","term":7,"seq":123456,"alive":["gw1","gw2","w"],"conn":"NAB3XKQ5:42","alg":"bully","pv":2}`)
	for _, p := range []struct {
		name  string
		parse func([]byte) (wireMessage, error)
	}{{"one-scan", parseWire}, {"tokens", parseTokens}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(hb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
