package keyserver

import (
	"log/slog"
	"sort"
	"sync"
	"time"
)

// audit counts operations per client and key and logs one info line per
// client and key that had any in each interval: counts, not one line per
// operation, so that the log keeps up with any rate.
type audit struct {
	mu     sync.Mutex
	counts map[auditKey]*auditCounts
	since  time.Time
}

type auditKey struct{ client, key string }

// auditCounts counts results by operation (index Op-1; a refused ping
// at OpPing-1, unknown operations last) and code.
type auditCounts [OpPing + 1][len(codeNames)]uint64

// auditOp is the index of op in auditCounts.
func auditOp(op Op) int {
	if op < OpSign || op > OpPing {
		return int(OpPing)
	}
	return int(op) - 1
}

func (a *audit) count(client, key string, op Op, code Code) {
	if int(code) >= len(codeNames) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.counts == nil {
		a.counts = map[auditKey]*auditCounts{}
		a.since = time.Now()
	}
	k := auditKey{client, key}
	c := a.counts[k]
	if c == nil {
		c = &auditCounts{}
		a.counts[k] = c
	}
	c[auditOp(op)][code]++
}

// run logs the counts every AuditInterval until the server shuts down.
func (a *audit) run(s *Server) {
	t := time.NewTicker(orDefault(s.AuditInterval, DefaultAuditInterval))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.flush(s)
		case <-s.done:
			return
		}
	}
}

// flush logs and resets the counts.
func (a *audit) flush(s *Server) {
	a.mu.Lock()
	counts, since := a.counts, a.since
	a.counts = nil
	a.mu.Unlock()
	if s.Logger == nil || len(counts) == 0 {
		return
	}
	keys := make([]auditKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].client != keys[j].client {
			return keys[i].client < keys[j].client
		}
		return keys[i].key < keys[j].key
	})
	period := time.Since(since).Round(time.Second)
	for _, k := range keys {
		attrs := []any{"client", k.client, "key", k.key, "period", period.String()}
		for op, byCode := range counts[k] {
			for code, n := range byCode {
				if n > 0 {
					// Op(OpPing+1) is unknown ("unknown").
					attrs = append(attrs, slog.Uint64(Op(op+1).String()+"."+Code(code).String(), n))
				}
			}
		}
		s.Logger.Info("key server audit", attrs...)
	}
}
