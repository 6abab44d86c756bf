package agent

import (
	"errors"

	"github.com/nats-io/nats.go"
)

// undoStack collects what openBus must undo, in reverse order.
type undoStack []func()

func (u *undoStack) push(f func()) { *u = append(*u, f) }

func (u undoStack) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// openBus sets up everything the agent's inputs come from and its messages
// go to: the election transport (over NATS unless WithTransport gave one),
// the control subjects, the connection's handlers, the fast path (presence,
// routes) and the disconnect advisories. It returns their undo.
func (a *Agent) openBus() (undo func(), err error) {
	var u undoStack
	defer func() {
		if err != nil {
			u.run()
		}
	}()
	if a.transport == nil {
		t, err := a.natsTransport()
		if err != nil {
			return nil, err
		}
		a.transport = t
	}
	t := a.transport
	u.push(func() { _ = t.Close() })
	a.transport = a.stamped(t)
	if a.bus.nc != nil {
		stop, err := a.serveControl()
		if err != nil {
			return nil, err
		}
		u.push(stop)
		u.push(a.watchConnection())
	}
	u.push(a.startFastPath())
	if a.bus.sys != nil && !a.fast.noFast {
		stop, err := a.subscribeAdvisories()
		if err != nil {
			return nil, err
		}
		u.push(stop)
	}
	return u.run, nil
}

// natsTransport builds the election transport over the agent's NATS
// connection.
func (a *Agent) natsTransport() (Transport, error) {
	if a.bus.nc == nil {
		return nil, errors.New("agent: no transport: use WithNATS or WithTransport")
	}
	members := make([]string, len(a.cfg.Members))
	for i, m := range a.cfg.Members {
		members[i] = m.ID
	}
	signing, err := a.signing()
	if err != nil {
		return nil, err
	}
	return NewNATSTransport(a.bus.nc, NATSTransportConfig{
		Prefix: a.cfg.SubjectPrefix, Group: a.cfg.Group, Self: a.cfg.ID, Members: members,
		Hooks:     Hooks{OnBad: a.m.badMessage, OnMessage: a.m.message},
		Signing:   signing,
		Heartbeat: a.cfg.Heartbeat,
	})
}

// watchConnection makes a drop of the election connection wake the loop,
// and logs its reconnections and asynchronous errors. It returns the undo.
func (a *Agent) watchConnection() func() {
	prevDisc, prevRecon := a.bus.nc.DisconnectErrHandler(), a.bus.nc.ReconnectHandler()
	a.bus.nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		a.wakeOnDisconnect()
		a.log.Warn("NATS disconnected", "err", err)
		if prevDisc != nil {
			prevDisc(c, err)
		}
	})
	a.bus.nc.SetReconnectHandler(func(c *nats.Conn) {
		a.log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted())
		if prevRecon != nil {
			prevRecon(c)
		}
	})
	// Asynchronous errors (a permissions violation, a slow consumer) go to
	// the log, not to stderr line by line as nats.go would: others can
	// provoke them at will, and the log handler can rate-limit them
	// (edge.LimitedHandler does in the binary).
	prevErr := a.bus.nc.ErrorHandler()
	a.bus.nc.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if sub != nil {
			a.log.Warn("NATS error", "subject", sub.Subject, "err", err)
		} else {
			a.log.Warn("NATS error", "err", err)
		}
	})
	return func() {
		a.bus.nc.SetErrorHandler(prevErr)
		a.bus.nc.SetReconnectHandler(prevRecon)
		a.bus.nc.SetDisconnectErrHandler(prevDisc)
	}
}
