package conf

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/gmproxy/gmproxy/internal/sessionstore"
	"github.com/gmproxy/gmproxy/internal/ticket"
)

// The shared session store and fleet ticket keys (sessions.store,
// sessions.ticket_keys).

// validateSessionStore checks sessions.store and sessions.ticket_keys and
// loads their files.
func (v *validator) validateSessionStore() {
	s := &v.cfg.Sessions
	if st := s.Store; st != nil {
		v.oneOf("sessions.store.type", st.Type, sessionstore.Types...)
		if len(st.Addresses) == 0 {
			v.errf("sessions.store.addresses", "add addresses: [redis.example:6379] (the server, the Sentinels or some Cluster nodes)", "the store has no address")
		}
		for i, a := range st.Addresses {
			v.hostPort(fmt.Sprintf("sessions.store.addresses[%d]", i), a, false)
		}
		if st.Cluster && st.MasterName != "" {
			v.errf("sessions.store.cluster", "remove cluster (Sentinel watches one master) or master_name (a Cluster has no Sentinel)", "cluster and master_name are both set")
		}
		if st.Timeout <= 0 {
			v.errf("sessions.store.timeout", "write a duration such as 5ms", "timeout must be positive")
		}
		if st.PoolSize < 0 {
			v.errf("sessions.store.pool_size", "use 0 for the default, or for example 16", "pool_size must not be negative")
		}
		if st.KeyPrefix == "" {
			v.errf("sessions.store.key_prefix", "write a prefix such as gmproxy: (it keeps gmproxy's keys apart from other users of the store)", "key_prefix is empty")
		} else if len(st.KeyPrefix) > MaxKeyPrefix {
			v.errf("sessions.store.key_prefix", "write a shorter prefix such as gmproxy:", "key_prefix is %d bytes long, over %d", len(st.KeyPrefix), MaxKeyPrefix)
		}
		if st.PasswordFile != "" {
			b, err := readNamed(v.resolve(st.PasswordFile), maxNamedFile)
			if err != nil {
				v.errf("sessions.store.password_file", relFix, "cannot read password file %q: %s", st.PasswordFile, errText(err))
			} else {
				v.secretMode("sessions.store.password_file", st.PasswordFile, "password file")
				st.Password = strings.TrimRight(string(b), "\r\n")
				if st.Password == "" {
					v.errf("sessions.store.password_file", "write the store's password in it, or remove password_file if the store takes no AUTH",
						"password file %q is empty", st.PasswordFile)
				}
			}
		} else if st.Username != "" {
			// Redis's AUTH takes a user with its password; without one
			// nothing is sent, and the connection is the default user's.
			v.errf("sessions.store.username", "add password_file: FILE, the password of the Redis user",
				"username without password_file: the store's AUTH needs a password")
		}
		v.sentinelAuth(st)
		if st.TLS != nil {
			v.storeTLS(st.TLS)
		} else {
			// A public address over plain TCP (private and loopback
			// ones are taken for a link the operator controls).
			for i, a := range st.Addresses {
				host, _, _ := net.SplitHostPort(a)
				if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() && !ip.IsPrivate() && !ip.IsLinkLocalUnicast() {
					v.warnf(fmt.Sprintf("sessions.store.addresses[%d]", i), "add sessions.store.tls (Redis 6 and later speak TLS), or reach the store over a private link",
						"the store at %s, a public address, is reached over plain TCP: the password, sealed sessions and ticket keys cross the network in clear, and anyone on the path can answer in the store's place", a)
					break
				}
			}
		}
		if s.TicketKeys == nil && s.TicketKeyFile == "" {
			v.errf("sessions.store", "add sessions.ticket_keys: {store: redis, wrap_key_file: FILE}, or a sessions.ticket_key_file copied to every instance",
				"the store needs ticket keys shared by the fleet: it seals sessions with them, and each instance's random keys open only its own")
		}
		if s.CacheSize == 0 {
			v.warnf("sessions.store", "set cache_size (the in-process level in front of the store) to resume session IDs", "session IDs are off (cache_size: 0): the store holds only ticket keys")
		}
	}
	tk := s.TicketKeys
	if tk == nil {
		return
	}
	if v.oneOf("sessions.ticket_keys.store", tk.Store, sessionstore.Types...) {
		switch {
		case s.Store == nil:
			v.errf("sessions.ticket_keys.store", "add a sessions.store section of type "+tk.Store, "ticket keys through the store need sessions.store")
		case s.Store.Type != tk.Store:
			v.errf("sessions.ticket_keys.store", "write store: "+s.Store.Type, "sessions.store is of type %s, not %s", s.Store.Type, tk.Store)
		}
	}
	if s.TicketKeyFile != "" {
		v.errf("sessions.ticket_keys", "keep only one of them: ticket_keys (keys agreed on through the store) or ticket_key_file (keys copied to every instance)", "both ticket_keys and ticket_key_file are set")
	}
	if tk.WrapKeyFile == "" {
		v.errf("sessions.ticket_keys.wrap_key_file", "create one with: head -c 32 /dev/urandom > wrap.key, give every instance the same file",
			"wrap_key_file is required: it seals the ticket keys in the store")
		return
	}
	b, err := readNamed(v.resolve(tk.WrapKeyFile), maxNamedFile)
	if err != nil {
		v.errf("sessions.ticket_keys.wrap_key_file", relFix, "cannot read wrap key file %q: %s", tk.WrapKeyFile, errText(err))
		return
	}
	v.secretMode("sessions.ticket_keys.wrap_key_file", tk.WrapKeyFile, "wrap key file")
	keys, err := ticket.ParseKeyFile(b, v.now)
	clear(b)
	if err != nil {
		v.errf("sessions.ticket_keys.wrap_key_file", "create one with: head -c 32 /dev/urandom > wrap.key", "%s", err)
		return
	}
	tk.WrapKeys = keys
}

