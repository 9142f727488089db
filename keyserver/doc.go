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
// # Wire format (version 3)
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
// hang or garbage. Version 3 changed the sign operation (it takes the
// message, where version 2 took a digest the client computed): a gmproxy
// and a key server of versions 2 and 3 refuse each other at the greeting
// ("run the same release on both"), which gmproxy's start-up probe of
// each remote key logs, rather than each handshake failing on a refused
// signature.
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
//	1 sign           key ID (32) || M: a handshake message (see "What is signed"); the key
//	                 server computes e = SM3(Z_A || M) with the ID M's protocol prescribes
//	2 decrypt        key ID (32) || SM2 ciphertext (ASN.1, C1C3C2) of a TLCP pre-master secret
//	3 key_agreement  key ID (32) || ephemeral private key (32) || peer static key (65) ||
//	                 peer ephemeral key (65) || responder (1: 0 or 1) || key length (2) ||
//	                 uid (2-byte length || bytes) || peer uid (2-byte length || bytes);
//	                 answered only for a TLCP ECDHE server's agreement: responder 0, key
//	                 length 48, both uids empty (the default ID), else CodeNotHandshake
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
// # What is signed
//
// The sign operation signs the handshake messages of gmproxy's servers
// and nothing else; any other M is refused with CodeNotHandshake (12,
// "not_handshake"), counted in the metrics and the audit like the other
// refusals. The client does not choose the SM2 ID: the key server takes
// the one of M's protocol. The accepted M are exactly what the tlcp and
// tls13sm packages sign:
//
//	TLS 1.3 server CertificateVerify (RFC 8446 §4.4.3, RFC 8998), ID "TLSv1.3+GM+Cipher+Suite":
//	    0x20 × 64 || "TLS 1.3, server CertificateVerify" || 0x00 || transcript hash (32, SM3)
//	TLCP ECDHE ServerKeyExchange (GB/T 38636-2020 §6.4.5.4), ID "1234567812345678":
//	    client_random (32) || server_random (32) || 3 (named_curve) || 0x0029 (41, SM2) || 65 ||
//	    uncompressed point (65) on the SM2 curve
//	TLCP ECC ServerKeyExchange, ID "1234567812345678":
//	    client_random (32) || server_random (32) || length (3) || DER of one X.509
//	    certificate (exactly length bytes) with an SM2 public key and, when it has the
//	    key usage extension, keyEncipherment, dataEncipherment or keyAgreement
//
// The client's CertificateVerify of either protocol is not signed (gmproxy
// keeps no client key on a key server). The certificate of an ECC
// ServerKeyExchange need not hold a key this key server serves: a site's
// encryption key may be on another key server or on the edge.
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
//     Signing answers handshake messages only (see "What is signed"): a
//     client allowed the signing key cannot have it sign a document, a
//     certificate, a digest or a message of another protocol. Key
//     agreement answers a TLCP ECDHE server's only (initiator, default
//     IDs, a 48-byte pre-master secret; else CodeNotHandshake): a client
//     cannot run SM2 key exchange as the site with another system's IDs,
//     key length or role.
//   - An edge that is compromised can still use its own keys while it is:
//     per-client rate limits (CodeRateLimited), which every request but a
//     ping draws on, refused ones too (probing which keys the server holds
//     is no faster than signing), and in-flight bounds (CodeBusy) cap how
//     fast (pings, for health checks, are paced per connection instead:
//     beyond 100 a second their answers wait); an info-level audit line per client and key and interval
//     (counts by operation and result, not one line per operation; every
//     refusal is counted, of a ping or an unknown operation too) and
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
//     compromised key server host yields the keys. What a client allowed
//     the signing key can still have signed: a TLS 1.3 server
//     CertificateVerify over any transcript hash, a TLCP ECDHE
//     ServerKeyExchange for any randoms and any point, and a TLCP ECC
//     ServerKeyExchange for any randoms and any SM2 encryption
//     certificate, one of its own making included. That is, it can
//     authenticate as the site any handshake it runs while it is allowed;
//     since the peer chooses client_random (and TLS 1.3 hashes it into
//     the transcript), such a signature serves in the handshake it was
//     asked for only, not as a lasting signed statement. The 64 bytes of
//     randoms of a TLCP message are the client's choice: a verifier of
//     another protocol whose signed data had the TLCP layouts above, with
//     the default ID, would accept them.
package keyserver
