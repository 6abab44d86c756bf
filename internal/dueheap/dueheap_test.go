package dueheap

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

type item struct {
	id  int
	at  time.Time
	idx int
}

func (it *item) DueAt() time.Time { return it.at }
func (it *item) HeapIndex() *int  { return &it.idx }

// Against a sorted list: after random pushes, moves and removals, the heap
// pops in due order, DueBy finds exactly the due items, and every item
// knows its place (or -1 once out).
func TestHeapMatchesASortedList(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Unix(1000, 0)
	for round := range 200 {
		var h Heap[*item]
		var all []*item
		in := map[*item]bool{}
		for range r.IntN(50) {
			it := &item{id: len(all), at: base.Add(time.Duration(r.IntN(100)) * time.Millisecond), idx: -1}
			h.Push(it)
			all = append(all, it)
			in[it] = true
		}
		for _, it := range all {
			switch r.IntN(3) {
			case 0:
				it.at = base.Add(time.Duration(r.IntN(100)) * time.Millisecond)
				if in[it] {
					h.Fix(it)
				}
			case 1:
				if h.Remove(it) != in[it] {
					t.Fatalf("round %d: Remove reported %v for an item in the heap: %v", round, !in[it], in[it])
				}
				delete(in, it)
				if it.idx != -1 {
					t.Fatalf("round %d: a removed item keeps index %d", round, it.idx)
				}
			}
		}
		now := base.Add(50 * time.Millisecond)
		var want []*item
		for it := range in {
			if !it.at.After(now) {
				want = append(want, it)
			}
		}
		byID := func(a, b *item) int { return a.id - b.id }
		got := h.DueBy(now)
		slices.SortFunc(got, byID)
		slices.SortFunc(want, byID)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: DueBy found %d items, want %d", round, len(got), len(want))
		}
		if h.Len() != len(in) || len(h.All()) != len(in) {
			t.Fatalf("round %d: %d items held, want %d", round, h.Len(), len(in))
		}
		var last time.Time
		for h.Len() > 0 {
			first, _ := h.First()
			it := h.Pop()
			if it != first || it.at.Before(last) || it.idx != -1 {
				t.Fatalf("round %d: popped %v after %v (first %v, index %d)", round, it.at, last, first.at, it.idx)
			}
			last = it.at
		}
		if _, ok := h.First(); ok {
			t.Fatalf("round %d: First of an empty heap", round)
		}
	}
}
