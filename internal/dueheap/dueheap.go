// Package dueheap orders items by the time each falls due, and keeps each
// item's position in the item itself so that it can be moved or taken out
// at once: the process's periodic tasks (package bus) and the agents a
// witness host steps (package witness).
package dueheap

import (
	"container/heap"
	"time"
)

// Item is what a Heap holds: it says when it falls due, and keeps its
// position in the heap where HeapIndex points (-1 while in none: set it so
// before the first Push).
type Item interface {
	DueAt() time.Time
	HeapIndex() *int
}

// Heap holds items by the time each falls due, the earliest first. Its zero
// value is empty and ready. It is not safe for concurrent use.
type Heap[T Item] struct{ s items[T] }

// Len is how many items the heap holds.
func (h *Heap[T]) Len() int { return len(h.s) }

// Push adds t.
func (h *Heap[T]) Push(t T) { heap.Push(&h.s, t) }

// First returns the item that falls due first, if any.
func (h *Heap[T]) First() (t T, ok bool) {
	if len(h.s) == 0 {
		return t, false
	}
	return h.s[0], true
}

// Pop takes out the item that falls due first; the heap must not be empty.
func (h *Heap[T]) Pop() T { return heap.Pop(&h.s).(T) }

// Fix puts t back in order after its due time changed.
func (h *Heap[T]) Fix(t T) { heap.Fix(&h.s, *t.HeapIndex()) }

// Remove takes t out, if it is in the heap, and reports whether it was.
func (h *Heap[T]) Remove(t T) bool {
	i := *t.HeapIndex()
	if i < 0 {
		return false
	}
	heap.Remove(&h.s, i)
	return true
}

// DueBy returns the items that fall due at or before now, in no order; they
// stay in the heap.
func (h *Heap[T]) DueBy(now time.Time) []T {
	var out []T
	var walk func(i int)
	walk = func(i int) {
		// In a heap an item falls due no earlier than its parent: a
		// subtree whose root is not due has nothing due.
		if i >= len(h.s) || h.s[i].DueAt().After(now) {
			return
		}
		out = append(out, h.s[i])
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return out
}

// All returns every item, in no order; they stay in the heap.
func (h *Heap[T]) All() []T { return append([]T(nil), h.s...) }

// items implements heap.Interface.
type items[T Item] []T

func (s items[T]) Len() int           { return len(s) }
func (s items[T]) Less(i, j int) bool { return s[i].DueAt().Before(s[j].DueAt()) }
func (s items[T]) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	*s[i].HeapIndex(), *s[j].HeapIndex() = i, j
}

func (s *items[T]) Push(x any) {
	t := x.(T)
	*t.HeapIndex() = len(*s)
	*s = append(*s, t)
}

func (s *items[T]) Pop() any {
	old := *s
	n := len(old) - 1
	t := old[n]
	var zero T
	old[n] = zero // no reference kept past the end
	*s = old[:n]
	*t.HeapIndex() = -1
	return t
}
