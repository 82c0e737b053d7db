// Package late reads a check's reply that comes after its deadline, for the
// adapters (goredis, valkey): without a goroutine per call.
//
// go-redis, and valkey-go on a connection of its pool, close a connection
// whose read hit its deadline, and the reply Redis still sends once it runs
// the command (a stopped or busy server gets to it later) would be lost with
// it, while the limiter must read it to give back what the check took. So the
// adapters' connections are wrapped here: each keeps what the library wrote
// since it last sent commands and what it read of the replies; closed after a
// read timed out while a check (DoLate) waits on it, it stays open and reads
// that check's reply on a goroutine of its own, for up to Wait, and hands it
// to the check's late function. While replies come in time no goroutine is
// started: the request's goroutine makes the call, as the library does.
package late

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Wait is how long a late reply is awaited; then the connection is closed.
const Wait = 60 * time.Second

// Conns are an adapter's connections and its checks in flight.
type Conns struct {
	mu      sync.Mutex
	wants   []*want
	reading map[*conn]bool
	closing bool
	readers sync.WaitGroup
}

// want is a check in flight: its command and what gets a late reply.
type want struct {
	args  []string
	late  func(any)
	index int // in Conns.wants
}

// Wrap makes conn one whose late replies are read.
func (s *Conns) Wrap(c net.Conn) net.Conn {
	l := &conn{Conn: c, conns: s}
	if _, ok := c.(syscall.Conn); ok {
		return syscallConn{l}
	}
	return l
}

// Do runs call, which sends args, for a check: a reply that comes after the
// call's deadline goes to late.
func (s *Conns) Do(args []string, late func(any), call func() (any, error)) (any, error) {
	w := &want{args: args, late: late}
	s.mu.Lock()
	w.index = len(s.wants)
	s.wants = append(s.wants, w)
	s.mu.Unlock()
	defer s.unwant(w)
	return call()
}

func (s *Conns) unwant(w *want) {
	s.mu.Lock()
	last := len(s.wants) - 1
	s.wants[w.index], s.wants[last].index = s.wants[last], w.index
	s.wants[last] = nil
	s.wants = s.wants[:last]
	s.mu.Unlock()
}

// Stop ends the reading of late replies (close the library's client next,
// then Wait).
func (s *Conns) Stop() {
	s.mu.Lock()
	s.closing = true
	for l := range s.reading {
		_ = l.Conn.Close()
	}
	s.mu.Unlock()
}

// Wait returns once no late reply is read or handed over.
func (s *Conns) Wait() { s.readers.Wait() }

// claim is the late function of a check in flight whose command l's last
// one is (checks of the same command are given back alike, so any of them
// serves), and how many replies l owes; nil when there is none, or the
// adapter is closing. l is then counted as reading.
func (s *Conns) claim(l *conn) (func(any), int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, 0
	}
	sent, ok := commands(l.written)
	if !ok {
		return nil, 0
	}
	for _, w := range s.wants {
		if slices.Equal(w.args, sent[len(sent)-1]) {
			if s.reading == nil {
				s.reading = map[*conn]bool{}
			}
			s.reading[l] = true
			s.readers.Add(1)
			return w.late, len(sent)
		}
	}
	return nil, 0
}

func (s *Conns) finished(l *conn) {
	s.mu.Lock()
	delete(s.reading, l)
	s.mu.Unlock()
	s.readers.Done()
}

// conn is one connection of an adapter's.
type conn struct {
	net.Conn
	conns *Conns
	// What the library wrote since it last sent commands, and read since.
	written, read []byte
	reading       bool        // the last call was Read: the next Write sends new commands
	timedOut      atomic.Bool // the last Read hit its deadline
	closed        atomic.Bool
}

// syscallConn is a conn over a connection with a file descriptor: go-redis's
// health check peeks at it before each use, as on its own.
type syscallConn struct{ *conn }

func (l syscallConn) SyscallConn() (syscall.RawConn, error) {
	return l.Conn.(syscall.Conn).SyscallConn()
}

func (l *conn) Write(b []byte) (int, error) {
	if l.reading {
		l.timedOut.Store(false)
		l.written, l.read, l.reading = reuse(l.written), reuse(l.read), false
	}
	l.written = append(l.written, b...)
	return l.Conn.Write(b)
}

func (l *conn) Read(b []byte) (int, error) {
	n, err := l.Conn.Read(b)
	l.read = append(l.read, b[:n]...)
	l.reading = true
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		l.timedOut.Store(true)
	}
	return n, err
}

// reuse is b emptied, or nil when a large command (FUNCTION LOAD) grew it:
// each connection keeps a few hundred bytes, not the Lua library.
func reuse(b []byte) []byte {
	if cap(b) > 4096 {
		return nil
	}
	return b[:0]
}

// Close closes the connection, unless a check's reply is still to come on it: then that is read first.
func (l *conn) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.timedOut.Load() {
		if late, replies := l.conns.claim(l); late != nil {
			go l.readLate(late, replies)
			return nil
		}
	}
	return l.Conn.Close()
}

// readLate reads the replies to the commands written, the check's last,
// and hands that one to late (an error reply took nothing).
func (l *conn) readLate(late func(any), replies int) {
	defer l.conns.finished(l)
	defer l.Conn.Close()
	if err := l.Conn.SetReadDeadline(time.Now().Add(Wait)); err != nil {
		return
	}
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(l.read), l.Conn))
	var reply any
	for i := 0; i < replies; i++ {
		var err error
		if reply, err = readReply(r); err != nil {
			return // no reply within Wait, or the connection lost: nothing to give back
		}
	}
	if _, failed := reply.(ratelimit.ReplyError); !failed {
		late(Normalize(reply))
	}
}
