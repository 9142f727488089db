package redisstore

import (
	"errors"
	"strings"
	"testing"
)

// guardScan runs a stream through a replyGuard in pieces of at most step
// bytes, and says whether it was refused and where the guard ended up.
func guardScan(stream []byte, step int) (g replyGuard, err error) {
	for len(stream) > 0 && err == nil {
		n := min(step, len(stream))
		err = g.scan(stream[:n])
		stream = stream[n:]
	}
	return g, err
}

// TestReplyGuardPassesReplies: replies of the sizes and shapes Redis and
// Sentinels send (RESP2 and RESP3, nested, a value of MaxValue bytes)
// pass, read whole or a byte at a time, and the guard ends each between
// replies; what announces too much, nests too deep or is no RESP does
// not.
func TestReplyGuardPassesReplies(t *testing.T) {
	value := strings.Repeat("v", MaxValue)
	good := []string{
		"+OK\r\n",
		"-ERR unknown command\r\n:42\r\n",
		"$-1\r\n*-1\r\n$0\r\n\r\n*0\r\n",
		"$65536\r\n" + value + "\r\n",
		"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n",
		"*2\r\n*2\r\n:1\r\n*1\r\n$1\r\nx\r\n+s\r\n",
		"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n",
		">3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$3\r\nabc\r\n",
		"~2\r\n_\r\n#t\r\n,1.5\r\n(12345678901234567890\r\n=7\r\ntxt:abc\r\n!3\r\nerr\r\n",
		strings.Repeat("*1\r\n", maxDepth-1) + ":1\r\n",
	}
	for _, r := range good {
		for _, step := range []int{1, 3, len(r)} {
			g, err := guardScan([]byte(r), step)
			if err != nil {
				t.Errorf("%.40q in pieces of %d: %v", r, step, err)
			}
			if g.inLine || g.bulk != 0 || len(g.open) != 0 {
				t.Errorf("%.40q in pieces of %d: the guard ends inside a reply", r, step)
			}
		}
	}
	bad := []string{
		"$16777217\r\n",
		"$99999999999999999999999\r\n",
		"*1048577\r\n",
		"%524289\r\n",
		"*1000\r\n" + strings.Repeat("*1048\r\n", 1000),
		strings.Repeat("*1\r\n", maxDepth+1),
		"+" + strings.Repeat("x", maxLine) + "\r\n",
		"$1x\r\n",
		"|1\r\n+a\r\n+b\r\n+OK\r\n",
		"HTTP/1.1 400 Bad Request\r\n",
		"+OK\r\n\x00",
	}
	for _, r := range bad {
		for _, step := range []int{1, len(r)} {
			if _, err := guardScan([]byte(r), step); !errors.Is(err, errMalformed) {
				t.Errorf("%.40q in pieces of %d: %v, want errMalformed", r, step, err)
			}
		}
	}
}

// FuzzReplyGuard: the guard never panics, and how the stream is cut into
// reads changes nothing of what it decides.
func FuzzReplyGuard(f *testing.F) {
	f.Add([]byte("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n"), 3)
	f.Add([]byte("%1\r\n+a\r\n*2\r\n:1\r\n$-1\r\n"), 1)
	f.Add([]byte("$16777217\r\n"), 2)
	f.Fuzz(func(t *testing.T, stream []byte, step int) {
		step = 1 + abs(step)%64
		gWhole, errWhole := guardScan(stream, len(stream)+1)
		gSplit, errSplit := guardScan(stream, step)
		if (errWhole == nil) != (errSplit == nil) {
			t.Fatalf("whole: %v, in pieces of %d: %v", errWhole, step, errSplit)
		}
		if errWhole == nil && (gWhole.inLine != gSplit.inLine || gWhole.bulk != gSplit.bulk || len(gWhole.open) != len(gSplit.open)) {
			t.Fatalf("whole and in pieces of %d end in different states", step)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
