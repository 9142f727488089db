package memfile

import (
	"strconv"
	"testing"
)

// TestCreateMap: a file made by Create carries its header, maps shared
// (a write through one mapping is seen through another), and its size
// can neither shrink nor grow.
func TestCreateMap(t *testing.T) {
	f, err := Create("memfile-test", 8192, 16, func(mem []byte) { copy(mem, "header") })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := Descriptor(strconv.Itoa(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Size(fd); err != nil || n != 8192 {
		t.Fatalf("Size %d, %v; want 8192", n, err)
	}
	a, err := Map(fd, 8192, true)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(a)
	b, err := Map(fd, 8192, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if string(a[:6]) != "header" {
		t.Fatalf("header %q", a[:6])
	}
	a[8000] = 7
	if b[8000] != 7 {
		t.Error("a write through one mapping not seen through the other")
	}
	if err := f.Truncate(4096); err == nil {
		t.Error("the file shrank")
	}
	if err := f.Truncate(1 << 20); err == nil {
		t.Error("the file grew")
	}
	if _, err := Descriptor("-1"); err == nil {
		t.Error("a negative descriptor accepted")
	}
	if _, err := Descriptor("x"); err == nil {
		t.Error("a name accepted as a descriptor")
	}
}
