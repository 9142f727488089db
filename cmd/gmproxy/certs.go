package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gmproxy/gmproxy/internal/devpki"
)

func init() {
	register("certs", "write a test SM2 PKI (CA, TLCP sign/enc pairs, TLS cert): gmproxy certs -out DIR", certsMain)
}

// certsMain writes a complete test PKI with devpki and prints what it
// wrote and a configuration snippet that uses it.
func certsMain(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseCertsFlags(args, stderr)
	if !ok {
		return code
	}
	written, err := o.write()
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy certs: %v\n", err)
		return 1
	}
	abs, err := filepath.Abs(o.out)
	if err != nil {
		abs = o.out
	}
	fmt.Fprintf(stdout, "Wrote a test PKI for %s, valid %d days (TEST ONLY: the keys are not protected):\n", strings.Join(o.hosts, ", "), o.days)
	describeWritten(stdout, written)
	printCertsSnippet(stdout, &o, abs)
	return 0
}

// certsOptions are gmproxy certs' flags.
type certsOptions struct {
	out, ksHost    string
	hosts          []string
	days           int
	noECDSA, force bool
}

// parseCertsFlags parses and checks certs' arguments; ok is false when
// certs must exit with code.
func parseCertsFlags(args []string, stderr io.Writer) (o certsOptions, code int, ok bool) {
	fset := newFlags("certs", stderr, "usage: gmproxy certs -out DIR [-hosts NAME,IP,...] [-days N] [-no-ecdsa] [-keyserver HOST] [-force]")
	fset.StringVar(&o.out, "out", "", "`folder` to write the PKI into (created if missing)")
	hosts := fset.String("hosts", "localhost,127.0.0.1,::1", "comma-separated DNS names and IP addresses of the server certificates")
	fset.IntVar(&o.days, "days", 825, "validity of every certificate in days")
	fset.BoolVar(&o.noECDSA, "no-ecdsa", false, "leave out the ECDSA CA and server certificate for ordinary TLS")
	fset.BoolVar(&o.force, "force", false, "replace the files of a PKI already in the folder (without it, certs writes nothing when any of them exists)")
	fset.StringVar(&o.ksHost, "keyserver", "", "also write ECDSA certificates for the mutual TLS between gmproxy and gmproxy keyserver, the key server's certificate for `host` (name or IP)")
	if code, ok := parseFlags(fset, args); !ok {
		return o, code, false
	}
	if o.out == "" || fset.NArg() > 0 {
		fset.Usage()
		return o, 2, false
	}
	if o.days < 1 || o.days > 36500 {
		fmt.Fprintln(stderr, "gmproxy certs: -days must be from 1 to 36500")
		return o, 2, false
	}
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.hosts = append(o.hosts, h)
		}
	}
	if len(o.hosts) == 0 {
		fmt.Fprintln(stderr, "gmproxy certs: -hosts is empty")
		return o, 2, false
	}
	for _, h := range append([]string{o.ksHost}, o.hosts...) {
		if h != "" && !validCertHost(h) {
			fmt.Fprintf(stderr, "gmproxy certs: %q is neither a DNS name nor an IP address (write IPv6 addresses without brackets, and names without a scheme or port)\n", h)
			return o, 2, false
		}
	}
	if o.force {
		return o, 0, true
	}
	// Any file certs would write counts, not only the CA: the names are
	// the usual ones, and a folder may hold an operator's own
	// server_sign.key. Lstat, so that a symbolic link counts too.
	for _, name := range o.files() {
		if _, err := os.Lstat(filepath.Join(o.out, name)); err == nil {
			fmt.Fprintf(stderr, "gmproxy certs: %s already holds %s; use -force to replace the files certs writes\n", o.out, name)
			return o, 1, false
		} else if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "gmproxy certs: %v\n", err)
			return o, 1, false
		}
	}
	return o, 0, true
}

// validCertHost reports whether h can be a subjectAltName of a server
// certificate: an IP address, or a DNS name (RFC 1034 labels of letters,
// digits, hyphens and, as names in the wild have them, underscores), with
// a leading "*." for a wildcard. Anything else (a URL, host:port, [::1])
// would become a dNSName no client matches.
func validCertHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// files lists the names of the files certs writes with these options.
func (o *certsOptions) files() []string {
	names := []string{
		devpki.FileCACert, devpki.FileCAKey, devpki.FileServerSignCert, devpki.FileServerSignKey,
		devpki.FileServerEncCert, devpki.FileServerEncKey, devpki.FileClientSignCert, devpki.FileClientSignKey,
		devpki.FileClientEncCert, devpki.FileClientEncKey,
	}
	if !o.noECDSA {
		names = append(names, devpki.FileECDSACACert, devpki.FileECDSACAKey, devpki.FileECDSAServerCert, devpki.FileECDSAServerKey)
	}
	if o.ksHost != "" {
		names = append(names, fileKSCACert, fileKSCAKey, fileKSServerCert, fileKSServerKey, fileKSClientCert, fileKSClientKey)
	}
	return names
}

