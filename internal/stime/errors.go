package stime

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// stageError tags an error with the stage it happened in: dial, handshake
// or request.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// statusError is an HTTP response with a 4xx or 5xx status.
type statusError struct{ code int }

func (e *statusError) Error() string { return "HTTP status " + strconv.Itoa(e.code) }

// Classify maps an error to a bounded kind "stage/what", for example
// "dial/refused", "handshake/timeout", "handshake/alert", "request/http_5xx".
func Classify(err error) string {
	stage := "other"
	var se *stageError
	if errors.As(err, &se) {
		stage = se.stage
	}
	return stage + "/" + kind(err)
}

func kind(err error) string {
	var st *statusError
	var ne net.Error
	switch {
	case errors.As(err, &st):
		return "http_" + strconv.Itoa(st.code/100) + "xx"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "local_resources"
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "alert"):
		return "alert"
	case strings.Contains(msg, "certificate"), strings.Contains(msg, "x509"):
		return "certificate"
	case strings.Contains(msg, "malformed http"), strings.Contains(msg, "malformed mime"):
		return "bad_response"
	}
	return "other"
}
