package conf

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/internal/dialable"
	"github.com/gmproxy/gmproxy/internal/smkey"
	"github.com/gmproxy/gmproxy/keyserver"
)

// Key servers: the key_servers section and the site keys that name one.

// unixPrefix marks a Unix socket address (key_servers[].address,
// gmproxy keyserver's listen).
const unixPrefix = "unix:"

// isSM2Public reports whether pub is an SM2 public key.
func isSM2Public(pub crypto.PublicKey) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && k.Curve == sm2.P256()
}

// validateKeyServers checks key_servers and loads their mutual-TLS files.
func (v *validator) validateKeyServers() {
	v.keyServers, v.keyServerNames, v.keyServerUsed = map[string]*KeyServer{}, map[string]bool{}, map[string]bool{}
	seen := map[string]string{}
	for i := range v.cfg.KeyServers {
		k := &v.cfg.KeyServers[i]
		p := fmt.Sprintf("key_servers[%d]", i)
		ok := v.uniqueName(p, k.Name, "key server", "add name: NAME and refer to it with sign_key_server, enc_key_server or key_server", seen)
		if ok {
			v.keyServerNames[k.Name] = true
		}
		if k.ConnectTimeout <= 0 {
			v.errf(p+".connect_timeout", "write a duration such as 2s", "connect_timeout must be positive")
			ok = false
		}
		if k.Timeout <= 0 {
			v.errf(p+".timeout", "write a duration such as 3s", "timeout must be positive")
			ok = false
		}
		if k.PoolSize < 1 {
			v.errf(p+".pool_size", "use 1 or more, for example 2 (each connection carries many operations at once)", "pool_size must be at least 1")
			ok = false
		} else if k.PoolSize > MaxKeyServerPoolSize {
			v.errf(p+".pool_size", "use for example 2: each connection carries many operations at once", "pool_size %d is over %d, the connections a key server takes from one client by default (its clients' max_connections)", k.PoolSize, MaxKeyServerPoolSize)
			ok = false
		}
		if k.HealthCheckInterval <= 0 {
			v.errf(p+".health_check_interval", "write a duration such as 2s", "health_check_interval must be positive")
			ok = false
		}
		if k.MaxInFlight < 0 {
			v.errf(p+".max_in_flight", "use 0 for unlimited, or for example 64", "max_in_flight must not be negative")
			ok = false
		}
		if !v.keyServerAddresses(k, p) {
			ok = false
		}
		if ok {
			v.keyServers[k.Name] = k
		}
	}
}

// uniqueName checks the name of the list entry at p, a what: set, and not
// used by an earlier entry (seen maps names to entry paths).
func (v *validator) uniqueName(p, name, what, addFix string, seen map[string]string) bool {
	switch {
	case name == "":
		v.errf(p+".name", addFix, "%s has no name", what)
		return false
	case seen[name] != "":
		v.errf(p+".name", "give every "+what+" a distinct name", "duplicate %s name %q (also %s)", what, name, seen[name])
		return false
	case !v.unreservedName(p+".name", name, what):
		return false
	}
	seen[name] = p
	return true
}

// reservedLabel says why name may not name what the metrics label (a
// site, route, upstream, key server, or a key or client of gmproxy
// keyserver), "" when it may: "other" and "none" are label values of the
// metrics' own (metrics.Other, metrics.None), whose series a name of
// either would join, its own told apart from them by nothing.
func reservedLabel(name string) string {
	switch name {
	case "other":
		return `is the label value "other" the metrics give every name they cannot show (past a label's cap, too long, with control characters): its series would mix with theirs`
	case "none":
		return `is the label value "none" the metrics give an empty value: its series would mix with those`
	}
	return ""
}

// unreservedName refuses name at p, the name of a what, when the metrics
// reserve it (reservedLabel), and reports whether it is not reserved.
func (v *validator) unreservedName(p, name, what string) bool {
	if why := reservedLabel(name); why != "" {
		v.errf(p, "give the "+what+" another name (other and none are the metrics' own label values)", "%s name %q %s", what, name, why)
		return false
	}
	return true
}

