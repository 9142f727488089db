package conf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/frontdoor/family"
	"github.com/gmproxy/gmproxy/internal/devpki"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/internal/transcript"
)

func TestSuiteNames(t *testing.T) {
	tests := []struct {
		name string
		id   uint16
		ok   bool
	}{
		{"ECC-SM2-SM4-CBC-SM3", TLCPECCSM4CBCSM3, true},
		{"ecc-sm2-with-sm4-sm3", TLCPECCSM4CBCSM3, true},
		{"ECC_SM4_CBC_SM3", TLCPECCSM4CBCSM3, true},
		{"TLS_ECC_SM4_CBC_SM3", TLCPECCSM4CBCSM3, true},
		{"ECC-SM2-SM4-GCM-SM3", TLCPECCSM4GCMSM3, true},
		{"ECC-SM2-WITH-SM4-GCM-SM3", TLCPECCSM4GCMSM3, true},
		{"tls_ecc_sm4_gcm_sm3", TLCPECCSM4GCMSM3, true},
		{"ECDHE-SM2-SM4-CBC-SM3", TLCPECDHESM4CBCSM3, true},
		{"ECDHE-SM2-WITH-SM4-SM3", TLCPECDHESM4CBCSM3, true},
		{"TLS_ECDHE_SM4_CBC_SM3", TLCPECDHESM4CBCSM3, true},
		{"ECDHE_SM4_GCM_SM3", TLCPECDHESM4GCMSM3, true},
		{"ECDHE-SM2-SM4-GCM-SM3", TLCPECDHESM4GCMSM3, true},
		{"TLS_SM4_GCM_SM3", 0, false},
		{"ECC-SM2-SM4-CCM-SM3", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		id, canon, ok := TLCPSuite(tt.name)
		if ok != tt.ok || id != tt.id {
			t.Errorf("TLCPSuite(%q) = %#04x, %v; want %#04x, %v", tt.name, id, ok, tt.id, tt.ok)
		}
		if ok && !strings.HasPrefix(canon, "EC") {
			t.Errorf("canonical name %q", canon)
		}
	}
	for name, want := range map[string]uint16{"TLS_SM4_GCM_SM3": TLS13SM4GCMSM3, "tls-sm4-ccm-sm3": TLS13SM4CCMSM3, "SM4_GCM_SM3": TLS13SM4GCMSM3} {
		if id, _, ok := TLS13SMSuite(name); !ok || id != want {
			t.Errorf("TLS13SMSuite(%q) = %#04x, %v", name, id, ok)
		}
	}
	if _, _, ok := TLS13SMSuite("ECC_SM4_GCM_SM3"); ok {
		t.Error("TLCP suite accepted as TLS 1.3 suite")
	}
	if !IsECDHE(TLCPECDHESM4GCMSM3) || IsECDHE(TLCPECCSM4GCMSM3) {
		t.Error("IsECDHE")
	}
}

// TestMaterial checks what Load hands to the runtime for testdata/good/full.yaml.
func TestMaterial(t *testing.T) {
	cfg, err := Load("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	portal := cfg.Sites[0].Material
	if portal.TLCPSign == nil || portal.TLCPEnc == nil || portal.TLS13SM == nil || portal.TLS == nil {
		t.Fatalf("material missing: %+v", portal)
	}
	if _, ok := portal.TLCPSign.Key.(*sm2.PrivateKey); !ok {
		t.Errorf("sign key %T (encrypted key with password file)", portal.TLCPSign.Key)
	}
	if portal.TLS13SM != portal.TLCPSign && !portal.TLS13SM.Leaf().Equal(portal.TLCPSign.Leaf()) {
		t.Error("tls13sm: {} does not reuse the signing certificate")
	}
	if want := []uint16{TLCPECCSM4CBCSM3, TLCPECCSM4GCMSM3, TLCPECDHESM4CBCSM3}; !reflect.DeepEqual(portal.TLCPSuites, want) {
		t.Errorf("TLCP suites %x, want %x", portal.TLCPSuites, want)
	}
	if want := []uint16{TLS13SM4GCMSM3}; !reflect.DeepEqual(portal.TLS13SMSuites, want) {
		t.Errorf("TLS13 suites %x", portal.TLS13SMSuites)
	}
	if portal.TLSMinVersion != tls.VersionTLS13 {
		t.Errorf("min version %x", portal.TLSMinVersion)
	}
	if len(portal.ClientCAs) != 2 || portal.ClientCAPool() == nil {
		t.Error("client CAs not loaded")
	}
	tc := portal.TLS.TLSCertificate()
	if len(tc.Certificate) != 1 || tc.PrivateKey == nil {
		t.Error("TLSCertificate")
	}
	// TLS gets the ECDSA CA of the two; an SM2-only CA file gives it an
	// empty pool, never nil (which crypto/tls would take for the system
	// roots).
	if _, n := X509Pool(portal.ClientCAs); n != 1 {
		t.Errorf("X509Pool holds %d CAs, want the ECDSA one", n)
	}
	if p, n := X509Pool(portal.ClientCAs[:1]); p == nil || n != 0 || !p.Equal(x509.NewCertPool()) {
		t.Errorf("X509Pool of an SM2 CA: %v, %d; want an empty pool", p, n)
	}
	up := cfg.Upstreams[0].Material
	if up.Sign == nil || up.Enc == nil || len(up.RootCAs) != 1 || len(up.Suites) != 4 {
		t.Errorf("upstream material %+v", up)
	}
	if !cfg.Upstreams[0].TLS.ECDHEParamsAsVector || !cfg.Upstreams[0].TLS.NoExtensions {
		t.Error("gmssl_compat does not imply its options")
	}
	if len(cfg.TicketKeys) != 2 {
		t.Errorf("%d ticket keys, want 2", len(cfg.TicketKeys))
	}
	if cfg.Listeners[0].DefaultSite != "portal" || !reflect.DeepEqual(cfg.Listeners[0].Sites, []string{"portal", "legacy"}) {
		t.Errorf("listener sites %v default %q", cfg.Listeners[0].Sites, cfg.Listeners[0].DefaultSite)
	}
}

func TestKeyPasswordEnv(t *testing.T) {
	abs, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.ReplaceAll(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tls13sm: {cert: PKI/server_sign.crt, key: PKI/server_sign.enc.key, key_password_env: GMPROXY_CONF_TEST_PW}
    routes: [{respond: {}}]
`, "PKI", abs)
	t.Setenv("GMPROXY_CONF_TEST_PW", "secret")
	if _, err := Parse("mem.yaml", []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GMPROXY_CONF_TEST_PW", "wrong")
	if _, err := Parse("mem.yaml", []byte(yaml)); err == nil || !strings.Contains(err.Error(), "wrong password") {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestTongsuoPKI loads the test PKI made by Tongsuo (testdata/pki-tongsuo), with the GmSSL-format
// encrypted keys, as a real-world case.
func TestTongsuoPKI(t *testing.T) {
	dir, err := transcript.PKIDir()
	if err != nil {
		t.Fatalf("test PKI: %v", err)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "pw"), []byte("P@ssw0rd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := strings.ReplaceAll(`listeners: [{address: "127.0.0.1:0", protocols: [tlcp, tls13sm]}]
sites:
  - server_names: [localhost]
    tlcp:
      sign_cert: PKI/server_sign.crt
      sign_key: PKI/server_sign.gmssl.key.pem
      enc_cert: PKI/server_enc.crt
      enc_key: PKI/server_enc.gmssl.key.pem
      key_password_file: pw
    tls13sm: {}
    client_auth: {mode: require, ca: PKI/ca.crt}
    routes: [{upstream: sm}]
upstreams:
  - name: sm
    protocol: tlcp
    targets: [127.0.0.1:4433]
    tls:
      ca: PKI/ca.crt
      sign_cert: PKI/client_sign.crt
      sign_key: PKI/client_sign.key
      enc_cert: PKI/client_enc.crt
      enc_key: PKI/client_enc.key
`, "PKI", dir)
	// The test PKI is valid from 2026-11-30 for 3650 days.
	defer func(old func() time.Time) { now = old }(now)
	cfg, err := Parse(filepath.Join(tmp, "tongsuo.yaml"), []byte(yaml))
	now = time.Now
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		t.Errorf("unexpected warning: %s", w)
	}
	m := cfg.Sites[0].Material
	if m.TLCPSign == nil || m.TLCPEnc == nil || m.TLS13SM == nil || len(m.ClientCAs) != 1 {
		t.Fatalf("material %+v", m)
	}
	if u := cfg.Upstreams[0].Material; u.Sign == nil || u.Enc == nil || len(u.Suites) != 4 {
		t.Errorf("upstream material %+v", u)
	}

	// GmSSL-style combined files: sign+enc certificates in one file, both
	// encrypted keys in another.
	combined := strings.ReplaceAll(`listeners: [{address: "127.0.0.1:0", protocols: [tlcp]}]
sites:
  - server_names: [localhost]
    tlcp:
      sign_cert: PKI/server_sign_enc_chain.pem
      enc_cert: PKI/server_sign_enc_chain.pem
      sign_key: PKI/server_sign_enc_keys.gmssl.pem
      enc_key: PKI/server_sign_enc_keys.gmssl.pem
      key_password_env: GMPROXY_CONF_TEST_PW
    routes: [{respond: {}}]
`, "PKI", dir)
	t.Setenv("GMPROXY_CONF_TEST_PW", "P@ssw0rd")
	cfg, err = Parse(filepath.Join(tmp, "combined.yaml"), []byte(combined))
	if err != nil {
		t.Fatal(err)
	}
	m = cfg.Sites[0].Material
	if m.TLCPSign.Leaf().Equal(m.TLCPEnc.Leaf()) || m.TLCPEnc.Leaf().KeyUsage&0x4 == 0 || len(m.TLCPSign.Chain) != 1 {
		t.Errorf("combined files: sign %v enc %v", m.TLCPSign.Leaf().KeyUsage, m.TLCPEnc.Leaf().KeyUsage)
	}
	for _, w := range cfg.Warnings {
		t.Errorf("unexpected warning: %s", w)
	}
}

func TestDevConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	if _, err := devpki.LoadOrCreate(dir, devpki.Options{}); err != nil {
		t.Fatal(err)
	}
	defer func(old func() time.Time) { now = old }(now)
	now = time.Now
	cfg, err := DevConfig(dir, "127.0.0.1:18080")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		t.Errorf("unexpected warning: %s", w)
	}
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Address != DefaultListenAddress ||
		!reflect.DeepEqual(cfg.Listeners[0].Protocols, []string{family.TLCP, family.TLS13SM, family.TLS}) {
		t.Errorf("listeners %+v", cfg.Listeners)
	}
	s := cfg.Sites[0]
	if s.Name != "dev" || s.Material.TLCPSign == nil || s.Material.TLCPEnc == nil || s.Material.TLS13SM == nil || s.Material.TLS == nil {
		t.Errorf("dev site %+v", s)
	}
	if cfg.Upstreams[0].Targets[0].Address != "127.0.0.1:18080" || cfg.Admin.Address != DefaultAdminAddress {
		t.Error("backend or admin address")
	}
	// The embedded file names are the ones devpki writes.
	for _, f := range []string{devpki.FileServerSignCert, devpki.FileServerSignKey, devpki.FileServerEncCert, devpki.FileServerEncKey, devpki.FileECDSAServerCert, devpki.FileECDSAServerKey, devpki.FileCACert} {
		if !strings.Contains(string(DefaultYAML()), f) {
			t.Errorf("default.yaml does not use %s", f)
		}
	}
	if _, err := DevConfig(t.TempDir(), "127.0.0.1:1"); err == nil {
		t.Error("DevConfig accepted an empty PKI folder")
	}
	if _, err := DevConfig(dir, ""); err == nil {
		t.Error("DevConfig accepted an empty backend")
	}
}

func TestProblemString(t *testing.T) {
	p := Problem{File: "a.yaml", Line: 3, Column: 7, Path: "sites[0].name", Severity: SeverityWarning, Message: "bad", Fix: "fix it"}
	if got, want := p.String(), "a.yaml:3:7: warning: sites[0].name: bad; fix it"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	ps := Problems{p, {File: "a.yaml", Message: "worse"}}
	if !ps.HasErrors() || ps.Count(SeverityWarning) != 1 || len(ps.Only(SeverityError)) != 1 {
		t.Error("counts")
	}
	if got := ps[1].String(); got != "a.yaml: error: worse" {
		t.Errorf("got %q", got)
	}
}

func TestDefaultNormalized(t *testing.T) {
	b, err := Default().Normalized()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cache_size: 20480", "lifetime: 5m", "tickets: true", "address: 127.0.0.1:9100", "shutdown_grace: 30s", "format: combined"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("default lacks %q:\n%s", want, b)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !strings.Contains(err.Error(), "cannot read the configuration") {
		t.Fatalf("got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("listeners: [{address: ':1'}]\nsites: [{tls: {}}]"))
	f.Add([]byte("a: &a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		cfg, err := Parse("testdata/good/fuzz.yaml", data)
		if err == nil {
			if _, err := cfg.Normalized(); err != nil {
				t.Fatal(err)
			}
		} else if ps, ok := err.(Problems); !ok || !ps.HasErrors() {
			t.Fatalf("error %T without problems: %v", err, err)
		}
	})
}

// TestAliasBomb checks that alias loops and exponential alias expansion are
// cut off with an error instead of exhausting memory or time.
func TestAliasBomb(t *testing.T) {
	bomb := `a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
listeners: &l
  - <<: [*g]
    address: 127.0.0.1:1
sites: [{server_names: *g}]
`
	_, err := Parse("testdata/good/bomb.yaml", []byte(bomb))
	if err == nil {
		t.Fatal("alias bomb accepted")
	}
	loop := "listeners: &l [{sites: *l}]\n"
	if _, err := Parse("testdata/good/loop.yaml", []byte(loop)); err == nil {
		t.Fatal("alias loop accepted")
	}
}

func TestResolve(t *testing.T) {
	cfg, err := Load("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("testdata/good")
	if cfg.Dir != abs {
		t.Errorf("Dir %q, want %q", cfg.Dir, abs)
	}
	for in, want := range map[string]string{"stdout": "stdout", "off": "off", "/var/log/a.log": "/var/log/a.log", "logs/a.log": filepath.Join(abs, "logs/a.log")} {
		if got := cfg.Resolve(in); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAcceptRawCertificateVerifyDefault: a tlcp section accepts both client
// CertificateVerify forms unless accept_raw_certificate_verify is false.
func TestAcceptRawCertificateVerifyDefault(t *testing.T) {
	abs, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		extra string
		want  bool
	}{{"", true}, {", accept_raw_certificate_verify: false", false}, {", accept_raw_certificate_verify: true", true}} {
		yaml := strings.ReplaceAll(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tlcp: {sign_cert: PKI/server_sign.crt, sign_key: PKI/server_sign.key, enc_cert: PKI/server_enc.crt, enc_key: PKI/server_enc.key`+c.extra+`}
    routes: [{respond: {}}]
`, "PKI", abs)
		cfg, err := Parse("mem.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Sites[0].TLCP.AcceptRawCertificateVerify; got != c.want {
			t.Errorf("%q: accept_raw_certificate_verify = %v, want %v", c.extra, got, c.want)
		}
	}
}

// TestSM2OnlyClientCAWithTLS: a site that verifies client certificates over
// TLS too, with a CA file of SM2 CAs only, is warned about (no TLS client
// can authenticate), and its TLS pool is empty, not nil (the system roots
// for crypto/tls).
func TestSM2OnlyClientCAWithTLS(t *testing.T) {
	b, err := os.ReadFile("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(b), "ca: ../pki/client_cas.crt", "ca: ../pki/ca.crt", 1)
	cfg, err := Parse("testdata/good/sm2only.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, w := range cfg.Warnings {
		warned = warned || strings.Contains(w.String(), "sites[0].client_auth.ca: the client CA file holds SM2 CAs only")
	}
	if !warned {
		t.Errorf("no warning for an SM2-only client CA file on a site with tls; warnings: %v", cfg.Warnings)
	}
	if p, n := X509Pool(cfg.Sites[0].Material.ClientCAs); p == nil || n != 0 {
		t.Errorf("X509Pool: %v, %d; want an empty pool", p, n)
	}
}

// TestNoSM2ClientCAWithSM: a site that verifies client certificates over
// TLCP and TLS 1.3-SM, with a CA file of RSA/ECDSA CAs only, is warned
// about at the file: every SM2 client certificate would fail with
// unknown_ca, so no TLCP or TLS 1.3-SM client could authenticate.
func TestNoSM2ClientCAWithSM(t *testing.T) {
	b, err := os.ReadFile("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ca   string
		warn bool
	}{{"../pki/ecdsa_ca.crt", true}, {"../pki/client_cas.crt", false}, {"../pki/ca.crt", false}} {
		// Under mode none too: the site's TLCP ECDHE suites verify every
		// client's certificates against ca.
		for _, mode := range []string{"request", "none"} {
			yaml := strings.Replace(string(b), "{mode: request, ca: ../pki/client_cas.crt}", "{mode: "+mode+", ca: "+c.ca+"}", 1)
			cfg, err := Parse("testdata/good/nosm2.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			warned := false
			for _, w := range cfg.Warnings {
				warned = warned || strings.Contains(w.String(), "nosm2.yaml:32:") && strings.Contains(w.String(), "sites[0].client_auth.ca: the client CA file holds no SM2 CA")
			}
			if warned != c.warn {
				t.Errorf("client_auth mode %s, ca %s on a site with tlcp and tls13sm: warned %v, want %v; warnings: %v", mode, c.ca, warned, c.warn, cfg.Warnings)
			}
		}
	}
}

// TestClientCANamesTooLargeWarned: a client CA file whose subject names do
// not fit a CertificateRequest (64 KiB) is warned of at its ca: the
// handshakes then send an empty list (TLCP) or none (TLS 1.3-SM), which
// clients choosing their certificate by the list answer with none.
func TestClientCANamesTooLargeWarned(t *testing.T) {
	b, err := os.ReadFile("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile("testdata/pki/client_cas.crt")
	if err != nil {
		t.Fatal(err)
	}
	many := append(append([]byte(nil), own...), fillerCAsPEM(t)...)
	// Without the site's tls section: crypto/tls cannot send these names,
	// which check refuses (TestClientCANamesTooLargeForTLSRefused).
	lines := strings.Split(string(b), "\n")
	for i := 27; i <= 30; i++ {
		lines[i] = ""
	}
	b = []byte(strings.Join(lines, "\n"))
	dir := t.TempDir()
	// Under mode none too: the site's TLCP ECDHE suites ask every client
	// for its certificates, with the names of ca.
	for _, mode := range []string{"request", "none"} {
		for name, pemCAs := range map[string][]byte{"few.crt": own, "many.crt": many} {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, pemCAs, 0o644); err != nil {
				t.Fatal(err)
			}
			yaml := strings.Replace(string(b), "{mode: request, ca: ../pki/client_cas.crt}", "{mode: "+mode+", ca: "+path+"}", 1)
			cfg, err := Parse("testdata/good/names.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			warned := false
			for _, w := range cfg.Warnings {
				warned = warned || strings.Contains(w.String(), "names.yaml:32:") && strings.Contains(w.String(), "names do not fit a CertificateRequest")
			}
			if warned != (name == "many.crt") {
				t.Errorf("mode %s, client CA file %s: warned %v; warnings: %v", mode, name, warned, cfg.Warnings)
			}
		}
	}
}

// TestClientCANamesTooLargeForTLSRefused: on a tls site crypto/tls puts
// every name of the client CA file in its CertificateRequest: past 64 KiB
// each TLS handshake of the site fails (TLS 1.3: internal_error, the
// server cannot write the message; TLS 1.2: Go clients refuse it), so
// check refuses such a file under mode request or require.
func TestClientCANamesTooLargeForTLSRefused(t *testing.T) {
	b, err := os.ReadFile("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 18; i <= 26; i++ { // the site's tlcp and tls13sm: a tls site
		lines[i] = ""
	}
	lines[3] = "    protocols: [tls]"
	many := fillerCAsPEM(t)
	path := filepath.Join(t.TempDir(), "many.crt")
	if err := os.WriteFile(path, many, 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(strings.Join(lines, "\n"), "ca: ../pki/client_cas.crt", "ca: "+path, 1)
	_, err = Parse("testdata/good/tlsmany.yaml", []byte(yaml))
	if err == nil || !strings.Contains(err.Error(), "tlsmany.yaml:32:") || !strings.Contains(err.Error(), "names do not fit a CertificateRequest") {
		t.Fatalf("a tls site's client CA file of 70 KiB of names: %v; want it refused at its ca", err)
	}
}

// TestSameKeyForSignAndEnc: an encryption certificate issued for the
// signing certificate's key pair (the enc key file a copy of the sign key)
// is warned about at enc_cert: TLCP's double certificates are two key
// pairs.
func TestSameKeyForSignAndEnc(t *testing.T) {
	caCert, caKey, signKey, signCert := testPKIFiles(t)
	tmpl := &smx509.Certificate{
		SerialNumber: big.NewInt(0x7a6b5c4d3e), Subject: signCert.Subject, DNSNames: signCert.DNSNames, IPAddresses: signCert.IPAddresses,
		NotBefore: signCert.NotBefore, NotAfter: signCert.NotAfter,
		KeyUsage:    smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement,
		ExtKeyUsage: []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth},
	}
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, caCert, signKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{"server_sign.crt": "server_sign.crt", "server_sign.key": "server_sign.key", "same_enc.key": "server_sign.key"} {
		b, err := os.ReadFile(filepath.Join("testdata/pki", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "same_enc.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(filepath.Join(dir, "gmproxy.yaml"), []byte(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.key, enc_cert: same_enc.crt, enc_key: same_enc.key}
    routes: [{respond: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		if w.Path == "sites[0].tlcp.enc_cert" && strings.Contains(w.Message, "same key pair") {
			return
		}
	}
	t.Errorf("one key pair for the sign and enc certificates not warned about; warnings: %v", cfg.Warnings)
}

// TestExpiredChainCA: a CA certificate in a certificate file's chain that
// has expired is warned about at the certificate (clients that build the
// chain through it refuse the certificate); before, only the leaf was
// checked.
func TestExpiredChainCA(t *testing.T) {
	caCert, caKey, signKey, signCert := testPKIFiles(t)
	interKey, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(tmpl, parent *smx509.Certificate, pub any, key any) []byte {
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	inter := &smx509.Certificate{SerialNumber: big.NewInt(0x1234567890), Subject: pkix.Name{CommonName: "expired intermediate"},
		NotBefore: testNow.AddDate(-2, 0, 0), NotAfter: testNow.AddDate(0, -1, 0),
		KeyUsage: smx509.KeyUsageCertSign | smx509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true}
	interPEM := issue(inter, caCert, interKey.Public(), caKey)
	interCert, err := smkey.ParseCertificatesPEM(interPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &smx509.Certificate{SerialNumber: big.NewInt(0x55667788), Subject: signCert.Subject, DNSNames: signCert.DNSNames,
		NotBefore: testNow.AddDate(-1, 0, 0), NotAfter: testNow.AddDate(2, 0, 0), KeyUsage: signCert.KeyUsage, ExtKeyUsage: signCert.ExtKeyUsage}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chain.crt"), append(issue(leaf, interCert[0], signKey.Public(), interKey), interPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/pki/server_sign.key")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server_sign.key"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(filepath.Join(dir, "gmproxy.yaml"), []byte(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tls13sm: {cert: chain.crt, key: server_sign.key}
    routes: [{respond: {}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.Warnings {
		if w.Path == "sites[0].tls13sm.cert" && strings.Contains(w.Message, `"expired intermediate" expired`) {
			return
		}
	}
	t.Errorf("an expired CA certificate in the chain not warned about; warnings: %v", cfg.Warnings)
}

// testPKIFiles loads the test PKI's CA certificate and key, and the
// server's signing key and certificate.
func testPKIFiles(t *testing.T) (caCert *smx509.Certificate, caKey, signKey crypto.Signer, signCert *smx509.Certificate) {
	t.Helper()
	load := func(name string) *smx509.Certificate {
		c, err := smkey.LoadCertificatesFile(filepath.Join("testdata/pki", name))
		if err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	key := func(name string) crypto.Signer {
		k, err := smkey.LoadPrivateKeyFile(filepath.Join("testdata/pki", name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return load("ca.crt"), key("ca.key"), key("server_sign.key"), load("server_sign.crt")
}

// TestPasswordForUnencryptedKey: a password configured for a key file that
// holds its key in the clear is warned about at that key, not at the
// encrypted one beside it (the operator believes the key encrypted at
// rest); in a site and in a key server's keys entry.
func TestPasswordForUnencryptedKey(t *testing.T) {
	site := func(encKey string) []Problem {
		t.Helper()
		cfg, err := Parse("testdata/pki/gmproxy.yaml", []byte(`listeners: [{address: "127.0.0.1:0"}]
sites:
  - tlcp: {sign_cert: server_sign.crt, sign_key: server_sign.enc.key, enc_cert: server_enc.crt, enc_key: `+encKey+`, key_password_file: password.txt}
    routes: [{respond: {}}]
`))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Warnings
	}
	const said = "stored unencrypted: the configured password protects nothing"
	var found []string
	for _, w := range site("server_enc.key") {
		if strings.Contains(w.Message, said) {
			found = append(found, w.String())
		}
	}
	if len(found) != 1 || !strings.Contains(found[0], `sites[0].tlcp.enc_key: private key "server_enc.key"`) {
		t.Errorf("unencrypted enc key with a password: warnings %q, want one at enc_key", found)
	}
	for _, w := range site("server_enc.enc.key") {
		if strings.Contains(w.Message, said) {
			t.Errorf("both keys encrypted: %s", w)
		}
	}

	pki, err := filepath.Abs("testdata/pki")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keyserver.yaml")
	if err := os.WriteFile(path, []byte(`listen: 127.0.0.1:7443
tls: {cert: `+pki+`/server_ecdsa.crt, key: `+pki+`/server_ecdsa.key, client_ca: `+pki+`/ecdsa_ca.crt}
keys:
  - {key: `+pki+`/server_sign.key, cert: `+pki+`/server_sign.crt, key_password_file: `+pki+`/password.txt}
clients:
  - {name: edge, subject: "CN=edge,O=Example", keys: [server_sign]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, probs := CheckKeyServer(path)
	if f == nil || probs.HasErrors() {
		t.Fatalf("key server file refused: %v", probs)
	}
	for _, p := range probs {
		if p.Path == "keys[0].key" && strings.Contains(p.Message, said) {
			return
		}
	}
	t.Errorf("key server: unencrypted key with a password not warned about: %v", probs)
}

// smallRSAKey builds an RSA key of bits bits, which rsa.GenerateKey
// refuses under 1024.
func smallRSAKey(t *testing.T, bits int) *rsa.PrivateKey {
	t.Helper()
	for {
		p, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			t.Fatal(err)
		}
		q, err := rand.Prime(rand.Reader, bits/2)
		if err != nil {
			t.Fatal(err)
		}
		one := big.NewInt(1)
		n := new(big.Int).Mul(p, q)
		phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
		d := new(big.Int).ModInverse(big.NewInt(65537), phi)
		if d == nil || n.BitLen() != bits {
			continue
		}
		k := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: 65537}, D: d, Primes: []*big.Int{p, q}}
		k.Precompute()
		return k
	}
}

// TestTLSCertificateKeyCryptoTLSCannotSign: a tls certificate whose key
// crypto/tls cannot sign handshakes with (RSA under 1024 bits, ECDSA
// P-224) is refused at its cert, with its position; it passed, and every
// TLS handshake of the site then failed ("768-bit keys are insecure",
// "unsupported certificate curve").
func TestTLSCertificateKeyCryptoTLSCannotSign(t *testing.T) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		bad  bool
	}{
		{"rsa768", smallRSAKey(t, 768), true},
		{"p224", p224, true},
		{"p384", p384, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(0x4455), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
				NotBefore: testNow.AddDate(0, -1, 0), NotAfter: testNow.AddDate(1, 0, 0),
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, tc.key.Public(), caKey)
			if err != nil {
				t.Fatal(err)
			}
			keyDER, err := x509.MarshalPKCS8PrivateKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Parse(filepath.Join(dir, "gmproxy.yaml"), []byte(`listeners: [{address: "127.0.0.1:0", protocols: [tls]}]
sites:
  - server_names: [localhost]
    tls: {cert: tls.crt, key: tls.key}
    routes: [{respond: {}}]
`))
			if !tc.bad {
				if err != nil {
					t.Fatalf("a %s tls certificate refused: %v", tc.name, err)
				}
				return
			}
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("a %s tls certificate accepted (err %v): every TLS handshake of the site fails", tc.name, err)
			}
			for _, p := range probs {
				if p.Path == "sites[0].tls.cert" && p.Line == 4 {
					return
				}
			}
			t.Errorf("no problem at sites[0].tls.cert (line 4): %v", probs)
		})
	}
}

// TestTLSCertificateWithoutDigitalSignature: a tls certificate whose
// keyUsage leaves out digitalSignature is refused at its cert: crypto/tls
// signs every handshake with it (RFC 8446 §4.4.2.2, RFC 5246 §7.4.2), and
// curl refused such an ECDSA certificate in TLS 1.2 ("ecc cert not for
// signing") while check passed it. Without a keyUsage extension it passes.
func TestTLSCertificateWithoutDigitalSignature(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ku   x509.KeyUsage
		bad  bool
	}{
		{"keyAgreement only", x509.KeyUsageKeyAgreement, true},
		{"keyEncipherment only", x509.KeyUsageKeyEncipherment, true},
		{"digitalSignature", x509.KeyUsageDigitalSignature, false},
		{"no keyUsage", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(0x4456), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
				NotBefore: testNow.AddDate(0, -1, 0), NotAfter: testNow.AddDate(1, 0, 0),
				KeyUsage: tc.ku, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
			if err != nil {
				t.Fatal(err)
			}
			keyDER, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Parse(filepath.Join(dir, "gmproxy.yaml"), []byte(`listeners: [{address: "127.0.0.1:0", protocols: [tls]}]
sites:
  - server_names: [localhost]
    tls: {cert: tls.crt, key: tls.key}
    routes: [{respond: {}}]
`))
			if !tc.bad {
				if err != nil {
					t.Fatalf("a tls certificate with %s refused: %v", tc.name, err)
				}
				return
			}
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("a tls certificate with %s accepted (err %v)", tc.name, err)
			}
			for _, p := range probs {
				if p.Path == "sites[0].tls.cert" && p.Line == 4 && strings.Contains(p.Message, "digitalSignature") {
					return
				}
			}
			t.Errorf("no problem about digitalSignature at sites[0].tls.cert (line 4): %v", probs)
		})
	}
}

// fillerCAsPEM returns 70 self-signed ECDSA CA certificates in PEM whose
// names take about 1 KiB each: together over the 64 KiB of a
// CertificateRequest's certificate_authorities.
func fillerCAsPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var many []byte
	for i := range 70 {
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: strings.Repeat("x", 1000) + strconv.Itoa(i)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		many = append(many, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return many
}
