// Package keyserver keeps SM2 private keys in a separate process (or host)
// and runs the private-key operations of gmproxy's handshakes for it: the
// remote key server (Server), its client (Client, with one or more
// endpoints) and RemoteKey, which implements smkey.ContextSigner,
// ContextDecrypter and KeyAgreement so that the handshake stacks use a
// remote key like a local one, behind the offload engine.
//
// The transport is any net.Listener / dialer pair: TCP with mutual TLS
// (crypto/tls, TLS 1.3, client certificates required), or a Unix socket
// protected by its file permissions.
//
// # Wire format (version 2)
//
// Integers are big endian. A connection starts with one hello in each
// direction, client first:
//
//	hello:  length (4) = 8 || "GMKS" || version (2) || reserved (2) = 0
//
// The server answers with its own version and closes the connection when
// the versions differ; the client then reports an *Error with CodeVersion
// naming both. The hello has the shape of a version-1 frame, so that a
// version-1 server answers it with an error frame and a version-1 client's
// request is recognised (and answered, in version-1 framing, with an error
// text telling to upgrade): a mismatch is always a clear error, never a
// hang or garbage.
//
// Then both sides send frames:
//
//	frame:  length (4) || request ID (4) || type (1) || body
//
// length counts the bytes after itself: at least 5, at most MaxFrame.
// Request IDs are chosen by the client, never 0, unique among its requests
// in flight on the connection; the answer carries the request's ID. A
// connection carries any number of requests at once and the answers come
// in any order (as the operations finish).
//
// Request types (Op) and bodies:
//
//	1 sign           key ID (32) || e (32): the SM2 digest SM3(Z_A || M), computed by the client
//	2 decrypt        key ID (32) || SM2 ciphertext (ASN.1, C1C3C2) of a TLCP pre-master secret
//	3 key_agreement  key ID (32) || ephemeral private key (32) || peer static key (65) ||
//	                 peer ephemeral key (65) || responder (1: 0 or 1) || key length (2) ||
//	                 uid (2-byte length || bytes) || peer uid (2-byte length || bytes)
//	4 ping           empty
//
// The key ID is SM3 of the key's PKIX SubjectPublicKeyInfo (KeyID). The
// type of an answer is a Code: 0 (ok) with the result (an ASN.1 signature,
// the plaintext, the agreed key, or nothing for ping) as body, or an error
// code with a short UTF-8 explanation (at most 256 bytes, for logs). An
// answer with request ID 0 refuses the whole connection (for example
// CodeForbidden for a client in no allow-list entry, CodeMalformed for a
// frame length out of range or a request with ID 0); the server then
// closes it.
//
// # Threat model
//
// The key server protects the private keys from the edge: a compromised
// edge host must not yield the keys, and what it can do with them must be
// bounded, visible and revocable. Assumptions and defences:
//
//   - Who can talk to it: only peers with a client certificate from the
//     configured CA (mutual TLS 1.3), or local users with access to the
//     Unix socket. The listener should be reachable only from the edge
//     proxies (bind address and firewall).
//   - Not an oracle: holding a client certificate is not enough. Each key
//     has roles (sign, decrypt, key_agreement) and operations outside them
//     are refused (CodeWrongRole), so the signing key never decrypts and
//     the encryption key never signs. Each client identity (certificate
//     subject and/or SHA-256 of its SubjectPublicKeyInfo) is mapped to the
//     keys it may use; an unknown identity is refused at connection time,
//     a key outside its list with CodeForbidden. Decryption answers TLCP
//     pre-master secrets only (48 bytes beginning with version 1.1): any
//     other plaintext is refused like a ciphertext that does not decrypt
//     (CodeFailed), so that other data encrypted to the key stays sealed.
//   - An edge that is compromised can still use its own keys while it is:
//     per-client rate limits (CodeRateLimited), which every request but a
//     ping draws on, refused ones too (probing which keys the server holds
//     is no faster than signing), and in-flight bounds (CodeBusy) cap how
//     fast (pings, for health checks, are paced per connection instead:
//     beyond 100 a second their answers wait); an info-level audit line per client and key and interval
//     (counts by operation and result, not one line per operation) and
//     the metrics by client show it; removing the client from the
//     allow-list (a reload) ends it: its open connections are closed at
//     once, after their operations in progress are answered. Refusals
//     name neither the key nor the client.
//   - Resources: a bound on open connections (further ones are closed at
//     once); within it, a bound on the connections not yet identified, in
//     all and per remote address (Server.MaxHandshakes,
//     MaxHandshakesPerAddr), so that peers without an allowed certificate
//     cannot hold the places of the clients; one bound per client
//     (Limits.MaxConns: one more gets CodeBusy after the greeting, so one
//     client cannot take them all; a reload that lowers it closes the
//     client's newest connections once their operations are answered); a
//     short deadline for the TLS handshake and the greeting; an idle
//     timeout; bounded frames (MaxFrame) and malformed input answered with
//     CodeMalformed, never a panic; at most one log line a second per
//     reason of refused connections (the metrics count every one).
//   - Not covered: the channel carries the TLCP ECDHE ephemeral private
//     key and decrypted pre-master secrets, so its confidentiality matters
//     as much as the keys' (mutual TLS or a local socket only); a
//     compromised key server host yields the keys; signatures are over
//     digests the client computed, so the key server cannot know what it
//     signs.
package keyserver