// keyServerAddresses checks the addresses (or address) of a key server
// and loads the mutual-TLS files when one of them is host:port.
func (v *validator) keyServerAddresses(k *KeyServer, p string) bool {
	m := &k.Material
	addrs, key := k.Addresses, p+".addresses"
	switch {
	case k.Address != "" && len(addrs) > 0:
		v.errf(p+".address", "keep only addresses (address is the same as addresses with one entry)", "both address and addresses are set")
		return false
	case k.Address != "":
		addrs = []string{k.Address}
	case len(addrs) == 0:
		v.errf(p+".addresses", "add addresses: [host:port] (mutual TLS; several for failover) or address: unix:/path/to/socket", "key server has no address")
		return false
	}
	ok, tcp, seen := true, false, map[string]bool{}
	for i, a := range addrs {
		ap := fmt.Sprintf("%s[%d]", key, i)
		if k.Address != "" {
			ap = p + ".address"
		}
		if seen[a] {
			v.errf(ap, "remove the repetition", "address %q is listed twice", a)
			ok = false
			continue
		}
		seen[a] = true
		switch {
		case strings.HasPrefix(a, unixPrefix):
			e := KeyServerEndpoint{Network: "unix", Addr: strings.TrimPrefix(a, unixPrefix)}
			if e.Addr == "" {
				v.errf(ap, "write unix:/path/to/socket", "unix: address without a path")
				ok = false
				continue
			}
			m.Endpoints = append(m.Endpoints, e)
		case v.hostPort(ap, a, false):
			// Without server_name, the address's host, its zone left out
			// (fe80::1%eth0 names a local interface, not the key server):
			// the name the upstreams' dialers verify by the same rule.
			e := KeyServerEndpoint{Network: "tcp", Addr: a, ServerName: dialable.ServerName(k.ServerName, a)}
			m.Endpoints = append(m.Endpoints, e)
			tcp = true
		default:
			ok = false
		}
	}
	if !tcp {
		for _, f := range []struct{ key, val string }{{"cert", k.Cert}, {"key", k.Key}, {"ca", k.CA}, {"server_name", k.ServerName}} {
			if f.val != "" && ok {
				v.warnf(p+"."+f.key, "remove it, or use a host:port address for mutual TLS", "%s is ignored for a Unix socket (no TLS)", f.key)
			}
		}
		return ok
	}
	return v.keyServerTLS(k, p) && ok
}

// keyServerTLS loads a TCP key server's client certificate and CA.
func (v *validator) keyServerTLS(k *KeyServer, p string) bool {
	m := &k.Material
	ok := true
	for _, f := range []struct{ key, val, fix string }{
		{"cert", k.Cert, "add cert: FILE, gmproxy's client certificate (RSA or ECDSA) that the key server trusts"},
		{"key", k.Key, "add key: FILE, the private key of cert"},
		{"ca", k.CA, "add ca: FILE with the CA certificates that issued the key server's certificate"},
	} {
		if f.val == "" {
			v.errf(p+"."+f.key, f.fix, "%s is required for a key server reached over TCP (mutual TLS)", f.key)
			ok = false
		}
	}
	if k.CA != "" {
		b, err := readNamed(v.resolve(k.CA), maxNamedFile)
		if err != nil {
			v.errf(p+".ca", relFix, "cannot read CA file %q: %s", k.CA, errText(err))
			ok = false
		} else if pool, n := x509Pool(b); n == 0 {
			v.errf(p+".ca", "the file must hold PEM RSA or ECDSA CA certificates (the key server's TLS is ordinary TLS)", "no usable CA certificate in %q", k.CA)
			ok = false
		} else {
			m.RootCAs = pool
		}
	}
	if k.Cert == "" || k.Key == "" {
		if k.Cert != "" {
			v.certs(p+".cert", k.Cert) // report a missing or broken file too
		}
		return false
	}
	kp := v.pair(p, "cert", "key", k.Cert, k.Key, k.KeyPassword)
	if kp == nil {
		return false
	}
	if isSM2(kp) {
		v.errf(p+".cert", "use an RSA or ECDSA client certificate (the key server's TLS is ordinary TLS)", "the client certificate has an SM2 key")
		return false
	}
	v.validity(kp, p+".cert")
	v.eku(kp, p+".cert", "the key server client certificate", smx509.ExtKeyUsageClientAuth)
	tc := kp.TLSCertificate()
	m.ClientCert = &tc
	return ok
}

