// Package localstore serves a sessionstore.Store to the other processes of
// one machine over a Unix socket: the worker processes of gmproxy's worker
// mode share the supervisor's store, so that a TLCP session ID made by one
// worker resumes on another, and agree on the ticket keys through it
// (sessionstore.FleetKeys) as a fleet does through Redis.
//
// The socket lives in a folder only the owner can enter; the protocol has
// no authentication of its own. Values are sealed by the workers before
// they are sent (sessionstore.Tiered), as for any shared store.
//
// Framing: every message is a 4-byte big-endian length and a body of at
// most MaxMessage bytes. A request body is op (1 byte), ttl in
// milliseconds (8 bytes), a field count (2 bytes) and the fields, each a
// 4-byte length and its bytes. A response body is a status (1 byte), a
// field count and fields; a field of length 0xFFFFFFFF is absent (nil).
package localstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
)

// Type is the sessions.store type gmproxy's supervisor gives its workers;
// it is never written in a configuration file.
const Type = "local"

// MaxMessage bounds one request or response body.
const MaxMessage = 1 << 20

// maxFields bounds the fields of one message (GetMany's keys).
const maxFields = 1024

// maxIdle bounds the idle connections a Client keeps.
const maxIdle = 16

const (
	opGet byte = 1 + iota
	opSet
	opAddOrGet
	opGetMany
	opDelete
)

const (
	statusOK byte = iota
	statusNotFound
	statusError
)

const absent = 0xFFFFFFFF

var errBadMessage = errors.New("localstore: malformed message")

type message struct {
	code   byte // op or status
	ttl    time.Duration
	fields [][]byte
}

