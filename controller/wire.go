package controller

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

// Everything on the CONTROLLER listener is framed:
//
//	+----------------------+---------+---------------------------+
//	| length u32 (BE)      | kind u8 | payload (length-1 bytes)  |
//	+----------------------+---------+---------------------------+
//
// The first frame of a connection decides what it carries:
//
//	kindRaftHello  payload = sender's node id (uvarint); then only
//	               kindRaft frames follow, one raftpb.Message each
//	               (protobuf), one way, peer → us.
//	kindRequest    payload = method u8 | flags u8 | JSON request; the
//	               server answers each with one kindResponse (JSON
//	               envelope: error or body), in order. The watch method
//	               instead turns the connection into a stream of
//	               kindDelta frames (and a final kindResponse on error).
//
// Format migration: version 1 is implicit. A new request field is added to
// the JSON bodies (unknown fields are ignored); a new method takes a new
// number; a breaking change takes a new hello kind.
const (
	kindRaftHello byte = 1
	kindRaft      byte = 2
	kindRequest   byte = 3
	kindResponse  byte = 4
	kindDelta     byte = 5

	// maxFrame bounds a frame (a MsgSnap carries a whole metadata image).
	maxFrame = 256 << 20
)

// Request flags.
const flagForwarded byte = 1

// Methods of kindRequest.
const (
	methodRegisterBroker byte = iota + 1
	methodBrokerHeartbeat
	methodCreateTopics
	methodDeleteTopics
	methodCreatePartitions
	methodAlterConfigs
	methodAlterPartition
	methodCommitRemoteSegment
	methodWatch
)

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

// readFrame reads one frame. The payload is freshly allocated.
func readFrame(r *bufio.Reader) (kind byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > maxFrame {
		return 0, nil, fmt.Errorf("%w: frame length %d", ErrProtocol, n)
	}
	payload = make([]byte, n-1)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return hdr[4], payload, nil
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
	return &wireErr{Code: metadata.ErrorCode(err), Msg: err.Error(), Stopped: errors.Is(err, ErrStopped)}
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
