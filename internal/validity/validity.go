// Package validity computes when a verified certificate chain is valid:
// from the latest NotBefore to the earliest NotAfter of its certificates
// (RFC 5280 §6.1.3(a)(2): every certificate of the path must be valid).
// tlcp and tls13sm bound cached verifications, resumed sessions and
// tickets by it, so that nothing outlives the first certificate of the
// chain to expire, a CA's included.
package validity

import (
	"time"

	"github.com/emmansun/gmsm/smx509"
)

// Forever is a NotAfter later than any certificate's, for a window that
// starts open.
var Forever = time.Unix(1<<62, 0)

// Narrow returns the window [from, until] narrowed to where every
// certificate of chain is valid.
func Narrow(chain []*smx509.Certificate, from, until time.Time) (time.Time, time.Time) {
	for _, c := range chain {
		if c.NotBefore.After(from) {
			from = c.NotBefore
		}
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	return from, until
}

// Of returns the window where every certificate of chain is valid.
func Of(chain []*smx509.Certificate) (from, until time.Time) {
	return Narrow(chain, time.Time{}, Forever)
}
