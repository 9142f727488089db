package conf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/keyserver"
)

// TestKeyServerFile checks gmproxy keyserver configurations: the good one
// loads every key once, the bad one reports each problem (golden file).
func TestKeyServerFile(t *testing.T) {
	f, err := LoadKeyServer("testdata/keyserver/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := f.Material
	if m.Network != "tcp" || m.Addr != "127.0.0.1:7443" || m.Cert == nil || m.Policy.ClientCAs == nil {
		t.Errorf("material %+v", m)
	}
	// server_sign.enc.key is server_sign.key encrypted: served once.
	if len(m.Keys) != 2 {
		t.Errorf("%d keys, want 2", len(m.Keys))
	}
	// Names and roles: the sign key's from its certificate's key usage.
	pol := m.Policy
	if len(pol.Keys) != 2 || pol.Keys[0].Name != "server_sign" || pol.Keys[0].Roles != keyserver.RoleSign ||
		pol.Keys[1].Name != "enc" || pol.Keys[1].Roles != keyserver.RoleDecrypt|keyserver.RoleKeyAgreement {
		t.Errorf("policy keys %+v", pol.Keys)
	}
	if len(pol.Clients) != 2 || pol.Clients[0].Subject != "CN=edge,O=Example" || pol.Clients[0].Limits != keyserver.DefaultLimits ||
		len(pol.Clients[1].SPKISHA256) != 32 || pol.Clients[1].Limits != (keyserver.Limits{Rate: 50, Burst: 10, MaxInFlight: 4, MaxConns: 8}) || pol.Local != nil {
		t.Errorf("policy clients %+v", pol.Clients)
	}
	if f.HandshakeTimeout != 2*time.Second || f.MaxConnections != 100 || f.MaxHandshakes != 20 || f.MaxHandshakesPerAddress != 4 || f.AuditInterval != 30*time.Second || f.MetricsAddress != "127.0.0.1:9101" {
		t.Errorf("limits not read: %+v", f)
	}
	if len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].String(), "already served") {
		t.Errorf("warnings %v", f.Warnings)
	}
	if f.IdleTimeout != DefaultKeyServerIdleTimeout || f.ShutdownGrace != DefaultKeyServerShutdownGrace || f.Log.Level != "info" {
		t.Errorf("defaults not filled: %+v", f)
	}

	_, probs := CheckKeyServer("testdata/keyserver/bad.yaml")
	if !probs.HasErrors() {
		t.Fatal("bad.yaml accepted")
	}
	var b strings.Builder
	for _, p := range probs {
		b.WriteString(p.String() + "\n")
	}
	golden(t, "testdata/keyserver/bad.golden", []byte(b.String()))

	u, probs := CheckKeyServer("testdata/keyserver/missing.yaml")
	if u != nil || len(probs) != 1 {
		t.Errorf("missing file: %v", probs)
	}
}

