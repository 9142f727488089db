package main

import (
	"context"
	"crypto/rand"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/speed"
	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

func init() {
	register("speed", "benchmark SM2/SM3/SM4 and gmproxy's record layers (like openssl speed)", runSpeed)
}

// speedNotes are remarks added by optional rows (e.g. record layers not built).
var speedNotes []string

func runSpeed(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("speed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seconds := fs.Float64("seconds", 3, "seconds per algorithm and buffer size (fractions allowed, e.g. 0.05)")
	multi := fs.Int("multi", 1, "run `N` workers in parallel and report the aggregate rate")
	bytes := fs.Int("bytes", 0, "measure only this buffer size (default 16, 64, 256, 1024, 8192, 16384)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	list := fs.Bool("list", false, "list the algorithms and exit")
	var evp multiFlag
	fs.Var(&evp, "evp", "select an algorithm (repeatable; same as a positional name)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gmproxy speed [flags] [algorithm|group ...]")
		fmt.Fprintln(stderr, "  groups: "+strings.Join(speed.Groups(), ", ")+", all (default: all)")
		fs.PrintDefaults()
	}
	// Flags and names may be interleaved, as with openssl speed.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	names = append(names, evp...)
	if *list {
		for _, a := range speed.Algs() {
			fmt.Fprintf(stdout, "%-22s %-7s %s\n", a.Name, a.Group, a.Desc)
		}
		for _, n := range speedNotes {
			fmt.Fprintf(stdout, "note: %s\n", n)
		}
		return 0
	}
	if *seconds <= 0 || *seconds > 3600 {
		fmt.Fprintln(stderr, "speed: -seconds must be in (0, 3600]")
		return 2
	}
	if *multi < 1 || *multi > 1024 {
		fmt.Fprintln(stderr, "speed: -multi must be in [1, 1024]")
		return 2
	}
	if *bytes < 0 || *bytes > 1<<24 || *bytes%16 != 0 {
		fmt.Fprintln(stderr, "speed: -bytes must be a multiple of 16 up to 16 MiB")
		return 2
	}
	algs, err := speed.Select(names)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	opts := speed.Options{Seconds: *seconds, Multi: *multi}
	if *bytes > 0 {
		opts.Sizes = []int{*bytes}
	}
	var progress func(string, int)
	if !*asJSON {
		progress = func(name string, size int) {
			if size > 0 {
				fmt.Fprintf(stderr, "Doing %s for %.3gs on %d size blocks\n", name, *seconds, size)
			} else {
				fmt.Fprintf(stderr, "Doing %s for %.3gs\n", name, *seconds)
			}
		}
	}
	rep := speed.Run(algs, opts, progress)
	rep.Notes = append(rep.Notes, speedNotes...)
	if *asJSON {
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	} else {
		rep.WriteTable(stdout)
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			return 1
		}
	}
	return 0
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// ---- record-layer rows: the proxy's own TLCP and TLS 1.3-SM connections ----

// recordSizes adds 64 KiB writes (four full records per write, which the
// record layers may encrypt side by side) to the usual sizes.
var recordSizes = append(append([]int(nil), speed.DefaultSizes...), 65536)

func init() {
	speed.Register(
		speed.Alg{Name: "tlcp-sm4-cbc", Group: "record", Sizes: recordSizes, Desc: "TLCP ECC-SM2-SM4-CBC-SM3 application data through tlcp.Conn (net.Pipe, client writes, server reads)", New: newTLCPRecord(tlcp.ECC_SM4_CBC_SM3)},
		speed.Alg{Name: "tlcp-sm4-gcm", Group: "record", Sizes: recordSizes, Desc: "TLCP ECC-SM2-SM4-GCM-SM3 application data through tlcp.Conn", New: newTLCPRecord(tlcp.ECC_SM4_GCM_SM3)},
		speed.Alg{Name: "tls13sm-sm4-gcm", Group: "record", Sizes: recordSizes, Desc: "TLS 1.3-SM TLS_SM4_GCM_SM3 application data through tls13sm.Conn", New: newTLS13SMRecord(tls13sm.TLS_SM4_GCM_SM3)},
		speed.Alg{Name: "tls13sm-sm4-ccm", Group: "record", Sizes: recordSizes, Desc: "TLS 1.3-SM TLS_SM4_CCM_SM3 application data through tls13sm.Conn", New: newTLS13SMRecord(tls13sm.TLS_SM4_CCM_SM3)},
	)
}

// speedPKI is a throwaway SM2 PKI for the record rows: a self-signed signing
// certificate and an encryption certificate issued by it.
var speedPKI = sync.OnceValues(func() (*speedIdentity, error) {
	newCert := func(tmpl, parent *smx509.Certificate, pub, priv any) (*smx509.Certificate, error) {
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
		if err != nil {
			return nil, err
		}
		return smx509.ParseCertificate(der)
	}
	signKey, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	encKey, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &smx509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gmproxy speed"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    smx509.KeyUsageDigitalSignature | smx509.KeyUsageCertSign,
		ExtKeyUsage: []smx509.ExtKeyUsage{smx509.ExtKeyUsageServerAuth}, DNSNames: []string{"localhost"},
		BasicConstraintsValid: true, IsCA: true,
	}
	sign, err := newCert(tmpl, tmpl, &signKey.PublicKey, signKey)
	if err != nil {
		return nil, err
	}
	encTmpl := *tmpl
	encTmpl.SerialNumber = big.NewInt(2)
	encTmpl.IsCA = false
	encTmpl.KeyUsage = smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	enc, err := newCert(&encTmpl, sign, &encKey.PublicKey, signKey)
	if err != nil {
		return nil, err
	}
	return &speedIdentity{
		tlcp: tlcp.Certificate{SignCertificate: [][]byte{sign.Raw}, SignKey: signKey, EncCertificate: enc.Raw, EncKey: encKey},
		tls:  tls13sm.Certificate{Certificate: [][]byte{sign.Raw}, PrivateKey: signKey},
	}, nil
})

type speedIdentity struct {
	tlcp tlcp.Certificate
	tls  tls13sm.Certificate
}

// recordPair handshakes client and server over net.Pipe and starts a server
// reader that discards everything. The step writes size bytes from the client.
func recordPair(size int, client, server net.Conn, handshake func(c, s net.Conn) error) (func() error, func(), error) {
	if err := handshake(client, server); err != nil {
		client.Close()
		server.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			if _, err := server.Read(buf); err != nil {
				return
			}
		}
	}()
	payload := make([]byte, size)
	step := func() error {
		_, err := client.Write(payload)
		return err
	}
	cleanup := func() {
		client.Close()
		server.Close()
		<-done
	}
	return step, cleanup, nil
}

