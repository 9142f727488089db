package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor"
)

// TestClientCertDNControlCharacters: a client certificate's names may
// hold any character (a UTF8String attribute: "admin\x00.evil"), which
// RDNSequence.String leaves as it is. Sent in X-SSL-Client-S-DN as is,
// the value was no field value (RFC 9110 §5.5): the HTTP/1.1 client wrote
// the NUL to the target (a backend in C reads "CN=admin"), a strict target
// refused the request, http.Transport refused to send it, and either way
// the target was charged with the failure, so that one client with such a
// certificate marked every target down. The control characters go as
// RFC 4514 §2.4 hex escapes, as nginx's $ssl_client_s_dn has them.
func TestClientCertDNControlCharacters(t *testing.T) {
	name := pkix.Name{CommonName: "admin\x00.evil\x01\x7f", Organization: []string{"Line\nBreak"}}
	cert := selfSigned(t, &x509.Certificate{Subject: name, Issuer: name})
	const want = `CN=admin\00.evil\01\7F,O=Line\0ABreak`
	e := echoBackend(t) // net/http: refuses a request with a control character in a field
	st := frontdoor.ConnState{Site: "s", SNI: "example.test", ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert}}
	cfg := Config{
		Upstreams: []UpstreamConfig{upstream("e", addrOf(e))},
		Sites: []SiteConfig{{Name: "s", ServerNames: []string{"example.test"}, ClientCertHeaders: true,
			Routes: []RouteConfig{{Upstream: "e"}}}},
	}
	f := newFront(t, cfg, frontOpts{state: &st})
	c := testClient(t)
	// A GET goes by the proxy's own HTTP/1.1 client, a body over its
	// bound by http.Transport.
	for _, body := range []string{"", strings.Repeat("b", maxH1Body+1)} {
		method := "GET"
		var rd io.Reader
		if body != "" {
			method, rd = "POST", strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, f.url+"/", rd)
		req.Host = "example.test"
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %q, want 200", method, res.StatusCode, b)
		}
		h := decodeSeen(t, string(b)).Header
		for _, k := range []string{"X-Ssl-Client-S-Dn", "X-Ssl-Client-I-Dn"} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", method, k, got, want)
			}
		}
	}
}

// TestClientCertDNAsEncoded: X-Ssl-Client-S-Dn and -I-Dn (and what a
// route's header matcher on them reads) hold every attribute of the
// certificate's names in the certificate's order, last RDN first (RFC
// 2253), as nginx's $ssl_client_s_dn does. pkix.Name.String, which they
// came from, keeps only the last CN of a name with two ("CN=joe,
// CN=admin,O=Bank" was "CN=joe,O=Bank": two certificates, one identity),
// flattens a multi-valued RDN and puts the attributes in an order of its
// own (a name written CN first came out CN first too), so that an nginx
// route or backend that matches the DN matched another string, or none.
func TestClientCertDNAsEncoded(t *testing.T) {
	oid := func(n ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(append([]int{2, 5, 4}, n...)) }
	c, st, l, o, ou, cn := oid(6), oid(8), oid(7), oid(10), oid(11), oid(3)
	for _, tc := range []struct {
		rdns pkix.RDNSequence
		want string
	}{
		{pkix.RDNSequence{{{Type: o, Value: "Bank"}}, {{Type: cn, Value: "admin"}}, {{Type: cn, Value: "joe"}}}, "CN=joe,CN=admin,O=Bank"},
		{pkix.RDNSequence{{{Type: c, Value: "CN"}}, {{Type: st, Value: "BJ"}}, {{Type: l, Value: "Haidian"}}, {{Type: o, Value: "Bank"}}, {{Type: ou, Value: "ops"}}, {{Type: cn, Value: "joe"}}},
			"CN=joe,OU=ops,O=Bank,L=Haidian,ST=BJ,C=CN"},
		// The most specific RDN first, as some CAs write them.
		{pkix.RDNSequence{{{Type: cn, Value: "joe"}}, {{Type: ou, Value: "ops"}}, {{Type: o, Value: "Bank"}}, {{Type: c, Value: "CN"}}}, "C=CN,O=Bank,OU=ops,CN=joe"},
		{pkix.RDNSequence{{{Type: o, Value: "Bank"}}, {{Type: cn, Value: "joe"}, {Type: ou, Value: "ops"}}}, "CN=joe+OU=ops,O=Bank"},
	} {
		raw, err := asn1.Marshal(tc.rdns)
		if err != nil {
			t.Fatal(err)
		}
		cert := selfSigned(t, &x509.Certificate{RawSubject: raw, RawIssuer: raw})
		ci := &connInfo{hasState: true, state: frontdoor.ConnState{ClientAuth: true, PeerCertificates: []*smx509.Certificate{cert}}}
		for _, k := range []string{HeaderClientSDN, HeaderClientIDN} {
			if got := tlsHeaderValue(k, ci); len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s of %s: %q, want %q", k, tc.rdns, got, tc.want)
			}
		}
	}
}

// TestClientCertSerialAsNginx: X-Ssl-Client-Serial is the serial's bytes
// in upper-case hex, two digits each, as nginx's $ssl_client_serial
// (i2a_ASN1_INTEGER) writes it: a serial whose first byte is under 0x10
// kept its leading 0 there and lost it here ("0A1B" was "A1B"), so a
// backend's list of revoked or allowed serials, taken from nginx, missed
// one certificate in sixteen.
func TestClientCertSerialAsNginx(t *testing.T) {
	for serial, want := range map[int64]string{0x0a1b: "0A1B", 0x1234abcd: "1234ABCD", 0x01: "01", 0x80: "80", 0: "00", -0x0a1b: "-0A1B"} {
		ci := &connInfo{hasState: true, state: frontdoor.ConnState{ClientAuth: true,
			PeerCertificates: []*smx509.Certificate{{SerialNumber: big.NewInt(serial)}}}}
		if got := tlsHeaderValue(HeaderClientSerial, ci); len(got) != 1 || got[0] != want {
			t.Errorf("serial %#x: %q, want %q", serial, got, want)
		}
	}
}

// selfSigned makes a certificate of tmpl (names set; serial, validity and
// key filled in here) signed by its own ECDSA key.
func selfSigned(t *testing.T, tmpl *x509.Certificate) *smx509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl.SerialNumber = big.NewInt(7)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
