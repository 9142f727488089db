// Package suite holds the cipher-suite lookups the tlcp and tls13sm stacks
// share: finding a suite of a stack's table by its ID, its name for logs
// and metrics, and matching the spellings users write in configuration.
// Each stack keeps its own suite set.
package suite

import (
	"fmt"
	"strings"
)

// Suite is what the lookups need of a stack's suite description.
type Suite interface {
	comparable
	SuiteID() uint16
	SuiteName() string
}

// ByID returns the suite of table whose ID is id, or the zero value.
func ByID[S Suite](table []S, id uint16) S {
	for _, s := range table {
		if s.SuiteID() == id {
			return s
		}
	}
	var zero S
	return zero
}

// Name returns the name of suite id in table, or "0xXXXX" for an ID the
// table does not hold.
func Name[S Suite](table []S, id uint16) string {
	var zero S
	if s := ByID(table, id); s != zero {
		return s.SuiteName()
	}
	return fmt.Sprintf("0x%04X", id)
}

// NameMatches reports whether name, as a user wrote it, spells the
// cipher suite name canonical: letter case, surrounding space, a leading
// "TLS_" and the difference between '-' and '_' do not matter, so
// "tls_sm4_gcm_sm3", "SM4-GCM-SM3" and "TLS_SM4_GCM_SM3" are one name.
func NameMatches(name, canonical string) bool {
	return key(name) == key(canonical)
}

func key(s string) string {
	s = strings.ReplaceAll(strings.ToUpper(strings.TrimSpace(s)), "-", "_")
	return strings.TrimPrefix(s, "TLS_")
}
