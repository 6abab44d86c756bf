package agent

import (
	"time"

	"github.com/edge-agent/edge-agent/election"
)

// Log lines an operator reads: a planned handover is not a warning and
// says to whom and why; an election that keeps failing the same way (a
// gateway without quorum fails every backoff, about once a second) is
// logged once and then summarised.

// FailedElectionLogEvery is how often an election failure that repeats
// (same reason) is logged after its first line, with the failures left out
// as suppressed=N. A leader known again starts the count over.
const FailedElectionLogEvery = time.Minute

// Causes of a planned handover that the core reports as ReasonResigned.
const (
	causeShutdown = "shutting down"
	causeResign   = "resign requested"
	causeTransfer = "transfer requested"
	causeLapsed   = "the lease ran out before the loop renewed it, and the leader's work was stopped"
)

// repeatLog decides which of a repeating line's occurrences are written:
// the first of each key, then one every every, carrying how many were left
// out. Its keys are a small fixed set (reasons). Only the loop uses it.
type repeatLog struct {
	every time.Duration
	last  map[string]time.Duration
	count map[string]int
}

func newRepeatLog(every time.Duration) *repeatLog {
	return &repeatLog{every: every, last: map[string]time.Duration{}, count: map[string]int{}}
}

// allow reports whether the line of key may be written at now, and how
// many of its lines were left out before it.
func (r *repeatLog) allow(key string, now time.Duration) (ok bool, suppressed int) {
	if last, seen := r.last[key]; seen && now-last < r.every {
		r.count[key]++
		return false, 0
	}
	suppressed = r.count[key]
	r.last[key], r.count[key] = now, 0
	return true, suppressed
}

// reset forgets every key: the next line of each is written at once.
func (r *repeatLog) reset() {
	clear(r.last)
	clear(r.count)
}

// resignNominee returns the nominee of the RESIGN among ms ("" when none
// is named).
func resignNominee(ms []election.Message) string {
	for _, m := range ms {
		if m.Type == election.MsgResign {
			return m.Nominee
		}
	}
	return ""
}

// handoverWords says a planned step-down in words: to whom and why
// ("handing over to gw1: hold-down preemption").
func handoverWords(reason election.Reason, nominee, cause string) string {
	why := cause
	if reason == election.ReasonPreempted {
		why = "hold-down preemption"
	}
	if why == "" {
		why = "resign requested"
	}
	if nominee == "" {
		return "handing over (no member acknowledged lately to name as successor): " + why
	}
	return "handing over to " + nominee + ": " + why
}

// isHandover tells whether a step-down reason is a planned handover.
func isHandover(r election.Reason) bool {
	return r == election.ReasonResigned || r == election.ReasonPreempted
}
