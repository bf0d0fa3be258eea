package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/errcode"
	"github.com/strata-io/strata/internal/netbuf"
)

// Everything on the CONTROLLER listener is framed:
//
//	+----------------------+---------+---------------------------+
//	| length u32 (BE)      | kind u8 | payload (length-1 bytes)  |
//	+----------------------+---------+---------------------------+
//
// The first frame of a connection decides what it carries. It may be at
// most maxFirstFrame bytes and must arrive within Config.FrameReadTimeout
// of the accept: until a peer has said what it is, it can make the node
// allocate no more than that.
//
//	kindRaftHello  payload = the sender's raftHello (below); then only
//	               kindRaft frames follow, one raftpb.Message each
//	               (protobuf), one way, peer → us. A hello from an id
//	               that is not one of the other voters, naming another
//	               cluster, or claiming a connected voter's id with
//	               another incarnation is refused (the connection closed)
//	               before any message reaches Raft.
//	kindClientHello payload = the client's clientHello (below; empty from
//	               a client that knows no cluster id, or of a version
//	               before it); kindRequest frames follow. A hello naming
//	               another cluster than the controller's (both known)
//	               gets INCONSISTENT_CLUSTER_ID as the answer to its first
//	               request, and the connection closes: no request from a
//	               node of another cluster reaches the planner.
//	kindRequest    payload = method u8 | flags u8 | JSON request; the
//	               server answers each with one kindResponse (JSON
//	               envelope: error or body), in order. The watch method
//	               instead turns the connection into a stream of
//	               kindDelta frames (and a final kindResponse on error);
//	               if the watch request asks for it (keepalive_ms), a
//	               kindKeepalive frame (JSON {"offset": applied}) after
//	               every keepalive_ms without a delta, so the client can
//	               bound its read and tell a dead stream from an idle one.
//	               A kindRequest may come first (clients before
//	               kindClientHello) if it fits in maxFirstFrame.
//
// On a SASL listener (Options.SASL) kindSASL frames come before all of
// these, both ways, until the exchange succeeds (sasl.go).
//
// After the first frame, frames are up to maxFrame bytes; each RPC
// payload's bytes are taken from the listener's request budget
// (Options.RequestMemory) before it is read (a voter's Raft frames are
// not: see there), every payload's buffer grows as the bytes arrive, and
// it must arrive within FrameReadTimeout of its header.
//
// raftHello, after the node id that was the whole payload in version 1:
//
//	+-----------------+------------+------------------------+----------------+
//	| node id uvarint | version u8 | cluster id (uvarint    | incarnation    |
//	|                 | (= 2)      | length, UTF-8; "" =    | 16 bytes (zero |
//	|                 |            | unknown)               | = unknown)     |
//	+-----------------+------------+------------------------+----------------+
//
// clientHello, version 1 (an empty payload: no cluster id):
//
//	+------------+--------------------------------------------+
//	| version u8 | cluster id (uvarint length, UTF-8; "" =    |
//	| (= 1)      | unknown)                                   |
//	+------------+--------------------------------------------+
//
// Format migration: version 1 is implicit (a hello of only the node id
// still decodes, with no cluster id and no incarnation). A new request field
// is added to the JSON bodies (unknown fields are ignored); a new method
// takes a new number; a breaking change takes a new hello kind.
const (
	kindRaftHello byte = 1
	kindRaft      byte = 2
	kindRequest   byte = 3
	kindResponse  byte = 4
	kindDelta     byte = 5
	// kindClientHello opens an RPC connection (see above).
	kindClientHello byte = 6
	// kindKeepalive is sent on an idle watch stream that asked for it.
	kindKeepalive byte = 7

	// maxFrame bounds a frame (a MsgSnap carries a whole metadata image).
	maxFrame = 256 << 20
	// maxFirstFrame bounds a connection's first frame: a hello, or a small
	// request from a client that sends no hello.
	maxFirstFrame = 4 << 10

	raftHelloVersion   = 2
	clientHelloVersion = 1
)

// appendClientHello appends a client hello naming clusterID (nothing
// when "": the empty hello of clients before it).
func appendClientHello(b []byte, clusterID string) []byte {
	if clusterID == "" {
		return b
	}
	b = append(b, clientHelloVersion)
	b = binary.AppendUvarint(b, uint64(len(clusterID)))
	return append(b, clusterID...)
}

// decodeClientHello returns the cluster id a client hello names ("" for
// an empty one). Bytes after the fields it knows are ignored.
func decodeClientHello(b []byte) (string, error) {
	if len(b) == 0 {
		return "", nil
	}
	if b[0] < clientHelloVersion {
		return "", fmt.Errorf("%w: client hello: version %d", ErrProtocol, b[0])
	}
	b = b[1:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return "", fmt.Errorf("%w: client hello: bad cluster id", ErrProtocol)
	}
	return string(b[n : n+int(l)]), nil
}

// raftHello is what a peer says it is when it opens a Raft stream.
type raftHello struct {
	from        uint64
	clusterID   string
	incarnation uuid.UUID
}

func (h raftHello) append(b []byte) []byte {
	b = binary.AppendUvarint(b, h.from)
	b = append(b, raftHelloVersion)
	b = binary.AppendUvarint(b, uint64(len(h.clusterID)))
	b = append(b, h.clusterID...)
	return append(b, h.incarnation[:]...)
}

