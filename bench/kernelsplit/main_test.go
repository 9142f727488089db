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