// x509Pool parses the PEM certificates of b that crypto/x509 can use.
func x509Pool(b []byte) (*x509.CertPool, int) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return pool, n
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil || c.PublicKeyAlgorithm == x509.UnknownPublicKeyAlgorithm {
			continue
		}
		pool.AddCert(c)
		n++
	}
}

// keyServersUsed warns about key servers no site uses.
func (v *validator) keyServersUsed() {
	for i, k := range v.cfg.KeyServers {
		if k.Name != "" && !v.keyServerUsed[k.Name] {
			v.warnf(fmt.Sprintf("key_servers[%d]", i), "name it in a site's sign_key_server, enc_key_server or key_server, or remove it", "key server %q is not used by any site", k.Name)
		}
	}
}

// pairFrom is pairAt for site keys that may live on a key server: with
// server set, the certificate is loaded and the key is a RemoteKeyRef to
// that key server (keyFile must then be empty).
func (v *validator) pairFrom(p, certKey, keyKey, certFile, keyFile, server string, pw KeyPassword, certIdx, keyIdx int) *KeyPair {
	if server == "" {
		return v.pairAt(p, certKey, keyKey, certFile, keyFile, pw, certIdx, keyIdx)
	}
	serverKey := keyKey + "_server"
	ok := true
	if keyFile != "" {
		v.errf(p+"."+serverKey, fmt.Sprintf("keep only one of them: %s (a key file on this host) or %s (a key held by a key server)", keyKey, serverKey), "both %s and %s are set", keyKey, serverKey)
		ok = false
	}
	if !v.keyServerNames[server] {
		names := mapKeys(v.keyServerNames)
		fix := "add it to key_servers, or use one of: " + strings.Join(names, ", ")
		if len(names) == 0 {
			fix = "add a key_servers section with an entry named " + server
		} else if c := closest(server, names); c != "" {
			fix = fmt.Sprintf("did you mean %q?", c)
		}
		v.errf(p+"."+serverKey, fix, "unknown key server %q", server)
		ok = false
	} else {
		v.keyServerUsed[server] = true
		if v.keyServers[server] == nil {
			ok = false // reported at key_servers
		}
	}
	if certFile == "" {
		v.errf(p+"."+certKey, "add "+certKey+": FILE (the key server finds the key by the certificate's public key)", "%s is required", certKey)
		return nil
	}
	certs := v.certs(p+"."+certKey, certFile)
	if certs == nil || !ok {
		return nil
	}
	if certs = v.pairCert(p+"."+certKey, certFile, certs, certIdx); certs == nil {
		return nil
	}
	pub := certs[0].PublicKey
	if !isSM2Public(pub) {
		v.errf(p+"."+certKey, "a key server holds SM2 keys only; keep this key in a key file", "the certificate's key is %s, not SM2", keyType(&KeyPair{Key: &RemoteKeyRef{PublicKey: pub}}))
		return nil
	}
	return &KeyPair{Chain: certs, Key: &RemoteKeyRef{KeyServer: server, PublicKey: pub}, CertFile: v.resolve(certFile), KeyServer: server}
}

// KeyName is the name of the key k serves in clients[].keys, the audit
// log and the metrics: Name, or else the key file's name without folder
// and extension.
func (k *ServedKey) KeyName() string {
	if k.Name != "" {
		return k.Name
	}
	return strings.TrimSuffix(filepath.Base(k.Key), filepath.Ext(k.Key))
}

