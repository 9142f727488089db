//go:build linux

package tlcp

import (
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redisstore"
	"github.com/gmproxy/gmproxy/internal/sessionstore/redistest"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// BenchmarkResumeSharedStore measures a TLCP session-ID resumption (client
// and server over net.Pipe, ECC_SM4_CBC_SM3) with the daemon's two-level
// cache in its two cases, interleaved in one loop so that both see the
// same machine load:
//
//	local  the session is in the in-process level (no round trip)
//	redis  the in-process level misses, as on an instance that did not
//	       make the session: one GET to a real redis-server on loopback
//	       and the unsealing of the entry
//
// It reports per handshake the latency (local-ns, redis-ns) and this
// process's CPU, client and server (local-cpu-ns, redis-cpu-ns), their
// differences (added-ns, added-cpu-ns), and the redis-server's own CPU
// (redis-server-cpu-ns, from INFO cpu). Skipped without redis-server.
func BenchmarkResumeSharedStore(b *testing.B) {
	srv := redistest.Start(b)
	p := loadPKI(b)
	rs := redisstore.New(redisstore.Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
	defer rs.Close()
	shared := sessionstore.NewShared(rs, time.Second, nil)
	defer shared.Close()
	k, err := ticket.NewKey(make([]byte, 32), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	keys := ticket.Static{k}
	resumer := func(local sessionstore.Local) func() bool {
		scfg := p.serverConfig()
		scfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
		scfg.ClientCAs = nil
		scfg.SessionTicketsDisabled = true
		scfg.SessionStore = sessionstore.NewTiered(local, shared, keys, "bench:tlcp:", time.Hour)
		ccfg := p.clientConfig()
		ccfg.Certificates = nil
		ccfg.CipherSuites = []uint16{ECC_SM4_CBC_SM3}
		ccfg.SessionTicketsDisabled = true
		ccfg.ClientSessionCache = NewLRUClientSessionCache(2)
		return func() bool {
			cc, sc := net.Pipe()
			defer cc.Close()
			defer sc.Close()
			errc := make(chan error, 1)
			go func() { errc <- Server(sc, scfg).Handshake() }()
			cl := Client(cc, ccfg)
			if err := cl.Handshake(); err != nil {
				b.Fatal(err)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			return cl.ConnectionState().DidResume
		}
	}
	cases := []func() bool{resumer(NewLRUSessionStore(1024, time.Hour)), resumer(missingLocal{})}
	for _, hs := range cases {
		hs() // full: makes the session, written to both levels
	}
	var wall, cpu [2]int64
	redis0 := redisCPU(b, srv)
	n := 0
	for b.Loop() {
		for i, hs := range cases {
			t0, c0 := time.Now(), processCPU()
			if !hs() {
				b.Fatal("the handshake did not resume")
			}
			cpu[i] += processCPU() - c0
			wall[i] += int64(time.Since(t0))
		}
		n++
	}
	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(wall[0]), "local-ns")
	b.ReportMetric(per(wall[1]), "redis-ns")
	b.ReportMetric(per(wall[1]-wall[0]), "added-ns")
	b.ReportMetric(per(cpu[0]), "local-cpu-ns")
	b.ReportMetric(per(cpu[1]), "redis-cpu-ns")
	b.ReportMetric(per(cpu[1]-cpu[0]), "added-cpu-ns")
	b.ReportMetric(per(redisCPU(b, srv)-redis0), "redis-server-cpu-ns")
}

// missingLocal is an in-process level that never has the session.
type missingLocal struct{}

func (missingLocal) Get(string) ([]byte, bool)         { return nil, false }
func (missingLocal) Put(string, []byte, time.Duration) {}
func (missingLocal) Delete(string)                     {}

// redisCPU returns the redis-server's user and system CPU time in ns.
func redisCPU(b *testing.B, srv *redistest.Server) int64 {
	info, err := srv.Command("INFO cpu")
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return int64(total * 1e9)
}

// recordingLocal keeps the last state put.
type recordingLocal struct {
	missingLocal
	last []byte
}

func (r *recordingLocal) Put(_ string, state []byte, _ time.Duration) { r.last = state }

// BenchmarkSharedStoreMemory writes 100,000 sealed TLCP sessions (the
// state of a real full handshake under distinct session IDs, as the daemon
// writes them) to a real redis-server and reports its memory per session
// from INFO memory (used_memory before and after), and per 10^6 sessions
// in MiB. Run it once: -bench SharedStoreMemory -benchtime 1x. "server"
// sessions have no client certificate; "mutual" ones keep the client's
// certificate chain (ECDHE with client authentication).
func BenchmarkSharedStoreMemory(b *testing.B) {
	const sessions = 100_000
	p := loadPKI(b)
	for _, c := range []struct {
		name   string
		suite  uint16
		mutual bool
	}{{"server", ECC_SM4_CBC_SM3, false}, {"mutual", ECDHE_SM4_CBC_SM3, true}} {
		b.Run(c.name, func(b *testing.B) {
			srv := redistest.Start(b)
			rs := redisstore.New(redisstore.Options{Addresses: []string{srv.Addr}, Timeout: time.Second})
			defer rs.Close()
			k, err := ticket.NewKey(make([]byte, 32), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			rec := &recordingLocal{}
			shared := sessionstore.NewShared(rs, time.Second, nil)
			defer shared.Close()
			store := sessionstore.NewTiered(rec, shared, ticket.Static{k}, "gmproxy:tlcp:", time.Hour)
			scfg := p.serverConfig()
			scfg.CipherSuites = []uint16{c.suite}
			scfg.SessionTicketsDisabled = true
			scfg.SessionStore = store
			if c.mutual {
				scfg.ClientAuth = RequireAndVerifyClientCert
			}
			ccfg := p.clientConfig()
			ccfg.CipherSuites = []uint16{c.suite}
			ccfg.SessionTicketsDisabled = true
			if !c.mutual {
				ccfg.Certificates = nil
			}
			cc, sc := net.Pipe()
			errc := make(chan error, 1)
			go func() { errc <- Server(sc, scfg).Handshake() }()
			if err := Client(cc, ccfg).Handshake(); err != nil {
				b.Fatal(err)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
			cc.Close()
			sc.Close()
			if rec.last == nil {
				b.Fatal("the handshake stored no session")
			}
			for b.Loop() {
				before := redisUsedMemory(b, srv)
				id := make([]byte, 32)
				for i := range sessions {
					binary.BigEndian.PutUint64(id, uint64(i))
					store.Put(string(id), rec.last, time.Hour)
				}
				if n, _ := srv.Command("DBSIZE"); n != ":"+strconv.Itoa(sessions+1) {
					b.Fatalf("DBSIZE = %s; want %d", n, sessions+1)
				}
				per := float64(redisUsedMemory(b, srv)-before) / sessions
				b.ReportMetric(float64(len(rec.last)), "state-bytes")
				b.ReportMetric(per, "redis-bytes/session")
				b.ReportMetric(per*1e6/(1<<20), "MiB/1e6-sessions")
				srv.Command("FLUSHALL")
			}
		})
	}
}

// redisUsedMemory returns INFO memory's used_memory.
func redisUsedMemory(b *testing.B, srv *redistest.Server) int64 {
	info, err := srv.Command("INFO memory")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("INFO memory has no used_memory")
	return 0
}
