package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
	fset := newFlags("certs", stderr, "usage: gmproxy certs -out DIR [-hosts localhost,127.0.0.1] [-days N] [-no-ecdsa] [-keyserver HOST] [-force]")
	out := fset.String("out", "", "`folder` to write the PKI into (created if missing)")
	hosts := fset.String("hosts", "localhost,127.0.0.1,::1", "comma-separated DNS names and IP addresses of the server certificates")
	days := fset.Int("days", 825, "validity of every certificate in days")
	noECDSA := fset.Bool("no-ecdsa", false, "leave out the ECDSA CA and server certificate for ordinary TLS")
	force := fset.Bool("force", false, "replace a PKI already in the folder")
	ksHost := fset.String("keyserver", "", "also write ECDSA certificates for the mutual TLS between gmproxy and gmproxy keyserver, the key server's certificate for `host` (name or IP)")
	if code, ok := parseFlags(fset, args); !ok {
		return code
	}
	if *out == "" || fset.NArg() > 0 {
		fset.Usage()
		return 2
	}
	if *days < 1 || *days > 36500 {
		fmt.Fprintln(stderr, "gmproxy certs: -days must be from 1 to 36500")
		return 2
	}
	var hostList []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hostList = append(hostList, h)
		}
	}
	if len(hostList) == 0 {
		fmt.Fprintln(stderr, "gmproxy certs: -hosts is empty")
		return 2
	}
	if _, err := os.Stat(filepath.Join(*out, devpki.FileCACert)); err == nil && !*force {
		fmt.Fprintf(stderr, "gmproxy certs: %s already holds a PKI (%s); use -force to replace it\n", *out, devpki.FileCACert)
		return 1
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "gmproxy certs: %v\n", err)
		return 1
	}

	pki, err := devpki.Generate(devpki.Options{
		Hosts:     hostList,
		Validity:  time.Duration(*days) * 24 * time.Hour,
		SkipECDSA: *noECDSA,
	})
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy certs: %v\n", err)
		return 1
	}
	written, err := pki.WriteFiles(*out)
	if err != nil {
		fmt.Fprintf(stderr, "gmproxy certs: %v\n", err)
		return 1
	}
	if *ksHost != "" {
		ks, err := writeKeyServerMTLS(*out, []string{*ksHost}, time.Duration(*days)*24*time.Hour)
		if err != nil {
			fmt.Fprintf(stderr, "gmproxy certs: key server certificates: %v\n", err)
			return 1
		}
		written = append(written, ks...)
	}
	abs, err := filepath.Abs(*out)
	if err != nil {
		abs = *out
	}

	fmt.Fprintf(stdout, "Wrote a test PKI for %s, valid %d days (TEST ONLY: the keys are not protected):\n", strings.Join(hostList, ", "), *days)
	describe := map[string]string{
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
	for _, w := range written {
		note := describe[filepath.Base(w)]
		if strings.HasSuffix(w, ".key") {
			note = "private key, PKCS#8, mode 0600"
		}
		fmt.Fprintf(stdout, "  %-40s %s\n", w, note)
	}
	p := func(name string) string { return filepath.Join(abs, name) }
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
`, map[bool]string{true: "", false: ", tls"}[*noECDSA], hostList[0], p(devpki.FileServerSignCert), p(devpki.FileServerSignKey), p(devpki.FileServerEncCert), p(devpki.FileServerEncKey))
	if !*noECDSA {
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

Try it with Tongsuo: openssl s_client -enable_ntls -ntls -connect %s:443 \
    -CAfile %s -sign_cert %s -sign_key %s -enc_cert %s -enc_key %s
`, p(devpki.FileCACert), hostList[0], p(devpki.FileCACert), p(devpki.FileClientSignCert), p(devpki.FileClientSignKey), p(devpki.FileClientEncCert), p(devpki.FileClientEncKey))
	return 0
}
