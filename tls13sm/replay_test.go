package tls13sm

import (
	"bytes"
	"crypto/hmac"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emmansun/gmsm/sm3"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/transcript"
)

// replayDir is one direction of a recorded TLS 1.3 connection.
type replayDir struct {
	hc      halfConn
	hand    []byte
	appData []byte
	nrecs   int
}

// open decrypts a recorded record and checks that sealing the plaintext
// again gives the recorded bytes exactly.
func (d *replayDir) open(t *testing.T, typ byte, vers uint16, body []byte) (byte, []byte) {
	t.Helper()
	hdr := []byte{typ, byte(vers >> 8), byte(vers), byte(len(body) >> 8), byte(len(body))}
	seq := d.hc.seq
	nonce := append([]byte(nil), d.hc.makeNonce()...)
	plain, err := d.hc.aead.Open(nil, nonce, body, hdr)
	if err != nil {
		t.Fatalf("record %d (seq %d) does not decrypt: %v", d.nrecs, seq, err)
	}
	again := d.hc.aead.Seal(nil, nonce, plain, hdr)
	if !bytes.Equal(again, body) {
		t.Fatalf("record %d: re-sealing does not reproduce the recorded bytes", d.nrecs)
	}
	d.hc.seq++
	d.nrecs++
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 {
		t.Fatal("record without content type")
	}
	return plain[i], plain[:i]
}

func (d *replayDir) nextMsg() []byte {
	if len(d.hand) < 4 {
		return nil
	}
	n := int(d.hand[1])<<16 | int(d.hand[2])<<8 | int(d.hand[3])
	if len(d.hand) < 4+n {
		return nil
	}
	m := append([]byte(nil), d.hand[:4+n]...)
	d.hand = d.hand[4+n:]
	return m
}

func TestReplayTLS13Transcripts(t *testing.T) {
	dir, err := transcript.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tls13-tongsuo-*.jsonl"))
	if len(files) < 5 {
		t.Fatalf("found %d TLS 1.3 Tongsuo transcripts", len(files))
	}
	p := loadPKI(t)
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			f, err := transcript.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			kl, err := transcript.LoadKeyLog(strings.TrimSuffix(path, ".jsonl") + ".keylog")
			if err != nil {
				t.Fatal(err)
			}
			for id := 1; id <= len(f.Conns); id++ {
				replayConn(t, f, id, kl, p)
			}
		})
	}
}

