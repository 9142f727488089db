package tls13sm

import (
	"testing"

	"github.com/gmproxy/gmproxy/internal/sm3state"
)

// pooledStateAfter runs handshake (which must run a server handshake on the
// calling goroutine) and returns the pooled serverHandshakeState that
// handshake used, taken back from serverStates, or nil if the pool did not
// hand it back (another P took it, or the race detector dropped it).
func pooledStateAfter(t *testing.T, handshake func()) *serverHandshakeState {
	t.Helper()
	for try := 0; try < 20; try++ {
		n := 0
		hs := serverStates.Get().(*serverHandshakeState)
		hs.ks.m.Compressor().CountBlocks(&n)
		serverStates.Put(hs)
		handshake()
		if n == 0 {
			continue // the handshake used another state
		}
		hs = serverStates.Get().(*serverHandshakeState)
		// Only the marked state's compressor counts: one block shows
		// that this Get returned it.
		before := n
		hs.ks.m.Compressor().Burn(1)
		hs.ks.m.Compressor().CountBlocks(nil)
		if n == before+1 {
			return hs
		}
		serverStates.Put(hs)
	}
	t.Fatal("the pooled handshake state was not handed back")
	return nil
}

// TestPooledServerStateWiped checks that a server handshake state goes
// back to its pool without the secrets of its handshake: the key
// schedule's HMAC key, the derived secrets, the (EC)DHE shared secret,
// record keys, and the resumption PSK of the ticket it issued.
func TestPooledServerStateWiped(t *testing.T) {
	srvCfg, cliCfg := testConfigs(t)
	hs := pooledStateAfter(t, func() {
		a, b := tcpPair(t)
		srv, cli := Server(a, srvCfg), Client(b, cliCfg)
		defer srv.Close()
		defer cli.Close()
		errc := make(chan error, 1)
		go func() {
			err := cli.Handshake()
			if err == nil {
				// Read the NewSessionTicket (and the server's close).
				_, _ = cli.Read(make([]byte, 1))
			}
			errc <- err
		}()
		if err := srv.Handshake(); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
	defer serverStates.Put(hs)
	if hs.handshakeSecrets != (handshakeSecrets{}) {
		t.Error("pooled state keeps the handshake's secrets (early, handshake, master, traffic, finished keys)")
	}
	var st sm3state.HMACState
	hs.ks.m.SaveState(&st)
	if st != (sm3state.HMACState{}) {
		t.Error("pooled state keeps its key schedule's HMAC key state")
	}
	if hs.ks.t != ([hashSize]byte{}) || hs.ks.fk != (finishedKey{}) {
		t.Error("pooled state keeps key-schedule scratch")
	}
	if hs.sharedKey != nil {
		t.Error("pooled state keeps the (EC)DHE shared secret")
	}
	if hs.scratch != ([2][hashSize]byte{}) {
		t.Error("pooled state keeps the resumption master secret or a binder key")
	}
	if hs.key != ([keyLen]byte{}) || hs.iv != ([ivLen]byte{}) || hs.clientAppIV != ([ivLen]byte{}) {
		t.Error("pooled state keeps record keys or IVs")
	}
	if hs.sessionBuf.secret != (resumptionPSK{}) || hs.ticketPlain != ([maxSessionState]byte{}) {
		t.Error("pooled state keeps a ticket's resumption PSK")
	}
}
