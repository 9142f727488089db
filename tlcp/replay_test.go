package tlcp

import (
	"bytes"
	"context"
	"crypto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/smkey"
	rec "github.com/gmproxy/gmproxy/internal/transcript"
)

// TestTranscriptReplay replays every recorded TLCP transcript of real peers
// (Tongsuo, GmSSL, Tengine) through this package's message parsers, key
// schedule and record layer: the pre-master is recovered with the test PKI
// (ECC) or taken from the key log (ECDHE), both Finished messages must match,
// every encrypted record must authenticate and the application data must be
// what the peers sent. Signatures in ServerKeyExchange and CertificateVerify
// are verified.
func TestTranscriptReplay(t *testing.T) {
	dir, err := rec.Dir()
	if err != nil {
		t.Fatalf("transcripts: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tlcp-*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no TLCP transcripts in %s", dir)
	}
	p := loadPKI(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		t.Run(name, func(t *testing.T) { replayFile(t, p, f, name) })
	}
}

type replayState struct {
	t             *testing.T
	p             *testPKI
	gmssl         bool
	keylog        rec.KeyLog
	masters       map[string][]byte // session id → master
	cr, sr        []byte
	suite         *cipherSuite
	sessionID     []byte
	master        []byte
	ks            *keySchedule
	tr            *transcript
	serverCerts   []*smx509.Certificate
	clientCerts   []*smx509.Certificate
	in            map[string]*halfConn
	hand          map[string][]byte
	appData       map[string][]byte
	finished      map[string]bool
	alerts        map[string][]byte
	undecryptable bool
}

