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
	if first, writing := g.Close(); !first || !writing {
		t.Fatalf("first Close with a Write under way: first %v, writing %v", first, writing)
	}
	if g.Enter() {
		t.Fatal("a closed gate let a Write in")
	}
	if first, _ := g.Close(); first {
		t.Fatal("second Close accepted")
	}
	g.Leave() // the Write entered before Close ends normally
	if first, writing := g.Close(); g.Enter() || first || writing {
		t.Fatalf("gate reopened after the last Write left (Close: first %v, writing %v)", first, writing)
	}
	var idle Gate
	if first, writing := idle.Close(); !first || writing {
		t.Fatalf("Close with no Write: first %v, writing %v", first, writing)
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
			if first, _ := h.Close(); first {
				mu.Lock()
				closes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if closes != 1 || h.Enter() {
		t.Fatalf("%d Closes won; gate open after", closes)
	}
}
