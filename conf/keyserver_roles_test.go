package conf

import (
	"crypto/rand"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emmansun/gmsm/sm2"
	"github.com/emmansun/gmsm/smx509"

	"github.com/gmproxy/gmproxy/keyserver"
)

// TestKeyServerRolesFromDualUseCertWarned: a key whose roles come from a
// certificate with both digitalSignature and keyEncipherment signs and
// decrypts, as with roles: [sign, decrypt] written out; it gets the same
// warning, not silently the dual use roles exist to prevent.
func TestKeyServerRolesFromDualUseCertWarned(t *testing.T) {
	dir := t.TempDir()
	k, err := sm2.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &smx509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: smx509.KeyUsageDigitalSignature | smx509.KeyUsageKeyEncipherment}
	tmpl.Subject.CommonName = "dual"
	der, err := smx509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := smx509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"dual.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"dual.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		"keyserver.yaml": []byte("listen: unix:" + filepath.Join(dir, "ks.sock") + "\n" +
			"keys:\n  - {name: dual, key: dual.key, cert: dual.crt}\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := LoadKeyServer(filepath.Join(dir, "keyserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Material.Policy.Keys) != 1 || f.Material.Policy.Keys[0].Roles != keyserver.RoleSign|keyserver.RoleDecrypt {
		t.Fatalf("keys %+v", f.Material.Policy.Keys)
	}
	var warned bool
	for _, w := range f.Warnings {
		warned = warned || strings.Contains(w.String(), "a client may use one for the other")
	}
	if !warned {
		t.Errorf("a signing and decrypting key from its certificate's key usage, no warning: %v", f.Warnings)
	}
}