// TestKeyServerUnixAndReuse: a Unix-socket key server needs no TLS files,
// and tls13sm: {} reuses the TLCP signing certificate with its key server.
func TestKeyServerUnixAndReuse(t *testing.T) {
	cfg, err := Parse("testdata/good/x.yaml", []byte(`listeners: [{address: "127.0.0.1:0"}]
key_servers:
  - {name: ks, address: "unix:/run/ks.sock"}
sites:
  - tlcp: {sign_cert: ../pki/server_sign.crt, sign_key_server: ks, enc_cert: ../pki/server_enc.crt, enc_key: ../pki/server_enc.key}
    tls13sm: {}
    routes: [{respond: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Sites[0].Material
	ref, ok := m.TLCPSign.Key.(*RemoteKeyRef)
	if !ok || ref.KeyServer != "ks" || m.TLCPSign.KeyServer != "ks" || !m.TLCPSign.Leaf().PublicKey.(*ecdsa.PublicKey).Equal(ref.Public()) {
		t.Errorf("sign key %#v", m.TLCPSign.Key)
	}
	if _, err := ref.Sign(nil, make([]byte, 32), nil); err == nil {
		t.Error("RemoteKeyRef signed")
	}
	if m.TLCPEnc.KeyServer != "" || m.TLS13SM.KeyServer != "ks" {
		t.Errorf("enc key server %q, tls13sm key server %q", m.TLCPEnc.KeyServer, m.TLS13SM.KeyServer)
	}
	ks := cfg.KeyServers[0].Material
	if len(ks.Endpoints) != 1 || ks.Endpoints[0] != (KeyServerEndpoint{Network: "unix", Addr: "/run/ks.sock"}) || ks.ClientCert != nil {
		t.Errorf("key server material %+v", ks)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
}

// writeTestMTLS writes an ECDSA CA (keyserver_ca.crt), a key server
// certificate (keyserver.crt/.key) and a client certificate
// (keyserver_client.crt/.key) into dir, as gmproxy certs -keyserver does.
func writeTestMTLS(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "key server CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, _ := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	write("keyserver_ca.crt", "CERTIFICATE", caDER)
	for _, l := range []struct {
		name, cn string
		eku      x509.ExtKeyUsage
	}{{"keyserver", "keys.internal", x509.ExtKeyUsageServerAuth}, {"keyserver_client", "gmproxy", x509.ExtKeyUsageClientAuth}} {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: l.cn}, DNSNames: []string{l.cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{l.eku}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalPKCS8PrivateKey(k)
		write(l.name+".crt", "CERTIFICATE", der)
		write(l.name+".key", "PRIVATE KEY", kder)
	}
}

func FuzzKeyServerFile(f *testing.F) {
	files, _ := filepath.Glob("testdata/keyserver/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("listen: unix:/tmp/x\nkeys: [{key: ../pki/server_enc.key}]"))
	dir, err := filepath.Abs("testdata/keyserver")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		ks, probs := checkKeyServer("testdata/keyserver/fuzz.yaml", dir, data)
		if (ks == nil) != probs.HasErrors() {
			t.Fatalf("config %v with problems %v", ks != nil, probs)
		}
	})
}

// TestKeyServerListenGroup: listen_group names an existing group (by name
// or number) for a Unix socket; a missing group is an error at its line.
func TestKeyServerListenGroup(t *testing.T) {
	pki, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	check := func(group string) (*KeyServerFile, Problems) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "keyserver.yaml")
		body := "listen: unix:/run/ks.sock\nlisten_group: \"" + group + "\"\nkeys: [{key: " + pki + "/server_sign.key, cert: " + pki + "/server_sign.crt}]\n"
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return CheckKeyServer(path)
	}
	gid := strconv.Itoa(os.Getgid())
	if f, probs := check(gid); probs.HasErrors() || f.Material.SocketGID == nil || strconv.Itoa(*f.Material.SocketGID) != gid {
		t.Errorf("listen_group %s: %v", gid, probs)
	}
	if _, probs := check("no-such-group-gmproxy"); !probs.HasErrors() || !strings.Contains(probs[0].String(), `keyserver.yaml:2:15: error: listen_group: group "no-such-group-gmproxy": no such group`) {
		t.Errorf("a missing group: %v", probs)
	}
}

// TestSubjectProblemAcceptsCertificateSubjects: the check of
// clients[].subject (bad.golden shows what it refuses) accepts every
// subject as the key server writes a certificate's: values with the
// characters it escapes, multi-valued RDNs, types it writes by OID, with
// a string value or not.
func TestSubjectProblemAcceptsCertificateSubjects(t *testing.T) {
	tv := func(oid asn1.ObjectIdentifier, v any) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: oid, Value: v}
	}
	cn, o, c := asn1.ObjectIdentifier{2, 5, 4, 3}, asn1.ObjectIdentifier{2, 5, 4, 10}, asn1.ObjectIdentifier{2, 5, 4, 6}
	email, dc := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	for _, rdns := range []pkix.RDNSequence{
		{{tv(c, "CN")}, {tv(o, "Example")}, {tv(cn, "edge-1")}},
		{{tv(o, "Example, Inc.")}, {tv(cn, " edge ")}},
		{{tv(cn, `a"b<c>d;e+f\g`)}, {tv(o, "#1")}},
		{{tv(cn, `ends in a backslash \`)}, {tv(cn, `\ `)}},
		{{tv(dc, "example")}, {tv(email, "ops@example.com")}, {tv(cn, "边缘节点"), tv(o, "示例")}},
		{{tv(asn1.ObjectIdentifier{1, 2, 3, 4}, 42)}, {tv(cn, "x=y")}},
	} {
		der, err := asn1.Marshal(rdns)
		if err != nil {
			t.Fatal(err)
		}
		s := keyserver.SubjectString(&x509.Certificate{RawSubject: der})
		if s == "" {
			t.Fatalf("%v: no subject string", rdns)
		}
		if p := subjectProblem(s); p != "" {
			t.Errorf("subject %q of a certificate refused: %s", s, p)
		}
	}
}

// TestKeyServerPoolSizeBound holds pool_size's bound to what a key server
// takes from one client by default, which its error message names.
func TestKeyServerPoolSizeBound(t *testing.T) {
	if MaxKeyServerPoolSize != keyserver.DefaultLimits.MaxConns {
		t.Errorf("MaxKeyServerPoolSize %d, keyserver.DefaultLimits.MaxConns %d", MaxKeyServerPoolSize, keyserver.DefaultLimits.MaxConns)
	}
}

// TestKeyServerAddressServerName: a key server address without a
// server_name is verified as its host, and an IPv6 link-local address's
// zone (fe80::1%eth0), which names the local interface and which no
// certificate's IP SAN holds, is left out, as for an upstream's target.
func TestKeyServerAddressServerName(t *testing.T) {
	cfg, err := Parse("testdata/good/x.yaml", []byte(`listeners: [{address: "127.0.0.1:0"}]
key_servers:
  - name: ks
    addresses: ["[fe80::1%eth0]:7443", "[::1]:7443", "127.0.0.1:7443", "keys.internal:7443"]
    cert: ../pki/server_ecdsa.crt
    key: ../pki/server_ecdsa.key
    ca: ../pki/ecdsa_ca.crt
  - name: named
    address: "[fe80::1%eth0]:7443"
    cert: ../pki/server_ecdsa.crt
    key: ../pki/server_ecdsa.key
    ca: ../pki/ecdsa_ca.crt
    server_name: keys.internal
sites:
  - tlcp: {sign_cert: ../pki/server_sign.crt, sign_key_server: ks, enc_cert: ../pki/server_enc.crt, enc_key_server: named}
    tls13sm: {}
    routes: [{respond: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range cfg.KeyServers {
		for _, e := range k.Material.Endpoints {
			got = append(got, e.Addr+" "+e.ServerName)
		}
	}
	want := []string{"[fe80::1%eth0]:7443 fe80::1", "[::1]:7443 ::1", "127.0.0.1:7443 127.0.0.1", "keys.internal:7443 keys.internal",
		"[fe80::1%eth0]:7443 keys.internal"}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints (address, server name)\n%q\nwant\n%q", got, want)
	}
}