// storeTLS loads the files of sessions.store.tls.
func (v *validator) storeTLS(t *StoreTLS) {
	const p = "sessions.store.tls"
	c := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		b, err := readNamed(v.resolve(t.CA), maxNamedFile)
		if err != nil {
			v.errf(p+".ca", relFix, "cannot read CA file %q: %s", t.CA, errText(err))
		} else if pool, n := x509Pool(b); n == 0 {
			v.errf(p+".ca", "the file must hold PEM RSA or ECDSA CA certificates", "no usable CA certificate in %q", t.CA)
		} else {
			c.RootCAs = pool
		}
	}
	switch {
	case t.Cert != "" && t.Key != "":
		if kp := v.pair(p, "cert", "key", t.Cert, t.Key, KeyPassword{}); kp != nil {
			if isSM2(kp) {
				v.errf(p+".cert", "use an RSA or ECDSA client certificate (the store's TLS is ordinary TLS)", "the client certificate has an SM2 key")
			} else {
				tc := kp.TLSCertificate()
				c.Certificates = []tls.Certificate{tc}
			}
		}
	case t.Cert != "":
		v.errf(p+".key", "add key: FILE, the private key of cert", "cert without key")
	case t.Key != "":
		v.errf(p+".cert", "add cert: FILE, the certificate of key", "key without cert")
	}
	t.Config = c
}

// sentinelAuth checks sentinel_username and sentinel_password_file (the
// Sentinels' own AUTH) and reads the password.
func (v *validator) sentinelAuth(st *SessionStore) {
	const p = "sessions.store."
	if st.MasterName == "" {
		for _, f := range []struct{ key, val string }{{"sentinel_username", st.SentinelUsername}, {"sentinel_password_file", st.SentinelPasswordFile}} {
			if f.val != "" {
				v.errf(p+f.key, "add master_name: NAME (the master the Sentinels at addresses watch), or remove "+f.key,
					"%s is for Sentinels, and master_name is not set", f.key)
			}
		}
		return
	}
	if st.SentinelPasswordFile == "" {
		if st.SentinelUsername != "" {
			v.errf(p+"sentinel_username", "add sentinel_password_file: FILE, the password of the Sentinel user",
				"sentinel_username without sentinel_password_file: the Sentinels' AUTH needs a password")
		}
		return
	}
	b, err := readNamed(v.resolve(st.SentinelPasswordFile), maxNamedFile)
	if err != nil {
		v.errf(p+"sentinel_password_file", relFix, "cannot read password file %q: %s", st.SentinelPasswordFile, errText(err))
		return
	}
	v.secretMode(p+"sentinel_password_file", st.SentinelPasswordFile, "password file")
	st.SentinelPassword = strings.TrimRight(string(b), "\r\n")
	if st.SentinelPassword == "" {
		v.errf(p+"sentinel_password_file", "write the Sentinels' password in it, or remove sentinel_password_file if they take no AUTH",
			"password file %q is empty", st.SentinelPasswordFile)
	}
}
