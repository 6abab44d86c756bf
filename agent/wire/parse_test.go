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
	"ep": true, "n": true, "alg": true,
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
	got, gerr := parseWire(data)
	want, werr := parseTwoPass(data)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: one pass %v, two passes %v", data, gerr, werr)
	}
	if gerr != nil {
		var g, w *BadMessageError
		if !errors.As(gerr, &g) || !errors.As(werr, &w) || g.Reason != w.Reason {
			t.Fatalf("%q: one pass %v, two passes %v", data, gerr, werr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: one pass %+v, two passes %+v", data, got, want)
	}
}