// servedKeys loads the keys served by gmproxy keyserver, with their
// names and roles; see KeyServerFile. It returns every key name, also of
// keys with errors (so that clients naming them get no second error).
func (v *validator) servedKeys(f *KeyServerFile) map[string]bool {
	if len(f.Keys) == 0 {
		v.errf("keys", "add for example:\n  keys:\n    - {key: portal_sign.key, cert: portal_sign.crt}", "no keys configured")
	}
	seen, names, known := map[string]string{}, map[string]string{}, map[string]bool{}
	for i := range f.Keys {
		k := &f.Keys[i]
		p := fmt.Sprintf("keys[%d]", i)
		if k.Key == "" {
			v.errf(p+".key", "add key: FILE (an SM2 private key)", "key is required")
			continue
		}
		keys := v.servedKeyFile(k, p)
		if len(keys) > 1 {
			// The roles (from cert or roles) would be every key's: a
			// signing key beside an encryption key would decrypt.
			v.errf(p+".key", "put each key in its own file, in its own keys[] entry with its cert or roles", "key file %q holds %d keys; a keys[] entry serves one key, with the roles given for it", k.Key, len(keys))
			keys = nil
		}
		if keys == nil {
			if k.Name != "" {
				known[k.Name] = true
			}
			continue
		}
		var cert *smx509.Certificate
		if k.Cert != "" {
			if certs := v.certs(p+".cert", k.Cert); len(certs) > 0 {
				cert = certs[0]
				match := false
				for _, key := range keys {
					match = match || smkey.PublicKeysEqual(key, cert.PublicKey)
				}
				if !match {
					v.errf(p+".key", fmt.Sprintf("use the private key that belongs to %s", k.Cert), "private key %q does not match certificate %q (%s)", k.Key, k.Cert, cert.Subject.CommonName)
				}
			}
		}
		roles, ok := v.keyRoles(k, p, cert)
		base := k.KeyName()
		// "other" and "none" are label values of the metrics' own.
		why := reservedLabel(base)
		if base == keyserver.UnknownKey {
			// The audit log and the metrics name every request for a
			// key ID the server does not hold so: the key's operations
			// would mix with them.
			why = "is the name the audit log and the metrics give every request for a key the server does not hold"
		}
		if why != "" {
			at, fix := p+".name", "give the key another name (and use it in clients[].keys)"
			if k.Name == "" {
				at, fix = p+".key", "add name: NAME with another name (and use it in clients[].keys), or rename the file"
			}
			v.errf(at, fix, "key name %q %s", base, why)
			known[base] = true
			continue
		}
		for _, sk := range keys {
			id := string(sk.PublicKey.X.Bytes()) + "|" + string(sk.PublicKey.Y.Bytes())
			if prev, dup := seen[id]; dup {
				v.warnf(p+".key", "remove the repetition", "the key of %q is already served (%s)", k.Key, prev)
				continue
			}
			seen[id] = p
			name := base
			if prev, dup := names[name]; dup {
				v.errf(p+".name", "give every key a distinct name: name: NAME", "key name %q is also used by %s", name, prev)
				continue
			}
			names[name] = p
			known[name] = true
			if !ok {
				continue
			}
			f.Material.Keys = append(f.Material.Keys, ServedKeyMaterial{Key: sk, File: v.resolve(k.Key), Name: name})
			f.Material.Policy.Keys = append(f.Material.Policy.Keys, keyserver.Key{Name: name, Private: sk, Roles: roles})
		}
	}
	return known
}

// servedKeyFile reads the SM2 keys of one keys[] entry.
func (v *validator) servedKeyFile(k *ServedKey, p string) []*sm2.PrivateKey {
	pw, ok := v.password(k.KeyPassword, p)
	if !ok {
		return nil
	}
	defer clear(pw)
	b, err := readNamed(v.resolve(k.Key), maxNamedFile)
	if err != nil {
		v.errf(p+".key", relFix, "cannot read private key file %q: %s", k.Key, errText(err))
		return nil
	}
	defer clear(b)
	v.secretMode(p+".key", k.Key, "private key file")
	v.passwordUnused(p+".key", k.Key, b, pw, "entry")
	keys, err := smkey.ParseAllPrivateKeysPEM(b, pw)
	switch {
	case errors.Is(err, smkey.ErrNeedPassword):
		v.errf(p+".key", "set key_password_file or key_password_env in this entry", "private key %q is encrypted and no password is configured", k.Key)
		return nil
	case err != nil:
		v.errf(p+".key", "the file must be PEM PKCS#8, SEC 1 or encrypted PKCS#8 SM2 keys", "cannot read private key %q: %s", k.Key, err)
		return nil
	}
	var out []*sm2.PrivateKey
	for j, key := range keys {
		sk, ok := key.(*sm2.PrivateKey)
		if !ok {
			v.errf(p+".key", "a key server holds SM2 keys only", "key %d of %q is not an SM2 key", j+1, k.Key)
			return nil
		}
		out = append(out, sk)
	}
	return out
}

