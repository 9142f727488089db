package keyserver

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/emmansun/gmsm/ecdh"
	"github.com/emmansun/gmsm/sm2"
)

// FuzzRequest feeds request frames (type || body) to the server's
// admission and operations: no panic, and only the known codes.
func FuzzRequest(f *testing.F) {
	keys := testKeys(f)
	s := &Server{}
	if err := s.SetPolicy(&Policy{Keys: keys, Clients: []Grant{grantAll("edge", keys)}}); err != nil {
		f.Fatal(err)
	}
	sid, _ := KeyID(keys[0].Private.Public())
	eid, _ := KeyID(keys[1].Private.Public())
	f.Add(append(append([]byte{byte(OpSign)}, sid[:]...), make([]byte, 32)...))
	f.Add(append(append([]byte{byte(OpSign)}, sid[:]...), testMsg...))
	f.Add(append(append([]byte{byte(OpSign)}, sid[:]...), ecdheMsg(f)...))
	f.Add(append(append([]byte{byte(OpSign)}, sid[:]...), eccMsg(testCertDER(f))...))
	ka := append([]byte{byte(OpKeyAgreement)}, eid[:]...)
	eph, _ := ecdh.P256().GenerateKey(rand.Reader)
	ka = append(ka, eph.Bytes()...)
	ka = append(ka, eph.PublicKey().Bytes()...)
	ka = append(ka, eph.PublicKey().Bytes()...)
	ka = append(ka, 0, 0, 48, 0, 0, 0, 1, 'x')
	f.Add(ka)
	f.Add(append([]byte{byte(OpDecrypt)}, eid[:]...))
	ct, _ := sm2.EncryptASN1(rand.Reader, &keys[1].Private.PublicKey, preMaster(f))
	f.Add(append(append([]byte{byte(OpDecrypt)}, eid[:]...), ct...))
	f.Add([]byte{byte(OpPing)})
	f.Fuzz(func(t *testing.T, req []byte) {
		if len(req) == 0 {
			return
		}
		p := s.policy.Load()
		r := s.admit(p, p.clients[0], Op(req[0]), req[1:])
		if r.code == CodeOK && r.op != OpPing {
			r.run()
			p.clients[0].state.release()
		}
		if int(r.code) >= len(codeNames) {
			t.Fatalf("code %d", r.code)
		}
	})
}

// FuzzFrames feeds a byte stream to the greeting and frame readers: no
// panic, bounded frames.
func FuzzFrames(f *testing.F) {
	f.Add(append(appendHello(nil, Version), 0, 0, 0, 5, 0, 0, 0, 1, 4))
	f.Add(appendV1Error(nil, "x"))
	f.Add(append(appendHello(nil, 3), 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, stream []byte) {
		br := bufio.NewReader(bytes.NewReader(stream))
		if _, _, err := readHello(br); err != nil {
			return
		}
		fr := &frameReader{br: br}
		for range 1000 {
			_, _, body, err := fr.next()
			if err != nil {
				return
			}
			if len(body) > MaxFrame {
				t.Fatalf("body of %d bytes", len(body))
			}
		}
	})
}

// TestFrameWriterBound: a frame over MaxFrame is refused, not sent.
func TestFrameWriterBound(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	w := newFrameWriter(c1, time.Second)
	if err := w.write(1, 0, make([]byte, MaxFrame), nil); err == nil {
		t.Error("oversized frame written")
	}
}

// TestFrameReaderBound: a frame whose length field exceeds MaxFrame is
// refused before its body is read or allocated, even when the body is
// there; one of exactly MaxFrame bytes is read.
func TestFrameReaderBound(t *testing.T) {
	frame := func(n int) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(n))
		b = binary.BigEndian.AppendUint32(b, 7) // id
		b = append(b, 1)                        // type
		return append(b, make([]byte, n-(headerLen-4))...)
	}
	r := &frameReader{br: bufio.NewReader(bytes.NewReader(frame(MaxFrame + 1)))}
	if _, _, body, err := r.next(); err == nil {
		t.Fatalf("a frame of MaxFrame+1 bytes was read (%d-byte body)", len(body))
	}
	r = &frameReader{br: bufio.NewReader(bytes.NewReader(frame(MaxFrame)))}
	if id, _, body, err := r.next(); err != nil || id != 7 || len(body) != MaxFrame-(headerLen-4) {
		t.Fatalf("a frame of MaxFrame bytes: id %d, %d-byte body, %v", id, len(body), err)
	}
}