func appendMessage(b []byte, m message, withTTL bool) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, m.code)
	if withTTL {
		b = binary.BigEndian.AppendUint64(b, uint64(m.ttl.Milliseconds()))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.fields)))
	for _, f := range m.fields {
		if f == nil {
			b = binary.BigEndian.AppendUint32(b, absent)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	n := len(b) - start - 4
	if n > MaxMessage || len(m.fields) > maxFields {
		return b[:start], errors.New("localstore: message too large")
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

func readMessage(r io.Reader, withTTL bool) (message, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return message{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxMessage {
		return message{}, errBadMessage
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return message{}, err
	}
	var m message
	need := 3
	if withTTL {
		need += 8
	}
	if len(body) < need {
		return m, errBadMessage
	}
	m.code, body = body[0], body[1:]
	if withTTL {
		ms := binary.BigEndian.Uint64(body)
		if ms > uint64(365*24*time.Hour/time.Millisecond) {
			return m, errBadMessage
		}
		m.ttl, body = time.Duration(ms)*time.Millisecond, body[8:]
	}
	count := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	if count > maxFields {
		return m, errBadMessage
	}
	m.fields = make([][]byte, count)
	for i := range m.fields {
		if len(body) < 4 {
			return m, errBadMessage
		}
		l := binary.BigEndian.Uint32(body)
		body = body[4:]
		if l == absent {
			continue
		}
		if uint64(l) > uint64(len(body)) {
			return m, errBadMessage
		}
		m.fields[i], body = body[:l:l], body[l:]
	}
	if len(body) != 0 {
		return m, errBadMessage
	}
	return m, nil
}

// Serve answers the requests of the connections ln accepts with store,
// until ln is closed. Each connection is served on its own goroutine; a
// malformed request closes it.
func Serve(ln net.Listener, store sessionstore.Store) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serveConn(c, store)
	}
}

func serveConn(c net.Conn, store sessionstore.Store) {
	defer c.Close()
	r := bufio.NewReader(c)
	var out []byte
	for {
		req, err := readMessage(r, true)
		if err != nil {
			return
		}
		resp := answer(store, req)
		if out, err = appendMessage(out[:0], resp, false); err != nil {
			out, _ = appendMessage(out[:0], message{code: statusError}, false)
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func answer(store sessionstore.Store, req message) message {
	ctx := context.Background()
	one := func() ([]byte, bool) {
		if len(req.fields) < 1 || req.fields[0] == nil {
			return nil, false
		}
		return req.fields[0], true
	}
	two := func() (string, []byte, bool) {
		k, ok := one()
		if !ok || len(req.fields) != 2 || req.fields[1] == nil {
			return "", nil, false
		}
		return string(k), req.fields[1], true
	}
	bad := message{code: statusError}
	switch req.code {
	case opGet:
		k, ok := one()
		if !ok {
			return bad
		}
		v, found, err := store.Get(ctx, string(k))
		switch {
		case err != nil:
			return bad
		case !found:
			return message{code: statusNotFound}
		}
		return message{code: statusOK, fields: [][]byte{nonNil(v)}}
	case opSet:
		k, v, ok := two()
		if !ok || store.Set(ctx, k, v, req.ttl) != nil {
			return bad
		}
		return message{code: statusOK}
	case opAddOrGet:
		k, v, ok := two()
		if !ok {
			return bad
		}
		got, err := store.AddOrGet(ctx, k, v, req.ttl)
		if err != nil {
			return bad
		}
		return message{code: statusOK, fields: [][]byte{nonNil(got)}}
	case opGetMany:
		keys := make([]string, len(req.fields))
		for i, f := range req.fields {
			if f == nil {
				return bad
			}
			keys[i] = string(f)
		}
		vals, err := store.GetMany(ctx, keys)
		if err != nil || len(vals) != len(keys) {
			return bad
		}
		return message{code: statusOK, fields: vals}
	case opDelete:
		k, ok := one()
		if !ok || store.Delete(ctx, string(k)) != nil {
			return bad
		}
		return message{code: statusOK}
	}
	return bad
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Client is a sessionstore.Store served by Serve on a Unix socket. It
// keeps up to maxIdle idle connections and dials more on demand.
type Client struct {
	path string
	idle chan *clientConn
	mu   sync.Mutex
	done bool
}

type clientConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

// NewClient returns a Client of the socket at path; it dials lazily.
func NewClient(path string) *Client {
	return &Client{path: path, idle: make(chan *clientConn, maxIdle)}
}

func (c *Client) call(ctx context.Context, req message) (message, error) {
	var cc *clientConn
	select {
	case cc = <-c.idle:
	default:
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", c.path)
		if err != nil {
			return message{}, err
		}
		cc = &clientConn{c: conn, r: bufio.NewReader(conn)}
	}
	if dl, ok := ctx.Deadline(); ok {
		cc.c.SetDeadline(dl)
	} else {
		cc.c.SetDeadline(time.Time{})
	}
	var err error
	if cc.buf, err = appendMessage(cc.buf[:0], req, true); err != nil {
		c.put(cc)
		return message{}, err
	}
	if _, err = cc.c.Write(cc.buf); err == nil {
		var resp message
		if resp, err = readMessage(cc.r, false); err == nil {
			c.put(cc)
			if resp.code == statusError {
				return resp, errors.New("localstore: the store refused the request")
			}
			return resp, nil
		}
	}
	cc.c.Close()
	return message{}, fmt.Errorf("localstore: %w", err)
}

func (c *Client) put(cc *clientConn) {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	if done {
		cc.c.Close()
		return
	}
	select {
	case c.idle <- cc:
	default:
		cc.c.Close()
	}
}

// Get implements sessionstore.Store.
func (c *Client) Get(ctx context.Context, key string) ([]byte, bool, error) {
	resp, err := c.call(ctx, message{code: opGet, fields: [][]byte{[]byte(key)}})
	if err != nil || resp.code == statusNotFound {
		return nil, false, err
	}
	if len(resp.fields) != 1 || resp.fields[0] == nil {
		return nil, false, errBadMessage
	}
	return resp.fields[0], true, nil
}

// Set implements sessionstore.Store.
func (c *Client) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	_, err := c.call(ctx, message{code: opSet, ttl: ttl, fields: [][]byte{[]byte(key), nonNil(val)}})
	return err
}

// AddOrGet implements sessionstore.Store.
func (c *Client) AddOrGet(ctx context.Context, key string, val []byte, ttl time.Duration) ([]byte, error) {
	resp, err := c.call(ctx, message{code: opAddOrGet, ttl: ttl, fields: [][]byte{[]byte(key), nonNil(val)}})
	if err != nil {
		return nil, err
	}
	if len(resp.fields) != 1 || resp.fields[0] == nil {
		return nil, errBadMessage
	}
	return resp.fields[0], nil
}

// GetMany implements sessionstore.Store. Like the other stores it takes
// any number of keys: they are asked for in requests of at most maxFields
// keys and MaxMessage/2 bytes each (FleetKeys asks for every past epoch
// that may still open a ticket: lifetime/rotation of them, 10081 with
// ticket_rotation 1m and lifetime 168h).
func (c *Client) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	out := make([][]byte, 0, len(keys))
	for len(out) < len(keys) {
		req := message{code: opGetMany}
		for size := 0; len(out)+len(req.fields) < len(keys) && len(req.fields) < maxFields; {
			k := keys[len(out)+len(req.fields)]
			if size += 4 + len(k); size > MaxMessage/2 && len(req.fields) > 0 {
				break
			}
			req.fields = append(req.fields, []byte(k))
		}
		resp, err := c.call(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(resp.fields) != len(req.fields) {
			return nil, errBadMessage
		}
		out = append(out, resp.fields...)
	}
	return out, nil
}

// Delete implements sessionstore.Store.
func (c *Client) Delete(ctx context.Context, key string) error {
	_, err := c.call(ctx, message{code: opDelete, fields: [][]byte{[]byte(key)}})
	return err
}

// Close implements sessionstore.Store: it closes the idle connections.
func (c *Client) Close() error {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	for {
		select {
		case cc := <-c.idle:
			cc.c.Close()
		default:
			return nil
		}
	}
}