// bothHandshake runs the client and server handshakes of a pair; when one
// side fails, abort closes the pipe so that the other side returns at once.
func bothHandshake(c, s func(context.Context) error, abort func()) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		err := s(ctx)
		if err != nil {
			abort()
		}
		errc <- err
	}()
	cerr := c(ctx)
	if cerr != nil {
		abort()
	}
	serr := <-errc
	if cerr != nil {
		return fmt.Errorf("client handshake: %w", cerr)
	}
	if serr != nil {
		return fmt.Errorf("server handshake: %w", serr)
	}
	return nil
}

func newTLCPRecord(suite uint16) func(int) (func() error, func(), error) {
	return func(size int) (func() error, func(), error) {
		id, err := speedPKI()
		if err != nil {
			return nil, nil, err
		}
		cp, sp := net.Pipe()
		c := tlcp.Client(cp, &tlcp.Config{InsecureSkipVerify: true, CipherSuites: []uint16{suite}})
		s := tlcp.Server(sp, &tlcp.Config{Certificates: []tlcp.Certificate{id.tlcp}, CipherSuites: []uint16{suite}})
		return recordPair(size, c, s, func(net.Conn, net.Conn) error {
			return bothHandshake(c.HandshakeContext, s.HandshakeContext, func() { cp.Close(); sp.Close() })
		})
	}
}

func newTLS13SMRecord(suite uint16) func(int) (func() error, func(), error) {
	return func(size int) (func() error, func(), error) {
		id, err := speedPKI()
		if err != nil {
			return nil, nil, err
		}
		cp, sp := net.Pipe()
		c := tls13sm.Client(cp, &tls13sm.Config{InsecureSkipVerify: true, CipherSuites: []uint16{suite}})
		s := tls13sm.Server(sp, &tls13sm.Config{Certificates: []tls13sm.Certificate{id.tls}, CipherSuites: []uint16{suite}, SessionTicketsDisabled: true})
		return recordPair(size, c, s, func(net.Conn, net.Conn) error {
			return bothHandshake(c.HandshakeContext, s.HandshakeContext, func() { cp.Close(); sp.Close() })
		})
	}
}