// keyRoles returns the roles of a keys[] entry: roles as written, else
// from the key usage of its certificate.
func (v *validator) keyRoles(k *ServedKey, p string, cert *smx509.Certificate) (keyserver.Role, bool) {
	var roles keyserver.Role
	for i, n := range k.Roles {
		r, ok := keyserver.ParseRole(n)
		if !ok {
			v.errf(fmt.Sprintf("%s.roles[%d]", p, i), "use "+strings.Join(keyserver.RoleNames, ", "), "unknown role %q", n)
			return 0, false
		}
		roles |= r
	}
	if len(k.Roles) > 0 {
		if roles&keyserver.RoleSign != 0 && roles&^keyserver.RoleSign != 0 {
			v.warnf(p+".roles", "serve the signing and the encryption key as separate keys, each with its own roles", "a key that signs and also decrypts or agrees keys lets a client use one for the other")
		}
		return roles, true
	}
	if cert == nil {
		v.errf(p+".roles", "add roles: [sign] for a signing key or roles: [decrypt, key_agreement] for a TLCP encryption key (or cert: FILE to take them from its key usage)", "the key has no roles")
		return 0, false
	}
	ku := cert.KeyUsage
	if ku&smx509.KeyUsageDigitalSignature != 0 {
		roles |= keyserver.RoleSign
	}
	if ku&(smx509.KeyUsageKeyEncipherment|smx509.KeyUsageDataEncipherment) != 0 {
		roles |= keyserver.RoleDecrypt
	}
	if ku&smx509.KeyUsageKeyAgreement != 0 {
		roles |= keyserver.RoleKeyAgreement
	}
	if roles == 0 {
		v.errf(p+".roles", "add roles: [sign] or roles: [decrypt, key_agreement]", "the certificate %q has no key usage to take the roles from", k.Cert)
		return 0, false
	}
	if roles&keyserver.RoleSign != 0 && roles&^keyserver.RoleSign != 0 {
		// The same dual use as roles written out: a certificate whose key
		// usage allows both must not give it silently.
		v.warnf(p+".cert", "add roles: [sign] or roles: [decrypt, key_agreement] to serve the key for one use, or serve the signing and the encryption key as separate keys",
			"the key usage of %q lets the key sign and also decrypt or agree keys: a client may use one for the other", k.Cert)
	}
	return roles, true
}

