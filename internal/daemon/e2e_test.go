package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gmproxy/gmproxy/tlcp"
	"github.com/gmproxy/gmproxy/tls13sm"
)

func TestE2ETLS(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	for _, h2 := range []bool{false, true} {
		c := tlsClient(t, d.addr, "localhost", h2)
		body, resp := get(t, c, "https://localhost/hello")
		if !strings.HasPrefix(body, "path=/hello proto=TLSv1.3 cipher=TLS_") {
			t.Errorf("h2=%v: body %q", h2, body)
		}
		if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
			t.Errorf("h2=%v: response protocol %s", h2, resp.Proto)
		}
		// SNI selects the other site.
		c = tlsClient(t, d.addr, "x.b.example.cn", h2)
		if body, _ := get(t, c, "https://x.b.example.cn/"); body != "other site\n" {
			t.Errorf("h2=%v: other site answered %q", h2, body)
		}
	}
}

// TestE2EAllProtocolsOnePort: every TLCP suite (ours), both TLS 1.3-SM
// suites and crypto/tls reach the backend through one port, over HTTP/1.1
// and h2.
func TestE2EAllProtocolsOnePort(t *testing.T) {
	b := newBackend(t)
	d := startDaemon(t, testConfig(t, b.Listener.Addr().String()))
	cases := []struct {
		proto string
		suite uint16
		want  string
	}{
		{"tlcp", tlcp.ECC_SM4_GCM_SM3, "proto=NTLSv1.1 cipher=ECC-SM2-SM4-GCM-SM3"},
		{"tlcp", tlcp.ECC_SM4_CBC_SM3, "proto=NTLSv1.1 cipher=ECC-SM2-SM4-CBC-SM3"},
		{"tlcp", tlcp.ECDHE_SM4_GCM_SM3, "proto=NTLSv1.1 cipher=ECDHE-SM2-SM4-GCM-SM3"},
		{"tlcp", tlcp.ECDHE_SM4_CBC_SM3, "proto=NTLSv1.1 cipher=ECDHE-SM2-SM4-CBC-SM3"},
		{"tls13sm", tls13sm.TLS_SM4_GCM_SM3, "proto=TLSv1.3-SM cipher=TLS_SM4_GCM_SM3"},
		{"tls13sm", tls13sm.TLS_SM4_CCM_SM3, "proto=TLSv1.3-SM cipher=TLS_SM4_CCM_SM3"},
	}
	for _, tc := range cases {
		for _, h2 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s/h2=%v", tc.proto, tc.want[strings.Index(tc.want, "cipher=")+7:], h2), func(t *testing.T) {
				c := smClient(t, d.addr, tc.proto, tc.suite, h2)
				body, resp := get(t, c, "https://localhost/p")
				if want := "path=/p " + tc.want + "\n"; body != want {
					t.Errorf("body %q, want %q", body, want)
				}
				if h2 && resp.ProtoMajor != 2 || !h2 && resp.ProtoMajor != 1 {
					t.Errorf("response over %s", resp.Proto)
				}
			})
		}
	}
}
