package speed

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/cpu"
)

// Impl describes which SM3/SM4 implementation gmsm selects on this machine,
// mirroring gmsm's own selection logic (internal/sm4 and internal/sm3), so that
// users on Kunpeng, Yitian, Hygon or plain x86 know what they are measuring.
type Impl struct {
	GOOS, GOARCH string
	GoVersion    string
	GmsmVersion  string
	NumCPU       int
	// Features are the CPU features gmsm looks at that are present.
	Features []string
	// SM4Blocks is the multi-block SM4 path (CBC decryption, CTR, GCM, XTS, ECB).
	SM4Blocks string
	// SM4Single is the single-block SM4 path (serial CBC encryption, CCM's CBC-MAC).
	SM4Single string
	// GHASH is the GCM hash implementation.
	GHASH string
	// SM3 is the SM3 compression function implementation.
	SM3 string
	// Env lists the gmsm environment switches that are set.
	Env map[string]string
}

// envSwitches are the environment variables gmsm reads to pick implementations.
var envSwitches = []string{"FORCE_SM4BLOCK_AESNI", "DISABLE_GFNI", "DISABLE_SM4NI", "DISABLE_SM3NI"}

// DetectImpl reports the implementation in use.
func DetectImpl() Impl {
	im := Impl{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(),
		GmsmVersion: gmsmVersion(), NumCPU: runtime.NumCPU(), Env: map[string]string{},
	}
	for _, e := range envSwitches {
		if v, ok := os.LookupEnv(e); ok {
			im.Env[e] = v
		}
	}
	forceAESNI := os.Getenv("FORCE_SM4BLOCK_AESNI") == "1"
	switch runtime.GOARCH {
	case "amd64":
		gfni := cpu.X86.HasAVX512GFNI || cpuinfoFlag("gfni")
		add := func(ok bool, name string) {
			if ok {
				im.Features = append(im.Features, name)
			}
		}
		add(cpu.X86.HasAES, "AES-NI")
		add(cpu.X86.HasAVX2, "AVX2")
		add(cpu.X86.HasBMI2, "BMI2")
		add(gfni, "GFNI")
		add(cpu.X86.HasPCLMULQDQ, "PCLMULQDQ")
		add(cpu.X86.HasSSSE3, "SSSE3")
		useGFNI := cpu.X86.HasAVX2 && gfni && os.Getenv("DISABLE_GFNI") != "1"
		switch {
		case !cpu.X86.HasAES:
			im.SM4Blocks, im.SM4Single = "generic", "generic (table)"
		case useGFNI:
			im.SM4Blocks = "GFNI+AVX2, 8 blocks"
		case cpu.X86.HasAVX2:
			im.SM4Blocks = "AES-NI+AVX2, 8 blocks"
		default:
			im.SM4Blocks = "AES-NI, 4 blocks"
		}
		if cpu.X86.HasAES {
			im.SM4Single = "generic (table, not constant time; FORCE_SM4BLOCK_AESNI=1 selects AES-NI)"
			if forceAESNI {
				im.SM4Single = "AES-NI (constant time, FORCE_SM4BLOCK_AESNI=1)"
				if useGFNI {
					im.SM4Single = "GFNI (constant time, FORCE_SM4BLOCK_AESNI=1)"
				}
			}
		}
		im.GHASH = "generic"
		if cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ {
			im.GHASH = "PCLMULQDQ"
		}
		switch {
		case cpu.X86.HasAVX2 && cpu.X86.HasBMI2:
			im.SM3 = "AVX2+BMI2"
		case cpu.X86.HasSSSE3:
			im.SM3 = "SSSE3"
		default:
			im.SM3 = "generic"
		}
	case "arm64":
		add := func(ok bool, name string) {
			if ok {
				im.Features = append(im.Features, name)
			}
		}
		add(cpu.ARM64.HasAES, "AES")
		add(cpu.ARM64.HasPMULL, "PMULL")
		add(cpu.ARM64.HasSM3, "SM3")
		add(cpu.ARM64.HasSM4, "SM4")
		switch {
		case cpu.ARM64.HasSM4 && os.Getenv("DISABLE_SM4NI") != "1":
			im.SM4Blocks, im.SM4Single = "arm64 SM4 instructions", "arm64 SM4 instructions"
		case cpu.ARM64.HasAES:
			im.SM4Blocks = "NEON+AES, 4 blocks"
			im.SM4Single = "generic (table)"
			if forceAESNI {
				im.SM4Single = "NEON+AES (constant time, FORCE_SM4BLOCK_AESNI=1)"
			}
		default:
			im.SM4Blocks, im.SM4Single = "generic", "generic (table)"
		}
		im.GHASH = "generic"
		if cpu.ARM64.HasPMULL {
			im.GHASH = "PMULL"
		}
		im.SM3 = "NEON"
		if cpu.ARM64.HasSM3 && os.Getenv("DISABLE_SM3NI") != "1" {
			im.SM3 = "arm64 SM3 instructions"
		}
	default:
		im.SM4Blocks, im.SM4Single, im.GHASH, im.SM3 = "generic", "generic", "generic", "generic"
	}
	return im
}

// String is a one-paragraph description for the table header.
func (im Impl) String() string {
	var b strings.Builder
	b.WriteString(im.GOOS + "/" + im.GOARCH + ", " + im.GoVersion + ", gmsm " + im.GmsmVersion)
	feats := "none"
	if len(im.Features) > 0 {
		feats = strings.Join(im.Features, " ")
	}
	b.WriteString("\nCPU features: " + feats)
	b.WriteString("\nSM4 multi-block: " + im.SM4Blocks + "; SM4 single block: " + im.SM4Single)
	b.WriteString("\nGHASH: " + im.GHASH + "; SM3: " + im.SM3)
	if len(im.Env) > 0 {
		var env []string
		for _, e := range envSwitches {
			if v, ok := im.Env[e]; ok {
				env = append(env, e+"="+v)
			}
		}
		b.WriteString("\nenvironment: " + strings.Join(env, " "))
	}
	return b.String()
}

func gmsmVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/emmansun/gmsm" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// cpuinfoFlag reports whether /proc/cpuinfo lists flag (Linux only; x/sys/cpu
// has no non-AVX-512 GFNI bit).
func cpuinfoFlag(flag string) bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "flags") {
			continue
		}
		if _, v, ok := strings.Cut(line, ":"); ok {
			for _, f := range strings.Fields(v) {
				if f == flag {
					return true
				}
			}
		}
		return false
	}
	return false
}
