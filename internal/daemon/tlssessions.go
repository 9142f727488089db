package daemon

import (
	"crypto/tls"
	"encoding/binary"
	"time"

	"github.com/emmansun/gmsm/sm3"

	"github.com/gmproxy/gmproxy/internal/ticket"
)

// Ordinary TLS sessions (crypto/tls) are sealed with the same ticket keys
// as TLCP and TLS 1.3-SM tickets (ticket.TLS, so that no ticket of one
// protocol opens as another's), not with the keys crypto/tls makes for
// each tls.Config: those would change with every reload (each builds a new
// Config), differ between the workers of one machine and the instances of
// a fleet, and rotate on crypto/tls's own schedule (7 days) rather than
// sessions.ticket_rotation.
//
// A sealed session is
//
//	binding (32) || issued at (u64, Unix seconds) || tls.SessionState bytes
//
// binding is SM3 of the site's name, its certificate and its client-auth
// policy (mode and CAs): the keys are shared by every site, and a session
// resumes only on the site, with the certificate and under the client
// authentication its handshake had (crypto/tls itself checks none of
// them). issued at bounds it by sessions.lifetime, as nginx's
// ssl_session_timeout bounds each ticket. It is when the session's secret
// was made: crypto/tls seals a TLS 1.2 session again in a new ticket on
// every resumption, keeping that time (sessionCreated), and a ticket
// stamped anew each time would keep one master secret resumable for as
// long as its client came back within the lifetime.

// tlsSessionBinding returns the binding of a site's TLS sessions.
func tlsSessionBinding(site string, cert []byte, clientAuth string) [32]byte {
	h := sm3.New()
	for _, part := range [][]byte{[]byte(site), cert, []byte(clientAuth)} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var b [32]byte
	h.Sum(b[:0])
	return b
}

// sealTLSSessions makes tc seal its sessions with keys, bound by binding
// and valid for lifetime after they are issued (now: the clock).
func sealTLSSessions(tc *tls.Config, keys ticket.Source, binding [32]byte, lifetime time.Duration, now func() time.Time) {
	tc.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		state, err := ss.Bytes()
		if err != nil {
			return nil, err
		}
		issued := now()
		if created, ok := sessionCreated(state, cs); ok && created.Before(issued) {
			issued = created
		}
		pt := make([]byte, 0, len(binding)+8+len(state))
		pt = append(pt, binding[:]...)
		pt = binary.BigEndian.AppendUint64(pt, uint64(issued.Unix()))
		pt = append(pt, state...)
		out, err := ticket.Seal(nil, keys, ticket.TLS, pt)
		clear(pt) // the session's secret, in the clear
		clear(state)
		return out, err
	}
	tc.UnwrapSession = func(identity []byte, _ tls.ConnectionState) (*tls.SessionState, error) {
		// (nil, nil) is "not resumable": a full handshake, never a
		// failed one.
		pt, ok, _ := ticket.Open(keys, ticket.TLS, identity)
		if !ok || len(pt) < len(binding)+8 || [32]byte(pt[:32]) != binding {
			return nil, nil
		}
		issued := time.Unix(int64(binary.BigEndian.Uint64(pt[32:40])), 0)
		if age := now().Sub(issued); age < -time.Minute || age > lifetime {
			return nil, nil
		}
		ss, err := tls.ParseSessionState(pt[40:]) // it keeps parts of pt: not cleared
		if err != nil {
			return nil, nil
		}
		return ss, nil
	}
}

// sessionCreated returns when the secret of a session, as ss.Bytes()
// encodes it for connection cs, was made: for a TLS 1.2 session resumed,
// its first full handshake. crypto/tls keeps the time unexported; its
// encoding starts with the version (u16), a type (u8), the cipher suite
// (u16) and that time (u64, Unix seconds). The version and suite must be
// cs's: an encoding that changed gives false (the time of sealing then
// stands in, as before).
func sessionCreated(state []byte, cs tls.ConnectionState) (time.Time, bool) {
	if len(state) < 13 || binary.BigEndian.Uint16(state) != cs.Version || binary.BigEndian.Uint16(state[3:]) != cs.CipherSuite {
		return time.Time{}, false
	}
	return time.Unix(int64(binary.BigEndian.Uint64(state[5:13])), 0), true
}
