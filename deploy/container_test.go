package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestContainerfile: the image runs as a numeric user (Kubernetes verifies
// runAsNonRoot only for numeric users), carries version and revision labels,
// starts with the configuration path the Kubernetes manifests mount, and the
// build context leaves out the repository's history and test data.
func TestContainerfile(t *testing.T) {
	b, err := os.ReadFile("container/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	cf := string(b)
	if !regexp.MustCompile(`(?m)^USER 65532:65532$`).MatchString(cf) {
		t.Error("no numeric USER 65532:65532")
	}
	for _, l := range []string{`org.opencontainers.image.version="${VERSION}"`, `org.opencontainers.image.revision="${REVISION}"`} {
		if !strings.Contains(cf, l) {
			t.Errorf("no label %s", l)
		}
	}
	// .git is not in the context, so `gmproxy version` knows the commit only
	// if the build stage passes REVISION to the linker (cmd/gmproxy's
	// main.revision).
	build := regexp.MustCompile(`(?s)AS build\n(.*?)\nFROM `).FindStringSubmatch(cf)
	if build == nil || !regexp.MustCompile(`(?m)^ARG REVISION=`).MatchString(build[1]) ||
		!regexp.MustCompile(`(?m)^RUN .*go build .*-X main\.revision=\$\{REVISION\}`).MatchString(build[1]) {
		t.Error("the build stage does not stamp REVISION into the binary (ARG REVISION and -ldflags -X main.revision=${REVISION})")
	}
	src, err := os.ReadFile("../cmd/gmproxy/version.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^var revision = `).Match(src) {
		t.Error("cmd/gmproxy has no package-level string revision for -X main.revision")
	}
	if !strings.Contains(cf, `CMD ["run", "-c", "/etc/gmproxy/config/gmproxy.yaml"`) {
		t.Error("the default command does not read /etc/gmproxy/config/gmproxy.yaml, where the manifests mount the ConfigMap")
	}
	ign, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "**/testdata"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p) + `$`).Match(ign) {
			t.Errorf(".dockerignore does not leave out %s", p)
		}
	}
}
