package agent

import (
	"errors"
	"time"
)

// driveRequests is how many API requests (Resign, Transfer, Drain) wait for
// the host of a driven agent to take them; more wait in ask.
const driveRequests = 4

// Driven is an agent whose loop a host steps from goroutines of its own
// instead of the goroutine that Run keeps for each agent: a witness process
// serving a thousand groups (package witness) kept a thousand loop
// goroutines, 17 MB of stacks, and woke one of them for every message.
//
// The host calls Wake whenever the agent's wake function was called and
// when Due comes; each Wake does what the rounds of Run's loop would have
// done by then, in the same order (the inputs that arrived, each as of its
// arrival; the API requests; the deadline), so a driven agent decides
// exactly what a running one does. A host must not call Wake, Due and Stop
// concurrently, and must not block in the wake function.
type Driven struct {
	s       *stepper
	stopped bool
}

// errStopped is Wake's error after the agent stopped.
var errStopped = errors.New("agent: driven agent stopped")

// DrivenBy builds an agent that a host steps (Drive) instead of Run: wake is
// called, and must not block, whenever an input or an API request waits for
// the agent. The agent's bus must call BusHooks.Wake for each input (the
// buses of package bus and WithTransport do, through their Mailbox).
//
// A driven agent's API requests (Resign, Transfer, Drain) wait in a queue
// for the host: one whose caller gave up (its context ended) after it was
// queued is still carried out, where Run's loop would not have taken it.
func DrivenBy(wake func()) Option {
	return func(a *Agent) error {
		if wake == nil {
			return errors.New("agent: DrivenBy needs a wake function")
		}
		a.in.wake = wake
		a.in.reqs = make(chan request, driveRequests)
		return nil
	}
}

// Drive starts an agent built with DrivenBy as Run starts one before its
// loop, and returns it for its host to step. It may be called once.
func (a *Agent) Drive() (*Driven, error) {
	if a.in.wake == nil {
		return nil, errors.New("agent: Drive needs an agent built with DrivenBy")
	}
	s, err := a.start()
	if err != nil {
		return nil, err
	}
	return &Driven{s: s}, nil
}

// Wake applies what waits for the agent: the inputs that arrived, the
// requests, and its deadline if that passed. An error is what would end Run
// (a failure to persist): the agent is then stopped and released, and
// every later Wake returns an error.
func (d *Driven) Wake() error {
	if d.stopped {
		return errStopped
	}
	s := d.s
	a := s.a
	err := s.arrived()
	if err == nil {
		// One more, without waiting: a channel the bus closed has
		// nothing waiting (len is 0), and its closing woke the host.
		select {
		case in, ok := <-a.in.queued:
			if !ok {
				err = errBusClosed
			} else if err = s.input(in); err != nil {
				err = s.failed(err)
			}
		default:
		}
	}
	// Only this goroutine takes requests, so len is what waits.
	for err == nil && len(a.in.reqs) > 0 {
		if err = s.request(<-a.in.reqs); err != nil {
			err = s.failed(err)
		}
	}
	if err == nil && a.mono() >= s.due {
		if err = s.timer(); err != nil {
			err = s.failed(err)
		}
	}
	if err != nil {
		d.stopped = true
		s.close()
		return err
	}
	s.next()
	return nil
}

// Due is when the agent next has work without an input; the host calls
// Wake then, or earlier.
func (d *Driven) Due() time.Time { return d.s.a.lease.start.Add(d.s.due) }

// Stop ends the agent as Run does when its context ends (a leader hands
// over first, but closes at once rather than waiting for its successor's
// heartbeat: a host steps many agents and a witness never leads) and
// releases what Drive opened. It returns what Run would
// return then; after a failed Wake it does nothing.
func (d *Driven) Stop() error {
	if d.stopped {
		return nil
	}
	d.stopped = true
	defer d.s.close()
	_, err := d.s.a.shutdown()
	d.s.a.log.Info("agent stopped", "term", d.s.a.Term())
	return err
}