func replayFile(t *testing.T, p *testPKI, path, name string) {
	f, err := rec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	st := &replayState{t: t, p: p, gmssl: strings.Contains(name, "-gmssl-"), masters: map[string][]byte{}}
	if kl, err := rec.LoadKeyLog(strings.TrimSuffix(path, ".jsonl") + ".keylog"); err == nil {
		st.keylog = kl
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for conn := 1; conn <= len(f.Conns); conn++ {
		records, err := f.Records(conn)
		if err != nil {
			t.Fatal(err)
		}
		st.replayConn(conn, records)
	}
}

func (st *replayState) replayConn(conn int, records []rec.Record) {
	t := st.t
	st.tr = newTranscript()
	st.tr.keepRaw = true
	st.in = map[string]*halfConn{"c2s": {}, "s2c": {}}
	st.hand = map[string][]byte{}
	st.appData = map[string][]byte{}
	st.finished = map[string]bool{}
	st.alerts = map[string][]byte{}
	st.master, st.ks, st.undecryptable = nil, nil, false
	for _, r := range records {
		if r.Vers != VersionTLCP {
			t.Fatalf("conn %d: record version %04x", conn, r.Vers)
		}
		if st.undecryptable && recordType(r.Type) != recordTypeHandshake && recordType(r.Type) != recordTypeChangeCipherSpec {
			continue
		}
		hc := st.in[r.Dir]
		if recordType(r.Type) == recordTypeChangeCipherSpec {
			if !bytes.Equal(r.Body, []byte{1}) {
				t.Fatalf("conn %d: CCS body %x", conn, r.Body)
			}
			if st.undecryptable {
				st.in[r.Dir] = &halfConn{cipher: &recordCipher{}}
				continue
			}
			st.installKeys(r.Dir, hc)
			continue
		}
		if hc.cipher != nil && hc.cipher.aead == nil && hc.cipher.cbcState == nil {
			continue // undecryptable direction
		}
		whole := append([]byte{r.Type, byte(r.Vers >> 8), byte(r.Vers)}, byte(len(r.Body)>>8), byte(len(r.Body)))
		whole = append(whole, r.Body...)
		data, err := hc.decrypt(whole)
		if err != nil {
			t.Fatalf("conn %d %s: record type %d does not authenticate: %v", conn, r.Dir, r.Type, err)
		}
		switch recordType(r.Type) {
		case recordTypeHandshake:
			st.hand[r.Dir] = append(st.hand[r.Dir], data...)
			for len(st.hand[r.Dir]) >= 4 {
				b := st.hand[r.Dir]
				n := int(b[1])<<16 | int(b[2])<<8 | int(b[3])
				if len(b) < 4+n {
					break
				}
				msg := append([]byte(nil), b[:4+n]...)
				st.hand[r.Dir] = b[4+n:]
				st.handshakeMessage(conn, r.Dir, msg)
			}
		case recordTypeApplicationData:
			st.appData[r.Dir] = append(st.appData[r.Dir], data...)
		case recordTypeAlert:
			st.alerts[r.Dir] = append(st.alerts[r.Dir], data...)
		}
	}
	if st.undecryptable {
		t.Logf("conn %d: handshake verified; records not decryptable (no key log)", conn)
		return
	}
	if !st.finished["c2s"] || !st.finished["s2c"] {
		t.Fatalf("conn %d: Finished verified c2s=%v s2c=%v", conn, st.finished["c2s"], st.finished["s2c"])
	}
	req, resp := st.appData["c2s"], st.appData["s2c"]
	switch {
	case st.gmssl:
		want := "TLCP/TLS transcript test line 0123456789\n"
		if string(req) != want || string(resp) != want {
			t.Fatalf("conn %d: app data %q / %q", conn, req, resp)
		}
	case strings.Contains(t.Name(), "tengine"):
		if string(req) != "GET /1k HTTP/1.0\r\n\r\n" || !bytes.HasPrefix(resp, []byte("HTTP/1.1 200 OK")) || !bytes.HasSuffix(resp, bytes.Repeat([]byte("a"), 1024)) {
			t.Fatalf("conn %d: app data %q / %.40q", conn, req, resp)
		}
	default:
		if string(req) != "GET / HTTP/1.0\r\n\r\n" || !bytes.HasPrefix(resp, []byte("HTTP/1.0 200 ok")) {
			t.Fatalf("conn %d: app data %q / %.40q", conn, req, resp)
		}
	}
	for dir, a := range st.alerts {
		if !bytes.Equal(a, []byte{1, 0}) {
			t.Fatalf("conn %d %s: alerts %x, want close_notify", conn, dir, a)
		}
	}
}

func (st *replayState) installKeys(dir string, hc *halfConn) {
	t := st.t
	if st.ks == nil {
		t.Fatalf("CCS before the master secret is known")
	}
	cMAC, sMAC, cKey, sKey, cIV, sIV := st.ks.keys(st.suite, st.cr, st.sr)
	var err error
	if dir == "c2s" {
		hc.cipher, err = newRecordCipher(st.suite, cMAC, cKey, cIV)
	} else {
		hc.cipher, err = newRecordCipher(st.suite, sMAC, sKey, sIV)
	}
	if err != nil {
		t.Fatal(err)
	}
	hc.seq = [8]byte{}
}

func (st *replayState) handshakeMessage(conn int, dir string, msg []byte) {
	t := st.t
	typ := msg[0]
	var m handshakeMessage
	switch typ {
	case typeClientHello:
		ch := &clientHelloMsg{}
		m = ch
		if !ch.unmarshal(msg) {
			t.Fatalf("conn %d: ClientHello does not parse", conn)
		}
		st.cr = ch.random
		st.sessionID = ch.sessionID
	case typeServerHello:
		sh := &serverHelloMsg{}
		m = sh
		if !sh.unmarshal(msg) {
			t.Fatalf("conn %d: ServerHello does not parse", conn)
		}
		st.sr = sh.random
		st.suite = cipherSuiteByID(sh.cipherSuite)
		if st.suite == nil {
			t.Fatalf("conn %d: suite %x", conn, sh.cipherSuite)
		}
		if len(sh.sessionID) > 0 && bytes.Equal(sh.sessionID, st.sessionID) {
			master := st.masters[string(sh.sessionID)]
			if master == nil {
				t.Fatalf("conn %d: resumed unknown session", conn)
			}
			st.setMaster(master)
		}
		if len(sh.sessionID) > 0 {
			st.sessionID = sh.sessionID
		}
	case typeCertificate:
		cm := &certificateMsg{}
		m = cm
		if !cm.unmarshal(msg) {
			t.Fatalf("conn %d: Certificate does not parse", conn)
		}
		certs, err := parseCertificates(cm.certificates)
		if err != nil {
			t.Fatal(err)
		}
		if dir == "s2c" {
			st.serverCerts = certs
			if !bytes.Equal(certs[0].Raw, st.p.server.Leaf.Raw) || !bytes.Equal(certs[1].Raw, st.p.server.EncLeaf.Raw) {
				t.Fatalf("conn %d: server certificate order is not sign, enc", conn)
			}
		} else {
			st.clientCerts = certs
		}
	case typeServerKeyExchange:
		ske := &serverKeyExchangeMsg{}
		m = ske
		if !ske.unmarshal(msg) {
			t.Fatalf("conn %d: SKE does not parse", conn)
		}
		ka := &clientKeyAgreement{suite: st.suite, serverSign: st.serverCerts[0], serverEnc: st.serverCerts[1]}
		if err := ka.processServerKeyExchange(ske.key, st.cr, st.sr); err != nil {
			t.Fatalf("conn %d: ServerKeyExchange: %v", conn, err)
		}
	case typeCertificateRequest:
		cr := &certificateRequestMsg{}
		m = cr
		if !cr.unmarshal(msg) || !bytes.Contains(cr.certificateTypes, []byte{certTypeECDSASign}) {
			t.Fatalf("conn %d: CertificateRequest %x", conn, msg)
		}
	case typeServerHelloDone:
		m = &serverHelloDoneMsg{}
	case typeClientKeyExchange:
		cke := &clientKeyExchangeMsg{}
		m = cke
		if !cke.unmarshal(msg) {
			t.Fatalf("conn %d: CKE does not parse", conn)
		}
		st.clientKeyExchange(conn, cke.ciphertext)
	case typeCertificateVerify:
		cv := &certificateVerifyMsg{}
		m = cv
		if !cv.unmarshal(msg) {
			t.Fatalf("conn %d: CertificateVerify does not parse", conn)
		}
		pub := st.clientCerts[0].PublicKey
		var ok bool
		if st.gmssl {
			ok = verifySM2(pub, st.tr.raw, cv.signature) // GmSSL: raw messages (protocol-notes §5.9)
		} else {
			ok = verifySM2(pub, st.tr.sum(), cv.signature)
		}
		if !ok {
			t.Fatalf("conn %d: CertificateVerify does not verify", conn)
		}
	case typeFinished:
		fin := &finishedMsg{}
		m = fin
		if !fin.unmarshal(msg) {
			t.Fatalf("conn %d: Finished does not parse", conn)
		}
		want := st.ks.finished(dir == "c2s", st.tr.sum())
		if !bytes.Equal(want, fin.verifyData) {
			t.Fatalf("conn %d %s: Finished %x, want %x", conn, dir, fin.verifyData, want)
		}
		st.finished[dir] = true
	case typeNewSessionTicket:
		nst := &newSessionTicketMsg{}
		m = nst
		if !nst.unmarshal(msg) || len(nst.ticket) == 0 {
			t.Fatalf("conn %d: NewSessionTicket does not parse", conn)
		}
	default:
		t.Fatalf("conn %d: unexpected handshake type %d", conn, typ)
	}
	// Round trip: our marshal must reproduce the bytes of the peers.
	if typ != typeClientHello && typ != typeServerHello {
		b, err := m.marshal()
		if err != nil || !bytes.Equal(b, msg) {
			t.Fatalf("conn %d: type %d does not re-marshal byte-exact", conn, typ)
		}
	}
	st.tr.write(msg)
}

func (st *replayState) setMaster(master []byte) {
	st.master = master
	st.ks = scheduleFromMaster(master)
}

func (st *replayState) clientKeyExchange(conn int, body []byte) {
	t := st.t
	var master []byte
	if st.keylog != nil {
		master, _ = st.keylog.Get("CLIENT_RANDOM", st.cr)
	}
	if !st.suite.ecdhe {
		ct := body[2:]
		if int(body[0])<<8|int(body[1]) != len(ct) {
			t.Fatalf("conn %d: ECC CKE length prefix", conn)
		}
		pm, err := smkey.Decrypt(context.Background(), st.p.server.EncKey.(crypto.Decrypter), nil, ct, nil)
		if err != nil || len(pm) != 48 || pm[0] != 1 || pm[1] != 1 {
			t.Fatalf("conn %d: pre-master decrypt: %v %x", conn, err, pm)
		}
		ks := masterFromPreMaster(pm, st.cr, st.sr)
		if master != nil && !bytes.Equal(master, ks.master[:]) {
			t.Fatalf("conn %d: master differs from key log", conn)
		}
		master = ks.master[:]
		// Also through the server code path.
		ka := &serverKeyAgreement{suite: st.suite, cert: &st.p.server}
		pm2, err := ka.processClientKeyExchange(context.Background(), randReader{}, body, nil)
		if err != nil || !bytes.Equal(pm, pm2) {
			t.Fatalf("conn %d: server CKE path: %v", conn, err)
		}
	} else {
		params := body
		if st.gmssl {
			if len(body) != 71 || body[0] != 0 || body[1] != 0x45 {
				t.Fatalf("conn %d: GmSSL ECDHE CKE %d bytes", conn, len(body))
			}
			params = body[2:]
		} else if len(body) != 69 {
			t.Fatalf("conn %d: Tongsuo ECDHE CKE %d bytes", conn, len(body))
		}
		if _, rest, err := parseECDHEParams(params); err != nil || len(rest) != 0 {
			t.Fatalf("conn %d: ECDHE params: %v", conn, err)
		}
		if master == nil {
			st.undecryptable = true
			return
		}
	}
	st.setMaster(master)
	if len(st.sessionID) > 0 {
		st.masters[string(st.sessionID)] = master
	}
}

type randReader struct{}

func (randReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 0x5a
	}
	return len(b), nil
}

// TestParseRecordedClientHellos parses the first flights of every peer.
func TestParseRecordedClientHellos(t *testing.T) {
	dir, err := rec.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	n := 0
	for _, f := range files {
		tf, err := rec.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for conn := 1; conn <= len(tf.Conns); conn++ {
			rs, err := tf.Records(conn)
			if err != nil {
				t.Fatal(err)
			}
			first := rs[0]
			if first.Dir != "c2s" || recordType(first.Type) != recordTypeHandshake {
				t.Fatalf("%s: first record %+v", f, first)
			}
			ch := &clientHelloMsg{}
			if !ch.unmarshal(first.Body) {
				t.Fatalf("%s conn %d: ClientHello does not parse", filepath.Base(f), conn)
			}
			n++
			if first.Vers == VersionTLCP {
				if ch.vers != VersionTLCP || mutualCipherSuite(defaultCipherSuites, ch.cipherSuites) == nil {
					t.Fatalf("%s: TLCP hello vers %04x suites %x", filepath.Base(f), ch.vers, ch.cipherSuites)
				}
			}
		}
	}
	t.Logf("%d ClientHellos parsed", n)
}
