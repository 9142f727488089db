package godebugenv

import (
	"slices"
	"testing"
)

func TestAdd(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
		changed  bool
	}{
		{[]string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=k=1"}, true},
		{nil, []string{"GODEBUG=k=1"}, true},
		{[]string{"GODEBUG="}, []string{"GODEBUG=k=1"}, true},
		{[]string{"GODEBUG=netdns=go", "HOME=/"}, []string{"GODEBUG=netdns=go,k=1", "HOME=/"}, true},
		{[]string{"GODEBUG=k=0"}, []string{"GODEBUG=k=0"}, false},
		{[]string{"GODEBUG=netdns=go,k=1"}, []string{"GODEBUG=netdns=go,k=1"}, false},
		// Go trims no spaces: " k=0" is not k (it would be left unset).
		{[]string{"GODEBUG=netdns=go, k=0"}, []string{"GODEBUG=netdns=go, k=0,k=1"}, true},
		{[]string{"GODEBUG=kk=0"}, []string{"GODEBUG=kk=0,k=1"}, true},
		{[]string{"GODEBUG=a=1", "GODEBUG=b=1"}, []string{"GODEBUG=a=1,k=1", "GODEBUG=b=1"}, true},
		{[]string{"GODEBUG=a=1", "GODEBUG=k=0"}, []string{"GODEBUG=a=1,k=1", "GODEBUG=k=0"}, true},
		{[]string{"XGODEBUG=k=0"}, []string{"XGODEBUG=k=0", "GODEBUG=k=1"}, true},
	} {
		in := slices.Clone(tc.in)
		got, changed := Add(in, "k", "1")
		if !slices.Equal(got, tc.want) || changed != tc.changed {
			t.Errorf("Add(%q) = %q, %v; want %q, %v", tc.in, got, changed, tc.want, tc.changed)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Add(%q) modified its argument: %q", tc.in, in)
		}
	}
}