// keyServerClients checks clients and builds the allow-list of the
// policy (for a Unix socket, the local client allowed every key).
func (v *validator) keyServerClients(f *KeyServerFile, unix bool, keyNames map[string]bool) {
	m := &f.Material
	if unix {
		if len(f.Clients) > 0 {
			v.warnf("clients", "remove it, or listen on host:port for mutual TLS", "clients is ignored on a Unix socket (its file permissions decide who connects)")
		}
		local := keyserver.Grant{Name: "local", Limits: keyserver.DefaultLimits}
		for _, k := range m.Policy.Keys {
			local.Keys = append(local.Keys, k.Name)
		}
		m.Policy.Local = &local
		return
	}
	if len(f.Clients) == 0 {
		v.errf("clients", "add for example:\n  clients:\n    - {name: edge, subject: \"CN=gmproxy key server client,O=Example\", keys: [portal_sign, portal_enc]}", "no clients configured: every key server needs an allow-list of client identities")
		return
	}
	seen := map[string]string{}
	// The key server takes the first entry that matches a certificate;
	// an entry that matches only certificates an earlier one matches
	// never applies.
	type identity struct {
		at, name, subject string
		spki              []byte
	}
	var earlier []identity
	for i := range f.Clients {
		c := &f.Clients[i]
		p := fmt.Sprintf("clients[%d]", i)
		g := keyserver.Grant{Name: c.Name, Subject: c.Subject, Limits: keyserver.Limits{Rate: float64(c.Rate), Burst: c.Burst, MaxInFlight: c.MaxInFlight, MaxConns: c.MaxConnections}}
		ok := v.uniqueName(p, c.Name, "client", "add name: NAME (it labels the client in the audit log and the metrics)", seen)
		if c.SPKISHA256 != "" {
			h, err := hex.DecodeString(strings.ReplaceAll(c.SPKISHA256, ":", ""))
			if err != nil || len(h) != 32 {
				v.errf(p+".spki_sha256", "write the 64 hex digits of the SHA-256 of the certificate's SubjectPublicKeyInfo", "spki_sha256 is not a SHA-256 in hex")
				ok = false
			}
			g.SPKISHA256 = h
		}
		if prob := subjectProblem(c.Subject); prob != "" {
			v.errf(p+".subject", "write it as the key server's log line of a refused connection prints it, or as `openssl x509 -noout -subject -nameopt RFC2253` does with attributes other than "+strings.Join(mapKeys(subjectTypes), ", ")+" as dotted OIDs (for example CN=edge,O=Example,C=CN: the last RDN first, no spaces)",
				"subject %q can match no client certificate: %s", c.Subject, prob)
			ok = false
		}
		if c.Subject == "" && c.SPKISHA256 == "" {
			v.errf(p, "add subject: \"CN=...,O=...\" or spki_sha256: HEX to identify the client certificate", "client %q has no identity", c.Name)
			ok = false
		} else if ok {
			for _, e := range earlier {
				if (e.subject == "" || e.subject == c.Subject) && (e.spki == nil || bytes.Equal(e.spki, g.SPKISHA256)) {
					v.errf(p, "merge it into "+e.at+", or put it before "+e.at+" if it is the narrower one (the first entry that matches a certificate applies)",
						"client %q can never apply: every certificate it matches matches %s (%q) first", c.Name, e.at, e.name)
					ok = false
					break
				}
			}
			if ok {
				earlier = append(earlier, identity{at: p, name: c.Name, subject: c.Subject, spki: g.SPKISHA256})
			}
		}
		if len(c.Keys) == 0 {
			v.errf(p+".keys", "add keys: [NAME, ...] with names of keys[] entries", "client %q may use no key", c.Name)
			ok = false
		}
		for j, n := range c.Keys {
			if !keyNames[n] {
				names := mapKeys(keyNames)
				fix := "use one of: " + strings.Join(names, ", ")
				if cl := closest(n, names); cl != "" {
					fix = fmt.Sprintf("did you mean %q?", cl)
				}
				v.errf(fmt.Sprintf("%s.keys[%d]", p, j), fix, "unknown key %q", n)
				ok = false
			}
		}
		if c.Rate < 0 {
			v.errf(p+".rate", "use 0 for unlimited, or for example 10000", "rate must not be negative")
			ok = false
		}
		if c.Burst < 1 && c.Rate > 0 {
			v.errf(p+".burst", "use at least 1, for example 1000", "burst must be at least 1 with a rate")
			ok = false
		}
		if c.MaxInFlight < 0 {
			v.errf(p+".max_in_flight", "use 0 for unlimited, or for example 256", "max_in_flight must not be negative")
			ok = false
		}
		if c.MaxConnections < 0 {
			v.errf(p+".max_connections", "use 0 for unlimited, or for example 64", "max_connections must not be negative")
			ok = false
		}
		g.Keys = c.Keys
		if ok {
			m.Policy.Clients = append(m.Policy.Clients, g)
		}
	}
}

// subjectTypes are the attribute types that the subject form the key
// server matches (keyserver.SubjectString, pkix.RDNSequence String) names,
// by OID; it writes any other type as its dotted OID.
var subjectTypes = map[string]string{
	"C": "2.5.4.6", "O": "2.5.4.10", "OU": "2.5.4.11", "CN": "2.5.4.3", "SERIALNUMBER": "2.5.4.5",
	"L": "2.5.4.7", "ST": "2.5.4.8", "STREET": "2.5.4.9", "POSTALCODE": "2.5.4.17",
}

