package main

import (
	"math"
	"strings"
	"testing"
)

// Four samples in perf script's layout (-F comm,ip,sym,dso with -g): one
// in user space, a write(2) that wakes the reader through the socket
// callback, a close(2) reached through the x64_sys_call dispatcher, and a
// timer interrupt taken in user space.
const script = `gmproxy 
	ffffffff00000001 sm2P256MulInternal+0x12 (/usr/local/bin/gmproxy)
	ffffffff00000002 github.com/emmansun/gmsm/internal/sm2ec.p256PointDoubleAsm+0x5 (/usr/local/bin/gmproxy)

gmproxy 
	ffffffff8225f7a5 pvm_irq_enable ([kernel.kallsyms])
	ffffffff8225f7a6 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
	ffffffff8225f7a7 sock_def_readable ([kernel.kallsyms])
	ffffffff8225f7a8 tcp_rcv_established ([kernel.kallsyms])
	ffffffff8225f7a9 tcp_sendmsg ([kernel.kallsyms])
	ffffffff8225f7aa ksys_write ([kernel.kallsyms])
	ffffffff8225f7ab do_syscall_64 ([kernel.kallsyms])
	ffffffff8225f7ac entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
	0000000000401000 internal/runtime/syscall/linux.Syscall6+0xe (/usr/local/bin/gmproxy)

gmproxy 
	ffffffff8225f7b0 tcp_time_wait ([kernel.kallsyms])
	ffffffff8225f7b1 __tcp_close ([kernel.kallsyms])
	ffffffff8225f7b2 __x64_sys_close ([kernel.kallsyms])
	ffffffff8225f7b3 x64_sys_call ([kernel.kallsyms])
	ffffffff8225f7b4 do_syscall_64 ([kernel.kallsyms])

gmproxy 
	ffffffff8225f7c0 hrtimer_interrupt ([kernel.kallsyms])
	ffffffff8225f7c1 asm_sysvec_apic_timer_interrupt ([kernel.kallsyms])
	0000000000401000 runtime.mallocgc+0x40 (/usr/local/bin/gmproxy)
`

// idle is a sample of another command (perf record -C also samples the
// idle task), which -comm leaves out.
const idle = `swapper 
	ffffffff8225f7a5 pvm_safe_halt_hc ([kernel.kallsyms])
	ffffffff822613b5 default_idle ([kernel.kallsyms])

`

