// Package errcode is the one mapping from Go errors to Kafka error codes.
// The broker's request handlers, the group coordinator and the controller
// (in-process and on the CONTROLLER wire) all answer through it, so an
// error is the same code wherever it surfaces.
//
// The rule: nil is NONE (0); an error wrapping a franz-go [kerr.Error] is
// that error's code (the first in the chain, as [errors.As] finds it);
// anything else is UNKNOWN_SERVER_ERROR (-1). A layer whose own sentinels
// stand for a Kafka error declares them in a [Mapping]; they are tried
// after the chain's [kerr.Error] and before UNKNOWN_SERVER_ERROR:
//
//	var codes = errcode.Mapping{
//		{Err: context.DeadlineExceeded, Code: kerr.RequestTimedOut},
//	}
//	resp.ErrorCode = codes.Code(err)
//
// It owns no translation that depends on the request (a coordinator
// answering NOT_COORDINATOR for a failed append is its caller's), imports
// nothing of Strata and does no I/O. Everything here is safe for
// concurrent use.
package errcode

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel gives an error that carries no Kafka code one: an error for
// which errors.Is(err, Err) holds is answered with Code.
type Sentinel struct {
	Err  error
	Code *kerr.Error
}

// Mapping is the shared rule extended by a layer's sentinels, tried in
// order. The nil Mapping is the shared rule alone.
type Mapping []Sentinel

// Error returns the Kafka error err is answered with: nil for nil, else a
// [kerr.Error] (UNKNOWN_SERVER_ERROR when nothing else applies).
func (m Mapping) Error(err error) *kerr.Error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	for _, s := range m {
		if errors.Is(err, s.Err) {
			return s.Code
		}
	}
	return kerr.UnknownServerError
}

// Code returns the Kafka error code err is answered with (0 for nil).
func (m Mapping) Code(err error) int16 {
	if ke := m.Error(err); ke != nil {
		return ke.Code
	}
	return 0
}

// Name returns the Kafka name of the code ("NONE" for nil), as
// "UNKNOWN_TOPIC_OR_PARTITION".
func (m Mapping) Name(err error) string {
	if ke := m.Error(err); ke != nil {
		return ke.Message
	}
	return "NONE"
}

// Code is [Mapping.Code] of the shared rule alone.
func Code(err error) int16 { return Mapping(nil).Code(err) }

// Name is [Mapping.Name] of the shared rule alone.
func Name(err error) string { return Mapping(nil).Name(err) }
