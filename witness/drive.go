package witness

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-agent/edge-agent/agent"
	"github.com/edge-agent/edge-agent/internal/dueheap"
)

// Shards is how many goroutines step a witness host's agents. A goroutine
// per group kept a thousand stacks at a thousand groups (17 MB) and woke one
// for every message; one goroutine for all would make every group wait
// while one group's vote is made durable (an fsync: a few milliseconds, at
// times tens), and a site's failover needs that vote. With 32 a group waits
// for the fsyncs of its own shard only: a thirty-second of the groups, as
// when every site elects at once after the witness's connection came back.
const Shards = 32

// shard steps its groups' agents on one goroutine: each when its wake
// function was called (an input or a request waits) and when its deadline
// (agent.Driven.Due) comes.
type shard struct {
	groups []*driven             // its agents, in the order taken
	ready  chan *driven          // woken agents, each at most once (driven.pending)
	due    dueheap.Heap[*driven] // every live agent, by deadline
}

// driven is one group's agent on its shard.
type driven struct {
	group   string
	a       *agent.Agent // built with agent.DrivenBy(wake)
	d       *agent.Driven
	sh      *shard
	pending atomic.Bool // in sh.ready
	at      time.Time   // d.Due() as of its last step
	idx     int         // in sh.due; -1 while not in it (not started, or failed)
}

func newShards(groups int) []*shard {
	n := max(min(groups, Shards), 1)
	out := make([]*shard, n)
	for i := range out {
		// Room for every group of the shard: wake never blocks.
		out[i] = &shard{ready: make(chan *driven, groups/n+1)}
	}
	return out
}

// take makes dr one of the shard's agents.
func (sh *shard) take(dr *driven) {
	dr.sh = sh
	sh.groups = append(sh.groups, dr)
}

// wake queues the agent on its shard, unless it already waits there. It
// never blocks: the channel holds every group of the shard.
func (dr *driven) wake() {
	if dr.pending.CompareAndSwap(false, true) {
		dr.sh.ready <- dr
	}
}

// start starts the shard's agents (agent.Drive), each stepped from then on.
// The shards start theirs side by side: opening an agent's bus waits for
// the server to confirm its subscriptions, a round trip each.
func (sh *shard) start(fail func(group string, err error)) {
	for _, dr := range sh.groups {
		d, err := dr.a.Drive()
		if err != nil {
			fail(dr.group, err)
			continue
		}
		dr.d, dr.at = d, d.Due()
		sh.due.Push(dr)
	}
}

// stop stops the shard's live agents side by side (as Run does when its
// context ends): closing a bus can wait a second for a server that is
// gone, and one after another a shard's thirty would wait half a minute.
func (sh *shard) stop() {
	var wg sync.WaitGroup
	for _, dr := range sh.due.All() {
		wg.Go(func() { _ = dr.d.Stop() })
	}
	wg.Wait()
}

// run starts the shard's agents and steps them until ctx ends, then stops
// them; fail is told of an agent that stopped with an error, which is then
// stepped no more.
func (sh *shard) run(ctx context.Context, fail func(group string, err error)) {
	sh.start(fail)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	step := func(dr *driven) {
		if dr.idx < 0 {
			return // not started, or failed
		}
		if err := dr.d.Wake(); err != nil {
			sh.due.Remove(dr) // idx -1 now
			fail(dr.group, err)
			return
		}
		dr.at = dr.d.Due()
		sh.due.Fix(dr)
	}
	for {
		if first, ok := sh.due.First(); ok {
			timer.Reset(max(time.Until(first.at), 0))
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			// As Run's error once its context ended, Stop's is not a
			// group's failure: a witness hands nothing over.
			sh.stop()
			return
		case dr := <-sh.ready:
			// Cleared first: an input that arrives while the agent is
			// stepped queues it again.
			dr.pending.Store(false)
			step(dr)
		case <-timer.C:
		}
		// Every agent whose deadline passed, once each: one stepped just
		// now has a later deadline already.
		now := time.Now()
		for _, dr := range sh.due.DueBy(now) {
			step(dr)
		}
	}
}

// DueAt and HeapIndex make an agent a dueheap.Item: due at its deadline.
func (dr *driven) DueAt() time.Time { return dr.at }
func (dr *driven) HeapIndex() *int  { return &dr.idx }