func TestSplit(t *testing.T) {
	// 4 samples at 1000 Hz over 2 operations: each sample is 500 µs/op.
	s, err := split(strings.NewReader(script+idle), "gmproxy", 2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	if s.Samples != 4 {
		t.Errorf("samples = %d, want 4", s.Samples)
	}
	near("user", s.UserUS, 500)
	near("kernel", s.KernelUS, 1500)
	near("wake-ups", s.WakeupsUS, 500)
	for name, want := range map[string]float64{"write": 500, "close": 500, "interrupts": 500} {
		near("syscall "+name, s.Syscalls[name], want)
	}
	if len(s.Syscalls) != 3 {
		t.Errorf("syscalls = %v, want write, close and interrupts", s.Syscalls)
	}
	// The user-space sample's leaf is gmsm's field multiplication.
	if len(s.UserParts) != len(UserParts) {
		t.Fatalf("user parts = %v, want every part of %v", s.UserParts, UserParts)
	}
	for i, p := range s.UserParts {
		want := 0.0
		if p.Part == partSM2 {
			want = 500
		}
		if p.Part != UserParts[i] {
			t.Errorf("user part %d is %s, want %s", i, p.Part, UserParts[i])
		}
		near("user part "+p.Part, p.US, want)
	}
}

func TestSyscallName(t *testing.T) {
	k := func(syms ...string) []frame {
		var f []frame
		for _, s := range syms {
			f = append(f, frame{sym: s, kernel: true})
		}
		return f
	}
	for _, tt := range []struct {
		frames []frame
		want   string
	}{
		{k("tcp_recvmsg", "ksys_read", "do_syscall_64"), "read"},
		{k("ep_poll", "do_epoll_wait", "__x64_sys_epoll_pwait", "x64_sys_call", "do_syscall_64"), "epoll_pwait"},
		{k("do_writev", "do_syscall_64"), "writev"},
		{k("inet_csk_accept", "do_accept", "__sys_accept4", "__x64_sys_accept4", "do_syscall_64"), "accept4"},
		{k("do_syscall_64"), entryExit},
		{k("pvm_irq_enable", "__raw_callee_save_pvm_irq_enable", "do_syscall_64"), entryExit},
		{k("handle_mm_fault", "exc_page_fault", "asm_exc_page_fault"), "interrupts"},
	} {
		if got := syscallName(tt.frames); got != tt.want {
			t.Errorf("%v: got %q, want %q", tt.frames, got, tt.want)
		}
	}
}

func TestKeepTop(t *testing.T) {
	got := keepTop(map[string]float64{"write": 5, "read": 4, "close": 2, "accept4": 1}, 2)
	if len(got) != 3 || got["write"] != 5 || got["read"] != 4 || got["rest"] != 3 {
		t.Errorf("keepTop = %v", got)
	}
}

func FuzzReadSamples(f *testing.F) {
	f.Add(script)
	f.Add("x\n\t\n \n\tffff\n")
	f.Fuzz(func(t *testing.T, in string) {
		n := 0
		if err := readSamples(strings.NewReader(in), func(sample) { n++ }); err != nil {
			return
		}
		if n > strings.Count(in, "\n")+1 {
			t.Fatalf("%d samples from %d lines", n, strings.Count(in, "\n")+1)
		}
	})
}

func TestUserPart(t *testing.T) {
	const gm, ng, libc = "/usr/local/bin/gmproxy", "/usr/local/sbin/nginx", "/usr/lib/x86_64-linux-gnu/libc.so.6"
	for _, tt := range []struct {
		sym, dso, want string
	}{
		// gmproxy (Go, gmsm)
		{"sm2P256MulInternal", gm, partSM2},
		{"github.com/emmansun/gmsm/internal/sm2ec.p256PointDoubleAsm.abi0", gm, partSM2},
		{"github.com/gmproxy/gmproxy/internal/sm2sign.(*Key).Sign", gm, partSM2},
		{"github.com/emmansun/gmsm/internal/bigmod.(*Nat).montgomeryMul", gm, partSM2},
		{"github.com/emmansun/gmsm/internal/sm3.blockAVX2.abi0", gm, partSM3},
		{"github.com/gmproxy/gmproxy/internal/sm3state.(*Compressor).Compress", gm, partSM3},
		{"github.com/emmansun/gmsm/internal/sm4.gcmSm4Enc.abi0", gm, partSM4},
		{"github.com/gmproxy/gmproxy/tlcp.(*halfConn).decrypt", gm, partTLS},
		{"github.com/gmproxy/gmproxy/internal/record.(*Reader).fill", gm, partTLS},
		{"golang.org/x/crypto/cryptobyte.(*String).readLengthPrefixed", gm, partTLS},
		{"crypto/x509.parseCertificate", gm, partTLS},
		{"github.com/gmproxy/gmproxy/proxy.(*h1Conn).roundTrip", gm, partHTTP},
		{"github.com/gmproxy/gmproxy/internal/h1head.(*fields).count", gm, partHTTP},
		{"bufio.(*Reader).fill", gm, partHTTP},
		{"github.com/prometheus/client_golang/prometheus.(*histogram).findBucket", gm, partHTTP},
		{"runtime.mallocgcSmallNoscan", gm, partRuntime},
		{"internal/runtime/maps.(*Map).getWithoutKeySmallFastStr", gm, partRuntime},
		{"aeshashbody", gm, partRuntime},
		{"internal/runtime/syscall/linux.Syscall6", gm, partStubs},
		{"syscall.RawSyscall6", gm, partStubs},
		{"__vdso_clock_gettime", "[vdso]", partStubs},
		{"[unknown]", "[vdso]", partStubs},
		{"[unknown]", "[unknown]", partOther},
		// Tengine with Tongsuo linked in, and glibc
		{"ecp_sm2p256_mul_mont", ng, partSM2},
		{"smallfelem_square", ng, partSM2},
		{"point_double", ng, partSM2}, // ec_sm2p_64_gcc_128's curve arithmetic
		{"batch_mul", ng, partSM2},
		{"BN_mod_inverse", ng, partSM2},
		{"ossl_sm3_block_data_order", ng, partSM3},
		{"ossl_sm4_encrypt", ng, partSM4},
		{"gcm_ghash_avx", ng, partSM4},
		{"CRYPTO_gcm128_encrypt", ng, partSM4},
		{"OPENSSL_cleanse", ng, partTLS},
		{"do_ssl3_write", ng, partTLS},
		{"state_machine_ntls", ng, partTLS},
		{"asn1_item_embed_d2i.isra.0", ng, partTLS},
		{"ngx_epoll_process_events", ng, partHTTP},
		{"ngx_http_parse_header_line", ng, partHTTP},
		{"malloc", libc, partRuntime},
		{"__memmove_avx512_unaligned_erms", libc, partRuntime},
		{"cfree@GLIBC_2.2.5", libc, partRuntime},
		{"read", libc, partStubs},
		{"__GI___libc_write", libc, partStubs},
		{"__libc_recv", libc, partStubs},
		{"clock_gettime@@GLIBC_2.17", libc, partStubs},
		{"epoll_wait", libc, partStubs},
	} {
		if got := userPart(frame{sym: tt.sym, dso: tt.dso}); got != tt.want {
			t.Errorf("userPart(%s in %s) = %s, want %s", tt.sym, tt.dso, got, tt.want)
		}
	}
}
