package tlcp

import (
	"bytes"
	"encoding/asn1"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Distinguished name comparison (RFC 5280 §7.1): two names are equal when
// they have the same number of RDNs and each RDN of one matches the RDN of
// the other in the same position: as many attributes, each of the same
// type as one of the other's and with a matching value. Values of the
// attribute types X.520 and RFC 4519 compare with caseIgnoreMatch (or
// caseIgnoreIA5Match) are compared as strings after an RFC 4518 string
// preparation, whatever string type (PrintableString, UTF8String,
// IA5String, BMPString, UniversalString) the CA encoded each in:
// transcoded to Unicode, control and format characters mapped to nothing,
// white space to SPACE, then case folded, leading and trailing spaces
// dropped and inner runs of them made one (insignificant space handling).
// This is a subset of RFC 4518: no NFKC normalization (names that differ
// only in compatibility forms, such as full-width letters, do not match)
// and no bidi check. A value with a prohibited character (private use,
// the replacement character, which undecodable sequences and surrogates
// read as), a value of another attribute type, and a TeletexString match
// only the same encoding byte for byte (tag included).

// rawAttribute is an AttributeTypeAndValue with its value as encoded.
type rawAttribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rawRDNSET is a RelativeDistinguishedName (encoding/asn1 encodes and
// decodes a slice type named ...SET as a SET OF).
type rawRDNSET []rawAttribute

// caseIgnoreTypes are the attribute types whose values compare with
// caseIgnoreMatch (X.520, RFC 4519) or caseIgnoreIA5Match (domainComponent
// RFC 4519 §2.4, PKCS #9 emailAddress).
var caseIgnoreTypes = []asn1.ObjectIdentifier{
	{2, 5, 4, 3},                       // commonName
	{2, 5, 4, 4},                       // surname
	{2, 5, 4, 5},                       // serialNumber
	{2, 5, 4, 6},                       // countryName
	{2, 5, 4, 7},                       // localityName
	{2, 5, 4, 8},                       // stateOrProvinceName
	{2, 5, 4, 9},                       // streetAddress
	{2, 5, 4, 10},                      // organizationName
	{2, 5, 4, 11},                      // organizationalUnitName
	{2, 5, 4, 12},                      // title
	{2, 5, 4, 17},                      // postalCode
	{2, 5, 4, 41},                      // name
	{2, 5, 4, 42},                      // givenName
	{2, 5, 4, 43},                      // initials
	{2, 5, 4, 44},                      // generationQualifier
	{2, 5, 4, 46},                      // dnQualifier
	{2, 5, 4, 65},                      // pseudonym
	{2, 5, 4, 97},                      // organizationIdentifier
	{0, 9, 2342, 19200300, 100, 1, 25}, // domainComponent
	{1, 2, 840, 113549, 1, 9, 1},       // emailAddress
}

// sameName reports whether the DER-encoded names a and b are the same
// name under RFC 5280 §7.1 as above. Names that do not parse are the same
// only byte for byte.
func sameName(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ra, ok := parseRDNs(a)
	if !ok {
		return false
	}
	rb, ok := parseRDNs(b)
	if !ok || len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		if !sameRDN(ra[i], rb[i]) {
			return false
		}
	}
	return true
}

func parseRDNs(der []byte) ([]rawRDNSET, bool) {
	var rdns []rawRDNSET
	rest, err := asn1.Unmarshal(der, &rdns)
	return rdns, err == nil && len(rest) == 0
}

// sameRDN matches the attributes of a one to one with b's (a multi-valued
// RDN is a set: its order carries nothing).
func sameRDN(a, b rawRDNSET) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && sameAttribute(x, y) {
				used[j] = true
				continue next
			}
		}
		return false
	}
	return true
}

func sameAttribute(a, b rawAttribute) bool {
	if !a.Type.Equal(b.Type) {
		return false
	}
	if bytes.Equal(a.Value.FullBytes, b.Value.FullBytes) {
		return true
	}
	if !isCaseIgnoreType(a.Type) {
		return false
	}
	sa, ok := prepareString(a.Value)
	if !ok {
		return false
	}
	sb, ok := prepareString(b.Value)
	return ok && strings.EqualFold(sa, sb)
}

func isCaseIgnoreType(t asn1.ObjectIdentifier) bool {
	for _, c := range caseIgnoreTypes {
		if t.Equal(c) {
			return true
		}
	}
	return false
}

// prepareString decodes v, one of the string types above, and prepares it
// as RFC 4518 §2 (the subset above) short of case folding, which the
// comparison does. It reports false for another type, an invalid encoding
// or a prohibited character.
func prepareString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return "", false
	}
	var s string
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagIA5String:
		for _, c := range v.Bytes {
			if c >= utf8.RuneSelf {
				return "", false
			}
		}
		s = string(v.Bytes)
	case asn1.TagUTF8String:
		s = string(v.Bytes) // an invalid sequence reads as U+FFFD, prohibited below
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		s = string(utf16.Decode(u)) // an unpaired surrogate becomes U+FFFD, prohibited below
	case 28: // UniversalString (UCS-4)
		if len(v.Bytes)%4 != 0 {
			return "", false
		}
		r := make([]rune, len(v.Bytes)/4)
		for i := range r {
			r[i] = rune(uint32(v.Bytes[4*i])<<24 | uint32(v.Bytes[4*i+1])<<16 | uint32(v.Bytes[4*i+2])<<8 | uint32(v.Bytes[4*i+3]))
		}
		s = string(r) // a surrogate or a value past U+10FFFF becomes U+FFFD, prohibited below
	default:
		return "", false
	}
	var out strings.Builder
	pending := false // a run of spaces after some character
	for _, r := range s {
		switch {
		case r == utf8.RuneError || unicode.Is(unicode.Co, r):
			return "", false // RFC 4518 §2.4 (prohibit)
		case unicode.IsSpace(r):
			// RFC 4518 §2.2 maps these to SPACE; §2.6.1 folds the runs
			// and drops them at both ends.
			pending = out.Len() > 0
		case unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r):
			// RFC 4518 §2.2: mapped to nothing.
		default:
			if pending {
				out.WriteByte(' ')
				pending = false
			}
			out.WriteRune(r)
		}
	}
	return out.String(), true
}
