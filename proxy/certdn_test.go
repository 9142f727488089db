package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
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
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	name := pkix.Name{CommonName: "admin\x00.evil\x01\x7f", Organization: []string{"Line\nBreak"}}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: name, Issuer: name,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := smx509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
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
