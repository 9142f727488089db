package main

import (
	"context"
	"crypto/rand"
	"crypto/x509/pkix"
	"errors"
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
	fs := newFlags("speed", stderr, "usage: gmproxy speed [flags] [algorithm|group ...]",
		"  groups: "+strings.Join(speed.Groups(), ", ")+", all (default: all)")
	seconds := fs.Float64("seconds", 3, "seconds per algorithm and buffer size (fractions allowed, e.g. 0.05)")
	multi := fs.Int("multi", 1, "run `N` workers in parallel and report the aggregate rate")
	bytes := fs.Int("bytes", 0, "measure only this buffer size (default 16, 64, 256, 1024, 8192, 16384)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	list := fs.Bool("list", false, "list the algorithms and exit")
	var evp multiFlag
	fs.Var(&evp, "evp", "select an `algorithm` (repeatable; same as a positional name)")
	// Flags and names may be interleaved, as with openssl speed.
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	names := append(fs.Args(), evp...)
	if *list {
		for _, a := range speed.Algs() {
			fmt.Fprintf(stdout, "%-22s %-7s %s\n", a.Name, a.Group, a.Desc)
		}
		for _, n := range speedNotes {
			fmt.Fprintf(stdout, "note: %s\n", n)
		}
		return 0
	}
	if !(*seconds > 0 && *seconds <= 3600) { // NaN too: it timed one operation per row and printed "NaNs"
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

// speedPKI is a throwaway SM2 PKI for the record and handshake rows: a
// self-signed CA that is also the server's signing certificate, a server
// encryption certificate, and a client sign/enc pair for ECDHE.
var speedPKI = sync.OnceValues(func() (*speedIdentity, error) {
	newKey := func() (*sm2.PrivateKey, error) { return sm2.GenerateKey(rand.Reader) }
	newCert := func(tmpl, parent *smx509.Certificate, pub, priv any) (*smx509.Certificate, error) {
		der, err := smx509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
		if err != nil {
			return nil, err
		}
		return smx509.ParseCertificate(der)
	}
	var keys [4]*sm2.PrivateKey // server sign, server enc, client sign, client enc
	for i := range keys {
		k, err := newKey()
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	now := time.Now()
	tmpl := func(serial int64, usage smx509.KeyUsage, eku smx509.ExtKeyUsage) *smx509.Certificate {
		return &smx509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "gmproxy speed"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: usage, ExtKeyUsage: []smx509.ExtKeyUsage{eku}, DNSNames: []string{"localhost"},
		}
	}
	caTmpl := tmpl(1, smx509.KeyUsageDigitalSignature|smx509.KeyUsageCertSign, smx509.ExtKeyUsageServerAuth)
	caTmpl.BasicConstraintsValid, caTmpl.IsCA = true, true
	caTmpl.ExtKeyUsage = append(caTmpl.ExtKeyUsage, smx509.ExtKeyUsageClientAuth) // it also issues the client pair
	sign, err := newCert(caTmpl, caTmpl, &keys[0].PublicKey, keys[0])
	if err != nil {
		return nil, err
	}
	encUsage := smx509.KeyUsageKeyEncipherment | smx509.KeyUsageDataEncipherment | smx509.KeyUsageKeyAgreement
	var issued [3]*smx509.Certificate
	for i, t := range []*smx509.Certificate{
		tmpl(2, encUsage, smx509.ExtKeyUsageServerAuth),
		tmpl(3, smx509.KeyUsageDigitalSignature, smx509.ExtKeyUsageClientAuth),
		tmpl(4, encUsage, smx509.ExtKeyUsageClientAuth),
	} {
		if issued[i], err = newCert(t, sign, &keys[i+1].PublicKey, keys[0]); err != nil {
			return nil, err
		}
	}
	pool := smx509.NewCertPool()
	pool.AddCert(sign)
	return &speedIdentity{
		tlcp:       tlcp.Certificate{SignCertificate: [][]byte{sign.Raw}, SignKey: keys[0], EncCertificate: issued[0].Raw, EncKey: keys[1]},
		tlcpClient: tlcp.Certificate{SignCertificate: [][]byte{issued[1].Raw}, SignKey: keys[2], EncCertificate: issued[2].Raw, EncKey: keys[3]},
		tls:        tls13sm.Certificate{Certificate: [][]byte{sign.Raw}, PrivateKey: keys[0]},
		pool:       pool,
	}, nil
})

type speedIdentity struct {
	tlcp, tlcpClient tlcp.Certificate
	tls              tls13sm.Certificate
	pool             *smx509.CertPool // the CA (= server signing certificate)
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
	switch {
	case cerr != nil && serr != nil:
		return fmt.Errorf("client handshake: %w; server handshake: %w", cerr, serr)
	case cerr != nil:
		return fmt.Errorf("client handshake: %w", cerr)
	case serr != nil:
		return fmt.Errorf("server handshake: %w", serr)
	}
	return nil
}

// ---- handshake rows: complete in-memory handshakes, client and server ----

func init() {
	speed.Register(
		speed.Alg{Name: "tlcp-ecc-handshake", Group: "handshake", Ops: true, Desc: "TLCP ECC-SM2-SM4-GCM-SM3 full handshake, client and server in process (net.Pipe)", New: newTLCPHandshake(tlcp.ECC_SM4_GCM_SM3, false)},
		speed.Alg{Name: "tlcp-ecdhe-handshake", Group: "handshake", Ops: true, Desc: "TLCP ECDHE-SM2-SM4-GCM-SM3 full handshake with the mandatory client certificates", New: newTLCPHandshake(tlcp.ECDHE_SM4_GCM_SM3, false)},
		speed.Alg{Name: "tlcp-resumed-handshake", Group: "handshake", Ops: true, Desc: "TLCP session-ID resumption", New: newTLCPHandshake(tlcp.ECC_SM4_GCM_SM3, true)},
		speed.Alg{Name: "tls13sm-handshake", Group: "handshake", Ops: true, Desc: "TLS 1.3-SM TLS_SM4_GCM_SM3 full handshake (curveSM2, sm2sig_sm3)", New: newTLS13SMHandshake(false)},
		speed.Alg{Name: "tls13sm-resumed-handshake", Group: "handshake", Ops: true, Desc: "TLS 1.3-SM PSK (psk_dhe_ke) resumption", New: newTLS13SMHandshake(true)},
	)
}

// pairHandshake runs one handshake over a fresh loopback TCP connection
// (kernel buffers let TLS 1.3 tickets be written before anyone reads). When read is set
// the client reads until the server closes (so that TLS 1.3 tickets sent
// after the handshake reach the client's cache).
func pairHandshake(ln net.Listener, client func(net.Conn) (net.Conn, func(context.Context) error), server func(net.Conn) (net.Conn, func(context.Context) error), read bool) error {
	cp, sp, err := tcpPair(ln)
	if err != nil {
		return err
	}
	defer func() { cp.Close(); sp.Close() }()
	c, chs := client(cp)
	s, shs := server(sp)
	if err := bothHandshake(chs, shs, func() { cp.Close(); sp.Close() }); err != nil {
		return err
	}
	if read {
		if _, err := s.Write([]byte{0}); err != nil {
			return err
		}
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return fmt.Errorf("reading after the handshake: %w", err)
		}
	}
	return nil
}

// tcpPair connects a new loopback TCP connection to ln and accepts it.
func tcpPair(ln net.Listener) (client, server net.Conn, err error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		// Nothing will arrive to accept (a dial fails when the process
		// is out of descriptors or ports): end the Accept, which would
		// otherwise wait for ever, or take the next pair's connection.
		if d, ok := ln.(interface{ SetDeadline(time.Time) error }); ok {
			d.SetDeadline(time.Now())
			defer d.SetDeadline(time.Time{})
		}
	}
	r := <-ch
	if err != nil || r.err != nil {
		if client != nil {
			client.Close()
		}
		if r.c != nil {
			r.c.Close()
		}
		return nil, nil, errors.Join(err, r.err)
	}
	return client, r.c, nil
}

func newTLCPHandshake(suite uint16, resume bool) func(int) (func() error, func(), error) {
	return func(int) (func() error, func(), error) {
		id, err := speedPKI()
		if err != nil {
			return nil, nil, err
		}
		ccfg := &tlcp.Config{InsecureSkipVerify: true, CipherSuites: []uint16{suite}, Certificates: []tlcp.Certificate{id.tlcpClient}}
		scfg := &tlcp.Config{Certificates: []tlcp.Certificate{id.tlcp}, CipherSuites: []uint16{suite}, ClientCAs: id.pool}
		if resume {
			ccfg.ClientSessionCache = tlcp.NewLRUClientSessionCache(4)
		} else {
			scfg.SessionCacheDisabled, scfg.SessionTicketsDisabled = true, true
		}
		var last *tlcp.Conn
		client := func(c net.Conn) (net.Conn, func(context.Context) error) {
			last = tlcp.Client(c, ccfg)
			return last, last.HandshakeContext
		}
		server := func(c net.Conn) (net.Conn, func(context.Context) error) {
			tc := tlcp.Server(c, scfg)
			return tc, tc.HandshakeContext
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		cleanup := func() { ln.Close() }
		if resume { // prime the session cache
			if err := pairHandshake(ln, client, server, false); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
		return func() error {
			if err := pairHandshake(ln, client, server, false); err != nil {
				return err
			}
			if last.ConnectionState().DidResume != resume {
				return fmt.Errorf("resumed = %v, want %v", !resume, resume)
			}
			return nil
		}, cleanup, nil
	}
}

func newTLS13SMHandshake(resume bool) func(int) (func() error, func(), error) {
	return func(int) (func() error, func(), error) {
		id, err := speedPKI()
		if err != nil {
			return nil, nil, err
		}
		ccfg := &tls13sm.Config{InsecureSkipVerify: true}
		scfg := &tls13sm.Config{Certificates: []tls13sm.Certificate{id.tls}}
		if resume {
			ccfg.ClientSessionCache = tls13sm.NewLRUClientSessionCache(4)
		} else {
			scfg.SessionTicketsDisabled = true
		}
		var last *tls13sm.Conn
		client := func(c net.Conn) (net.Conn, func(context.Context) error) {
			last = tls13sm.Client(c, ccfg)
			return last, last.HandshakeContext
		}
		server := func(c net.Conn) (net.Conn, func(context.Context) error) {
			tc := tls13sm.Server(c, scfg)
			return tc, tc.HandshakeContext
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		cleanup := func() { ln.Close() }
		if resume {
			if err := pairHandshake(ln, client, server, true); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
		// With resumption every handshake reads, so that the next ticket arrives.
		return func() error {
			if err := pairHandshake(ln, client, server, resume); err != nil {
				return err
			}
			if last.ConnectionState().DidResume != resume {
				return fmt.Errorf("resumed = %v, want %v", !resume, resume)
			}
			return nil
		}, cleanup, nil
	}
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
