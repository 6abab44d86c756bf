package chaos

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxControlLine bounds a NATS control line (the server's own limit is 4 KiB
// by default); maxPayload bounds a message payload (the server's default max
// is 1 MiB). Anything bigger is a broken stream, not a message.
const (
	maxControlLine = 64 << 10
	maxPayload     = 64 << 20
)

// frame is one whole unit of the NATS client protocol: a control line
// (INFO, CONNECT, SUB, UNSUB, PING, PONG, +OK, -ERR) or a message with its
// payload (PUB, HPUB from a client; MSG, HMSG from a server). data holds the
// exact bytes read, so forwarding it unchanged keeps the stream intact.
type frame struct {
	data    []byte
	op      string // upper-case verb: "PUB", "MSG", "PING", ...
	subject string // for messages
	message bool   // PUB, HPUB, MSG or HMSG: it carries a payload
}

// frameReader splits a NATS client-protocol byte stream into frames. It
// understands the protocol only as far as framing needs: the verb of each
// control line, and for the four message verbs the payload length, which is
// the last field of the line (the total length for HPUB and HMSG). It never
// looks into payloads, so a payload that happens to contain "\r\nMSG ..." is
// carried as payload.
type frameReader struct {
	r *bufio.Reader
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// errBadFrame is returned for a stream that is not the NATS protocol.
var errBadFrame = errors.New("chaos: malformed NATS frame")

// next returns the next whole frame. At the end of the stream it returns
// io.EOF if the stream ended between frames, and io.ErrUnexpectedEOF inside
// one.
func (fr *frameReader) next() (frame, error) {
	line, err := fr.readLine()
	if err != nil {
		return frame{}, err
	}
	f := frame{data: line}
	fields := bytes.Fields(line)
	if len(fields) == 0 {
		return f, nil // a bare CRLF: the server tolerates it, so do we
	}
	f.op = string(bytes.ToUpper(fields[0]))
	switch f.op {
	case "PUB", "HPUB", "MSG", "HMSG":
	default:
		return f, nil
	}
	// PUB subj [reply] n | HPUB subj [reply] hn n | MSG subj sid [reply] n |
	// HMSG subj sid [reply] hn n: the last field is the payload length.
	least := map[string]int{"PUB": 3, "HPUB": 4, "MSG": 4, "HMSG": 5}[f.op]
	if len(fields) < least || len(fields) > least+1 {
		return frame{}, fmt.Errorf("%w: %q", errBadFrame, line)
	}
	n, err := strconv.Atoi(string(fields[len(fields)-1]))
	if err != nil || n < 0 || n > maxPayload {
		return frame{}, fmt.Errorf("%w: payload length in %q", errBadFrame, line)
	}
	f.message = true
	f.subject = string(fields[1])
	data := make([]byte, len(line)+n+2)
	copy(data, line)
	if _, err := io.ReadFull(fr.r, data[len(line):]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	if !bytes.HasSuffix(data, []byte("\r\n")) {
		return frame{}, fmt.Errorf("%w: payload of %q not followed by CRLF", errBadFrame, line)
	}
	f.data = data
	return f, nil
}

// readLine reads up to and including the next '\n', copying the bytes out of
// the reader's buffer.
func (fr *frameReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := fr.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxControlLine {
			return nil, fmt.Errorf("%w: control line longer than %d bytes", errBadFrame, maxControlLine)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
