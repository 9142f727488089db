package callgate

import (
	"sync"
	"testing"
)

func TestGate(t *testing.T) {
	var g Gate
	first := g.Enter()
	second := g.Enter()
	if !first || !second {
		t.Fatal("an open gate refused a Write")
	}
	g.Leave()
	if !g.Close() {
		t.Fatal("first Close refused")
	}
	if g.Enter() {
		t.Fatal("a closed gate let a Write in")
	}
	if g.Close() {
		t.Fatal("second Close accepted")
	}
	g.Leave() // the Write entered before Close ends normally
	if g.Enter() || g.Close() {
		t.Fatal("gate reopened after the last Write left")
	}

	// Concurrent Writes and one Close: exactly one Close wins.
	var h Gate
	var wg sync.WaitGroup
	var mu sync.Mutex
	closes := 0
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if h.Enter() {
				h.Leave()
			}
		}()
		go func() {
			defer wg.Done()
			if h.Close() {
				mu.Lock()
				closes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if closes != 1 || h.Enter() {
		t.Fatalf("%d Closes won; gate open after: %v", closes, !h.Close())
	}
}