// write generates the PKI (and the key server's mutual-TLS certificates
// when asked) into o.out and returns the files written.
func (o *certsOptions) write() ([]string, error) {
	validity := time.Duration(o.days) * 24 * time.Hour
	pki, err := devpki.Generate(devpki.Options{Hosts: o.hosts, Validity: validity, SkipECDSA: o.noECDSA})
	if err != nil {
		return nil, err
	}
	written, err := pki.WriteFiles(o.out)
	if err != nil {
		return nil, err
	}
	if o.ksHost != "" {
		ks, err := writeKeyServerMTLS(o.out, []string{o.ksHost}, validity)
		if err != nil {
			return nil, fmt.Errorf("key server certificates: %w", err)
		}
		written = append(written, ks...)
	}
	return written, nil
}

// certDescriptions say what each file certs writes is for.
var certDescriptions = map[string]string{
	devpki.FileCACert:          "SM2 root CA (clients trust this)",
	devpki.FileServerSignCert:  "TLCP server signing cert (digitalSignature); also the TLS 1.3-SM cert",
	devpki.FileServerEncCert:   "TLCP server encryption cert (keyEncipherment, keyAgreement)",
	devpki.FileClientSignCert:  "TLCP client signing cert (client authentication)",
	devpki.FileClientEncCert:   "TLCP client encryption cert (needed for ECDHE suites)",
	devpki.FileECDSACACert:     "ECDSA root CA for ordinary TLS clients",
	devpki.FileECDSAServerCert: "ECDSA P-256 server cert for ordinary TLS",
	fileKSCACert:               "ECDSA CA of the key server's mutual TLS (key_servers[].ca, keyserver tls.client_ca)",
	fileKSServerCert:           "gmproxy keyserver's certificate (keyserver tls.cert)",
	fileKSClientCert:           "gmproxy's client certificate for the key server (key_servers[].cert)",
}

// describeWritten lists the files written with what each is for.
func describeWritten(stdout io.Writer, written []string) {
	for _, w := range written {
		note := certDescriptions[filepath.Base(w)]
		if strings.HasSuffix(w, ".key") {
			note = "private key, PKCS#8, mode 0600"
		}
		fmt.Fprintf(stdout, "  %-40s %s\n", w, note)
	}
}

// printCertsSnippet prints a configuration that serves the PKI in abs
// and a Tongsuo command line that tries it. The host and the paths are
// quoted in both: a wildcard host (*.example.cn) unquoted is a YAML alias,
// and a folder name may hold " #" or ": ", which YAML reads as a comment
// or a mapping.
func printCertsSnippet(stdout io.Writer, o *certsOptions, abs string) {
	p := func(name string) string { return strconv.Quote(filepath.Join(abs, name)) }
	sh := func(name string) string { return shellQuote(filepath.Join(abs, name)) }
	fmt.Fprintf(stdout, `
Configuration snippet (check it with: gmproxy check -c FILE):

listeners:
  - address: 0.0.0.0:443
    protocols: [tlcp, tls13sm%s]
sites:
  - server_names: [%s]
    tlcp:
      sign_cert: %s
      sign_key: %s
      enc_cert: %s
      enc_key: %s
    tls13sm: {}          # reuses the TLCP signing certificate
`, map[bool]string{true: "", false: ", tls"}[o.noECDSA], strconv.Quote(o.hosts[0]), p(devpki.FileServerSignCert), p(devpki.FileServerSignKey), p(devpki.FileServerEncCert), p(devpki.FileServerEncKey))
	if !o.noECDSA {
		fmt.Fprintf(stdout, `    tls:
      cert: %s
      key: %s
`, p(devpki.FileECDSAServerCert), p(devpki.FileECDSAServerKey))
	}
	fmt.Fprintf(stdout, `    client_auth: {mode: none, ca: %s}
    routes:
      - {path_prefix: /, upstream: app}
upstreams:
  - {name: app, targets: [127.0.0.1:8080]}

Try it with Tongsuo: openssl s_client -enable_ntls -ntls -connect %s \
    -CAfile %s -sign_cert %s -sign_key %s -enc_cert %s -enc_key %s
`, p(devpki.FileCACert), shellQuote(net.JoinHostPort(o.hosts[0], "443")), sh(devpki.FileCACert), sh(devpki.FileClientSignCert), sh(devpki.FileClientSignKey), sh(devpki.FileClientEncCert), sh(devpki.FileClientEncKey))
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// characters that need no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