// subjectProblem says why subject, a clients[] entry's, can never equal a
// certificate's subject as the key server writes it, "" when it can (or
// is empty). That form has no space around '=' or after a separator
// (a value's leading or trailing space is escaped), names only
// subjectTypes and writes them by name: OpenSSL's default and
// one-line forms, lower-case or long type names never match, and the
// edge would be refused only once deployed.
func subjectProblem(subject string) string {
	if subject == "" {
		return ""
	}
	if strings.HasPrefix(subject, "/") {
		return "it is in OpenSSL's /TYPE=value/... form"
	}
	for _, attr := range splitDN(subject) {
		typ, val, ok := strings.Cut(attr, "=")
		if !ok || typ == "" {
			return fmt.Sprintf("%q is not TYPE=value", attr)
		}
		// The value as written: its last character escaped or not, and
		// the first special one left unescaped.
		escaped, special := false, byte(0)
		for i := 0; i < len(val); i++ {
			escaped = val[i] == '\\'
			if escaped {
				i++
			} else if strings.IndexByte(`"<>;`, val[i]) >= 0 && special == 0 {
				special = val[i]
			}
		}
		if strings.TrimSpace(typ) != typ || strings.HasPrefix(val, " ") || strings.HasSuffix(val, " ") && !escaped {
			return "it has a space around '=' or a ',' (a value's own leading or trailing space is written \\ )"
		}
		if special != 0 {
			return fmt.Sprintf("the %q in the value of %s is written \\%c (or it is not RFC 2253's separator ',')", special, typ, special)
		}
		if _, named := subjectTypes[typ]; named {
			continue
		}
		if isDottedOID(typ) {
			for name, oid := range subjectTypes {
				if oid == typ {
					return fmt.Sprintf("attribute %s is written %s", typ, name)
				}
			}
			continue
		}
		if _, named := subjectTypes[strings.ToUpper(typ)]; named {
			return fmt.Sprintf("attribute type %q is written %s", typ, strings.ToUpper(typ))
		}
		return fmt.Sprintf("attribute type %q is written as its dotted OID (only %s have names)", typ, strings.Join(mapKeys(subjectTypes), ", "))
	}
	return ""
}

// splitDN splits an RFC 2253 name at its unescaped ',' and '+' (between
// RDNs and within a multi-valued one).
func splitDN(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // the escaped character
		case ',', '+':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// isDottedOID reports whether s is an OID in dotted decimal, such as
// 1.2.840.113549.1.9.1.
func isDottedOID(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil || p == "" || p[0] == '+' {
			return false
		}
	}
	return true
}

// LoadKeyServer reads, validates and loads the gmproxy keyserver
// configuration file at path, like Load does for gmproxy's own: on failure
// the error is a Problems value listing every problem.
func LoadKeyServer(path string) (*KeyServerFile, error) {
	f, probs := CheckKeyServer(path)
	if probs.HasErrors() {
		return nil, probs
	}
	f.Warnings = probs
	return f, nil
}

// CheckKeyServer reads and validates the gmproxy keyserver configuration
// at path and returns every problem, sorted by position; f is nil when
// there are errors.
func CheckKeyServer(path string) (*KeyServerFile, Problems) {
	data, dir, probs := readFile(path)
	if probs != nil {
		return nil, probs
	}
	return checkKeyServer(path, dir, data)
}

// checkKeyServer is CheckKeyServer on data already read; relative file
// names resolve against dir.
func checkKeyServer(path, dir string, data []byte) (*KeyServerFile, Problems) {
	f := &KeyServerFile{}
	f.setDefaults()
	f.File = path
	d := newDecoder(path)
	d.decodeFile(data, f)
	if d.probs.HasErrors() && len(d.valPos) == 0 {
		d.probs.sort()
		return nil, d.probs
	}
	f.decoded = d
	v := &validator{decoder: d, cfg: &Config{}, dir: dir, files: map[string]*loadedFile{}, now: now()}
	v.validateKeyServerFile(f)
	d.probs.sort()
	if d.probs.HasErrors() {
		return nil, d.probs
	}
	return f, d.probs
}