// decodeRaftHello decodes a hello of version 1 (the node id alone) or 2.
// Bytes after the fields it knows are ignored (later versions add fields).
func decodeRaftHello(b []byte) (raftHello, error) {
	var h raftHello
	from, n := binary.Uvarint(b)
	if n <= 0 || from == 0 {
		return h, fmt.Errorf("%w: raft hello: bad node id", ErrProtocol)
	}
	h.from, b = from, b[n:]
	if len(b) == 0 {
		return h, nil // version 1
	}
	if b[0] < raftHelloVersion {
		return h, fmt.Errorf("%w: raft hello: version %d", ErrProtocol, b[0])
	}
	b = b[1:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return h, fmt.Errorf("%w: raft hello: bad cluster id", ErrProtocol)
	}
	h.clusterID, b = string(b[n:n+int(l)]), b[n+int(l):]
	if len(b) < len(h.incarnation) {
		return h, fmt.Errorf("%w: raft hello: short incarnation", ErrProtocol)
	}
	copy(h.incarnation[:], b)
	return h, nil
}

// Request flags: flagForwarded marks a request a follower forwarded to
// its leader (see [Controller.route]); it is never forwarded again.
const flagForwarded byte = 1

// Method numbers of kindRequest are in rpc.go, beside the table of RPCs.

func writeFrame(w *bufio.Writer, kind byte, payload ...[]byte) error {
	n := 1
	for _, p := range payload {
		n += len(p)
	}
	if n > maxFrame {
		return fmt.Errorf("%w: frame of %d bytes", ErrProtocol, n)
	}
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(n))
	hdr[4] = kind
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range payload {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// readFrame reads one frame of at most maxFrame bytes, as a client reads
// its answers. The payload is freshly allocated, growing as it arrives.
func readFrame(r *bufio.Reader) (kind byte, payload []byte, err error) {
	kind, n, err := readHeader(r, maxFrame)
	if err != nil {
		return 0, nil, err
	}
	if payload, err = netbuf.ReadFrame(r, n); err != nil {
		return 0, nil, err
	}
	return kind, payload, nil
}

// readHeader reads a frame header and returns the kind and payload length.
func readHeader(r *bufio.Reader, limit uint32) (kind byte, n int, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, err
	}
	l := binary.BigEndian.Uint32(hdr[:4])
	if l < 1 || l > limit {
		return 0, 0, fmt.Errorf("%w: frame length %d (at most %d here)", ErrProtocol, l, limit)
	}
	return hdr[4], int(l - 1), nil
}

// frameReader reads the frames of one inbound connection within the
// listener's bounds: each payload's bytes are taken from the request budget
// before it is read and held until the next call (or release), and a
// payload must arrive within timeout of its header. Between frames there is
// no deadline (an idle Raft stream or pooled client connection is fine).
// Not safe for concurrent use.
type frameReader struct {
	conn    net.Conn
	br      *bufio.Reader
	budget  *netbuf.Budget
	ctx     context.Context // ends a wait for budget
	timeout time.Duration
	held    int64
}

// next reads a frame of at most limit bytes. The payload is the caller's
// until the next call to next or release.
func (fr *frameReader) next(limit uint32) (kind byte, payload []byte, err error) {
	fr.release()
	kind, n, err := readHeader(fr.br, limit)
	if err != nil {
		return 0, nil, err
	}
	if err := fr.budget.Acquire(fr.ctx, int64(n)); err != nil {
		return 0, nil, err
	}
	fr.held = int64(n)
	fr.conn.SetReadDeadline(time.Now().Add(fr.timeout))
	payload, err = fr.budget.ReadFrame(fr.br, n)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("%w: frame of %d bytes not received within %v", ErrProtocol, n+1, fr.timeout)
		}
		return 0, nil, err
	}
	fr.conn.SetReadDeadline(time.Time{})
	return kind, payload, nil
}

// release gives back the budget of the last payload read.
func (fr *frameReader) release() {
	fr.budget.Release(fr.held)
	fr.held = 0
}

// wireErr is an error as it crosses the wire: a Kafka error code, the
// message, and for NOT_CONTROLLER the leader hint.
type wireErr struct {
	Code       int16  `json:"code"`
	Msg        string `json:"msg"`
	LeaderID   int32  `json:"leader_id,omitempty"`
	LeaderAddr string `json:"leader_addr,omitempty"`
	Stopped    bool   `json:"stopped,omitempty"`
}

func toWireErr(err error) *wireErr {
	if err == nil {
		return nil
	}
	var nc *NotControllerError
	if errors.As(err, &nc) {
		return &wireErr{Code: kerr.NotController.Code, Msg: err.Error(), LeaderID: nc.LeaderID, LeaderAddr: nc.LeaderAddr}
	}
	return &wireErr{Code: errcode.Code(err), Msg: err.Error(), Stopped: errors.Is(err, ErrStopped)}
}

func fromWireErr(w *wireErr) error {
	if w == nil {
		return nil
	}
	if w.Code == kerr.NotController.Code {
		return &NotControllerError{LeaderID: w.LeaderID, LeaderAddr: w.LeaderAddr}
	}
	if w.Stopped {
		return fmt.Errorf("%w (remote: %s)", ErrStopped, w.Msg)
	}
	return &RemoteError{Code: w.Code, Msg: w.Msg}
}

// RemoteError is an error answered by a controller over the network. It
// unwraps to the kerr error of its code, so errors.Is(err,
// kerr.TopicAlreadyExists) works as it does in-process.
type RemoteError struct {
	Code int16
	Msg  string
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the kerr error for Code.
func (e *RemoteError) Unwrap() error { return kerr.ErrorForCode(e.Code) }

// isNetErr reports whether err is a connection-level failure (the request
// may be retried elsewhere) rather than an answer.
func isNetErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
