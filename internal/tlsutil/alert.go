package tlsutil

import "strconv"

// alertNames are the AlertDescription names of the TLS alert registry as
// TLS 1.2 (RFC 5246 §7.2), its extensions (RFC 4279, 6066, 7301, 7507) and
// TLS 1.3 (RFC 8446 §6, including the values it keeps as _RESERVED) spell
// them, in words. GB/T 38636 (TLCP) uses the same numbers for these and adds
// its own from 200 on, which the tlcp package names itself.
var alertNames = [...]string{
	0:   "close notify",
	10:  "unexpected message",
	20:  "bad record MAC",
	21:  "decryption failed",
	22:  "record overflow",
	30:  "decompression failure",
	40:  "handshake failure",
	41:  "no certificate",
	42:  "bad certificate",
	43:  "unsupported certificate",
	44:  "revoked certificate",
	45:  "expired certificate",
	46:  "unknown certificate",
	47:  "illegal parameter",
	48:  "unknown certificate authority",
	49:  "access denied",
	50:  "error decoding message",
	51:  "error decrypting message",
	60:  "export restriction",
	70:  "protocol version not supported",
	71:  "insufficient security level",
	80:  "internal error",
	86:  "inappropriate fallback",
	90:  "user canceled",
	100: "no renegotiation",
	109: "missing extension",
	110: "unsupported extension",
	112: "unrecognized name",
	113: "bad certificate status response",
	115: "unknown PSK identity",
	116: "certificate required",
	120: "no application protocol",
}

// AlertName returns the registry name of an alert description in words
// ("bad certificate"), or "alert(N)" for a value without one.
func AlertName(desc uint8) string {
	if int(desc) < len(alertNames) && alertNames[desc] != "" {
		return alertNames[desc]
	}
	return "alert(" + strconv.Itoa(int(desc)) + ")"
}