func replayConn(t *testing.T, f *transcript.File, id int, kl transcript.KeyLog, p *testPKI) {
	recs, err := f.Records(id)
	if err != nil {
		t.Fatal(err)
	}
	var (
		c2s, s2c      replayDir
		tr            = sm3.New()
		hello         clientHelloMsg
		sh            serverHelloMsg
		suite         *cipherSuite
		secrets       = map[string][]byte{}
		serverPub     any
		clientPub     any
		serverFinDone bool
		clientFinDone bool
		sawCV         [2]bool
		tickets       int
		ks            keySchedule
	)
	th := func() []byte { return tr.Sum(nil) }
	secret := func(label string) []byte {
		s, ok := kl.Get(label, hello.random)
		if !ok {
			t.Fatalf("conn %d: %s not in key log", id, label)
		}
		return s
	}
	for _, r := range recs {
		d := &c2s
		if r.Dir == "s2c" {
			d = &s2c
		}
		typ, body := r.Type, r.Body
		if typ == recordTypeChangeCipherSpec {
			if !bytes.Equal(body, []byte{1}) {
				t.Fatal("bad CCS")
			}
			continue
		}
		if d.hc.aead != nil {
			typ, body = d.open(t, typ, r.Vers, body)
		}
		switch typ {
		case recordTypeHandshake:
			d.hand = append(d.hand, body...)
		case recordTypeApplicationData:
			d.appData = append(d.appData, body...)
			continue
		case recordTypeAlert:
			if !bytes.Equal(body, []byte{1, 0}) {
				t.Fatalf("alert %x", body)
			}
			continue
		default:
			t.Fatalf("record type %d", typ)
		}
		for msg := d.nextMsg(); msg != nil; msg = d.nextMsg() {
			switch msg[0] {
			case typeClientHello:
				if !hello.unmarshal(msg) {
					t.Fatal("ClientHello does not parse")
				}
				if sum, err := ParseClientHello(r.Body); err != nil || !sum.IsTLS13SM() {
					t.Fatalf("ParseClientHello: %v", err)
				}
				tr.Write(msg)
				if id == 2 && len(hello.pskIdentities) == 0 {
					t.Fatal("resumption hello without pre_shared_key")
				}
			case typeServerHello:
				if !sh.unmarshal(msg) || sh.isHRR() || sh.supportedVersion != VersionTLS13 {
					t.Fatal("ServerHello")
				}
				if sh.serverShare.group != CurveSM2 || len(sh.serverShare.data) != 65 {
					t.Fatalf("server key share %x", sh.serverShare.group)
				}
				if id == 2 && !sh.hasSelectedIdent {
					t.Fatal("resumption without selected PSK")
				}
				tr.Write(msg)
				suite = cipherSuiteByID(sh.cipherSuite)
				for _, l := range []string{"SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0", "CLIENT_TRAFFIC_SECRET_0"} {
					secrets[l] = secret(l)
				}
				s2c.hc.setTrafficSecret(&ks, suite, (*trafficSecret)(secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]))
				c2s.hc.setTrafficSecret(&ks, suite, (*trafficSecret)(secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]))
			case typeEncryptedExtensions:
				var m encryptedExtensionsMsg
				if !m.unmarshal(msg) {
					t.Fatal("EncryptedExtensions")
				}
				tr.Write(msg)
			case typeCertificateRequest:
				var m certificateRequestMsg
				if !m.unmarshal(msg) || len(m.signatureAlgorithms) == 0 {
					t.Fatal("CertificateRequest")
				}
				tr.Write(msg)
			case typeCertificate:
				var m certificateMsg
				if !m.unmarshal(msg) || len(m.certificates) == 0 {
					t.Fatal("Certificate")
				}
				leaf, err := smx509.ParseCertificate(m.certificates[0])
				if err != nil {
					t.Fatal(err)
				}
				opts := smx509.VerifyOptions{Roots: p.roots, KeyUsages: []smx509.ExtKeyUsage{smx509.ExtKeyUsageAny}}
				if _, err := leaf.Verify(opts); err != nil {
					t.Fatalf("recorded chain does not verify: %v", err)
				}
				if r.Dir == "s2c" {
					serverPub = leaf.PublicKey
				} else {
					clientPub = leaf.PublicKey
				}
				tr.Write(msg)
			case typeCertificateVerify:
				var m certificateVerifyMsg
				if !m.unmarshal(msg) || m.sigAlg != SM2SigSM3 {
					t.Fatal("CertificateVerify")
				}
				pub, ctx := serverPub, serverSignatureContext
				if r.Dir == "c2s" {
					pub, ctx = clientPub, clientSignatureContext
					sawCV[1] = true
				} else {
					sawCV[0] = true
				}
				if err := verifyCertificateVerify(pub, ctx, th(), m.signature); err != nil {
					t.Fatalf("%s CertificateVerify: %v", r.Dir, err)
				}
				// With the TLCP default ID it must fail (protocol-notes §9.2 item 5).
				if verifyDefaultID(pub, ctx, th(), m.signature) {
					t.Fatal("CertificateVerify also verifies with the default ID")
				}
				tr.Write(msg)
			case typeFinished:
				var m finishedMsg
				if !m.unmarshal(msg) {
					t.Fatal("Finished")
				}
				base := secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]
				if r.Dir == "c2s" {
					base = secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]
				}
				var want [32]byte
				var fk finishedKey
				ks.expandLabel(fk[:], base, "finished", nil)
				ks.finishedMAC(want[:], &fk, th())
				if !hmac.Equal(want[:], m.verifyData) {
					t.Fatalf("%s Finished does not match", r.Dir)
				}
				tr.Write(msg)
				if r.Dir == "s2c" {
					serverFinDone = true
					s2c.hc.setTrafficSecret(&ks, suite, (*trafficSecret)(secrets["SERVER_TRAFFIC_SECRET_0"]))
				} else {
					clientFinDone = true
					c2s.hc.setTrafficSecret(&ks, suite, (*trafficSecret)(secrets["CLIENT_TRAFFIC_SECRET_0"]))
				}
			case typeNewSessionTicket:
				var m newSessionTicketMsg
				if !m.unmarshal(msg) {
					t.Fatal("NewSessionTicket")
				}
				tickets++
			default:
				t.Fatalf("unexpected message type %d", msg[0])
			}
		}
	}
	if !serverFinDone || !clientFinDone {
		t.Fatalf("conn %d: Finished messages missing", id)
	}
	if id == 1 && !sawCV[0] {
		t.Fatal("no server CertificateVerify")
	}
	if clientPub != nil && !sawCV[1] {
		t.Fatal("client certificate without CertificateVerify")
	}
	if len(c2s.appData) == 0 || len(s2c.appData) == 0 {
		t.Fatalf("conn %d: no application data decrypted", id)
	}
	if !bytes.HasPrefix(c2s.appData, []byte("GET / HTTP/1.0")) && !bytes.HasPrefix(c2s.appData, []byte("TLCP/TLS transcript test line")) {
		t.Fatalf("client data %q", c2s.appData[:min(len(c2s.appData), 40)])
	}
	t.Logf("conn %d: suite %s, %d+%d records decrypted, %d tickets, %d/%d app bytes", id, suite.name, c2s.nrecs, s2c.nrecs, tickets, len(c2s.appData), len(s2c.appData))
}
