package chaos

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// stream is a client and server protocol sample with every verb, payloads
// that look like protocol lines, empty payloads and a lower-case verb.
var stream = strings.Join([]string{
	`INFO {"server_id":"x","max_payload":1048576}` + "\r\n",
	`CONNECT {"verbose":false,"echo":false}` + "\r\n",
	"PING\r\n",
	"PONG\r\n",
	"SUB edge.election.site.el.* 1\r\n",
	"SUB q.subj grp 2\r\n",
	"UNSUB 2 10\r\n",
	"PUB a.b 5\r\nhello\r\n",
	"PUB a.b reply.to 17\r\n\r\nMSG fake 1 3\r\nx\r\n",
	"PUB empty 0\r\n\r\n",
	"HPUB h.s 18 23\r\nNATS/1.0\r\nA: b\r\n\r\nhello\r\n",
	"HPUB h.s r.t 12 12\r\nNATS/1.0\r\n\r\n\r\n",
	"MSG a.b 1 5\r\nworld\r\n",
	"MSG a.b 1 _INBOX.x 2\r\nok\r\n",
	"HMSG h.s 9 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n",
	"HMSG h.s 9 r 12 12\r\nNATS/1.0\r\n\r\n\r\n",
	"+OK\r\n",
	"-ERR 'Unknown Protocol Operation'\r\n",
	"pub lower 2\r\nab\r\n",
	"\r\n",
}, "")

func TestFrameReaderSplitsWholeFrames(t *testing.T) {
	want := []struct {
		op      string
		message bool
		subject string
	}{
		{"INFO", false, ""}, {"CONNECT", false, ""}, {"PING", false, ""}, {"PONG", false, ""},
		{"SUB", false, ""}, {"SUB", false, ""}, {"UNSUB", false, ""},
		{"PUB", true, "a.b"}, {"PUB", true, "a.b"}, {"PUB", true, "empty"},
		{"HPUB", true, "h.s"}, {"HPUB", true, "h.s"},
		{"MSG", true, "a.b"}, {"MSG", true, "a.b"}, {"HMSG", true, "h.s"}, {"HMSG", true, "h.s"},
		{"+OK", false, ""}, {"-ERR", false, ""}, {"PUB", true, "lower"}, {"", false, ""},
	}
	// One byte per read: frames must not depend on how TCP chunks the stream.
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(stream),
		"one-byte": iotest.OneByteReader(strings.NewReader(stream)),
		"half":     iotest.HalfReader(strings.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			fr := newFrameReader(r)
			var got bytes.Buffer
			for i, w := range want {
				f, err := fr.next()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if f.op != w.op || f.message != w.message || f.subject != w.subject {
					t.Fatalf("frame %d = %q (op %q message %v subject %q), want op %q message %v subject %q",
						i, f.data, f.op, f.message, f.subject, w.op, w.message, w.subject)
				}
				got.Write(f.data)
			}
			if _, err := fr.next(); err != io.EOF {
				t.Fatalf("after the last frame: %v, want EOF", err)
			}
			if got.String() != stream {
				t.Fatalf("frames do not add up to the stream:\n%q\n%q", got.String(), stream)
			}
		})
	}
}

func TestFrameReaderRejectsBrokenStreams(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"PUB a.b 5\r\nhel", io.ErrUnexpectedEOF},
		{"PUB a.b 5\r\nhelloXY", errBadFrame},
		{"PUB a.b x\r\nhello\r\n", errBadFrame},
		{"PUB a.b -1\r\n\r\n", errBadFrame},
		{"PUB 5\r\nhello\r\n", errBadFrame},
		{"MSG a b c d e 5\r\nhello\r\n", errBadFrame},
		{"PING", io.ErrUnexpectedEOF},
		{"INFO " + strings.Repeat("x", maxControlLine+1) + "\r\n", errBadFrame},
	} {
		_, err := newFrameReader(strings.NewReader(tc.in)).next()
		if !errors.Is(err, tc.want) {
			t.Errorf("%.40q: %v, want %v", tc.in, err, tc.want)
		}
	}
}