func (v *validator) validateKeyServerFile(f *KeyServerFile) {
	m := &f.Material
	if f.ListenGroup != "" {
		if !strings.HasPrefix(f.Listen, unixPrefix) {
			v.errf("listen_group", "remove it, or listen on unix:/path/to/socket", "listen_group applies to a Unix socket only")
		} else if gid, err := lookupGroup(f.ListenGroup); err != nil {
			v.errf("listen_group", "create the group (groupadd "+f.ListenGroup+") or name an existing one", "group %q: %s", f.ListenGroup, err)
		} else {
			m.SocketGID = &gid
		}
	}
	switch {
	case f.Listen == "":
		v.errf("listen", "add listen: host:port (mutual TLS) or listen: unix:/path/to/socket", "no listen address")
	case strings.HasPrefix(f.Listen, unixPrefix):
		m.Network, m.Addr = "unix", strings.TrimPrefix(f.Listen, unixPrefix)
		if m.Addr == "" {
			v.errf("listen", "write unix:/path/to/socket", "unix: address without a path")
		}
		if f.TLS != (KeyServerTLS{}) {
			v.warnf("tls", "remove it, or listen on host:port for mutual TLS", "tls is ignored on a Unix socket")
		}
	default:
		if v.hostPort("listen", f.Listen, true) {
			m.Network, m.Addr = "tcp", f.Listen
			if host, _, _ := net.SplitHostPort(f.Listen); host == "" || host == "0.0.0.0" || host == "::" {
				v.warnf("listen", "bind it to the address only the edge proxies reach, and firewall it", "the key server listens on every interface")
			}
		}
		t := &f.TLS
		if t.ClientCA == "" {
			v.errf("tls.client_ca", "add client_ca: FILE with the CA that issues gmproxy's client certificates", "client_ca is required: only authenticated gmproxy instances may use the keys")
		} else if b, err := readNamed(v.resolve(t.ClientCA), maxNamedFile); err != nil {
			v.errf("tls.client_ca", relFix, "cannot read CA file %q: %s", t.ClientCA, errText(err))
		} else if pool, n := x509Pool(b); n == 0 {
			v.errf("tls.client_ca", "the file must hold PEM RSA or ECDSA CA certificates", "no usable CA certificate in %q", t.ClientCA)
		} else {
			m.Policy.ClientCAs = pool
		}
		if kp := v.pair("tls", "cert", "key", t.Cert, t.Key, t.KeyPassword); kp != nil {
			if isSM2(kp) {
				v.errf("tls.cert", "use an RSA or ECDSA certificate (the key server's TLS is ordinary TLS)", "the key server certificate has an SM2 key")
			} else {
				v.validity(kp, "tls.cert")
				tc := kp.TLSCertificate()
				m.Cert = &tc
			}
		}
	}
	if f.IdleTimeout <= 0 {
		v.errf("idle_timeout", "write a duration such as 5m", "idle_timeout must be positive")
	}
	if f.HandshakeTimeout <= 0 {
		v.errf("handshake_timeout", "write a duration such as 5s", "handshake_timeout must be positive")
	}
	if f.MaxConnections < 1 {
		v.errf("max_connections", "use for example 1024", "max_connections must be at least 1")
	}
	if f.MaxHandshakes < 1 {
		v.errf("max_handshakes", "use for example 256", "max_handshakes must be at least 1")
	}
	if f.MaxHandshakesPerAddress < 1 {
		v.errf("max_handshakes_per_address", "use for example 32", "max_handshakes_per_address must be at least 1")
	}
	if f.AuditInterval <= 0 {
		v.errf("audit_interval", "write a duration such as 1m", "audit_interval must be positive")
	}
	if f.MetricsAddress != "" {
		v.hostPort("metrics_address", f.MetricsAddress, true)
	}
	if f.ShutdownGrace < 0 {
		v.errf("shutdown_grace", "write a duration such as 10s", "shutdown_grace must not be negative")
	}
	v.oneOf("log.level", f.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", f.Log.Format, "text", "json")
	v.keyServerClients(f, m.Network == "unix", v.servedKeys(f))
}

// lookupGroup returns the ID of the group named (or numbered) name.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		if g, err = user.LookupGroupId(name); err != nil {
			return 0, errors.New("no such group")
		}
	}
	return strconv.Atoi(g.Gid)
}
