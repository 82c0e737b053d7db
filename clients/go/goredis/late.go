package goredis

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

// A check's reply that comes after its deadline is read all the same.
// go-redis closes a connection whose read hit its deadline, and the reply
// Redis still sends once it runs the command (a stopped or busy server gets
// to it later) would be lost with it, while the limiter must read it to give
// back what the check took. So the limiter's connections are lateConns:
// each keeps what go-redis wrote since it last sent a command and what it
// read of the replies; closed after a read timed out on a check (DoLate),
// it stays open and reads that check's reply on a goroutine of its own, for
// up to lateWait, and hands it to the check's late function. While replies
// come in time no goroutine is started: the request's goroutine makes the
// call, as go-redis does.

// lateConn is one connection of the limiter's.
type lateConn struct {
	net.Conn
	lates *lates
	// What go-redis wrote since it last sent a command, and read since.
	written, read []byte
	reading       bool        // the last call was Read: the next Write sends new commands
	timedOut      atomic.Bool // the last Read hit its deadline
	closed        atomic.Bool
}

// syscallLateConn is a lateConn over a connection with a file descriptor:
// go-redis's health check peeks at it before each use, as on its own.
type syscallLateConn struct{ *lateConn }

func (l syscallLateConn) SyscallConn() (syscall.RawConn, error) {
	return l.Conn.(syscall.Conn).SyscallConn()
}

func (l *lateConn) Write(b []byte) (int, error) {
	if l.reading {
		l.timedOut.Store(false)
		l.written, l.read, l.reading = reuse(l.written), reuse(l.read), false
	}
	l.written = append(l.written, b...)
	return l.Conn.Write(b)
}

func (l *lateConn) Read(b []byte) (int, error) {
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
func (l *lateConn) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.timedOut.Load() {
		if late, replies := l.lates.claim(l); late != nil {
			go l.readLate(late, replies)
			return nil
		}
	}
	return l.Conn.Close()
}

// readLate reads the replies to the commands written, the check's last,
// and hands that one to late (an error reply took nothing).
func (l *lateConn) readLate(late func(any), replies int) {
	defer l.lates.finished(l)
	defer l.Conn.Close()
	if err := l.Conn.SetReadDeadline(time.Now().Add(lateWait)); err != nil {
		return
	}
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(l.read), l.Conn))
	var reply any
	for i := 0; i < replies; i++ {
		var err error
		if reply, err = readReply(r); err != nil {
			return // no reply within lateWait, or the connection lost: nothing to give back
		}
	}
	if _, failed := reply.(ratelimit.ReplyError); !failed {
		late(normalize(reply))
	}
}

// lates are a Client's checks in flight (DoLate) and its connections reading a late reply.
type lates struct {
	mu      sync.Mutex
	wants   []*want
	reading map[*lateConn]bool
	closing bool
	readers sync.WaitGroup
}

// want is a check in flight: its command and what gets a late reply.
type want struct {
	args  []string
	late  func(any)
	index int // in lates.wants
}

// wrap makes conn a lateConn.
func (s *lates) wrap(conn net.Conn) net.Conn {
	l := &lateConn{Conn: conn, lates: s}
	if _, ok := conn.(syscall.Conn); ok {
		return syscallLateConn{l}
	}
	return l
}

func (s *lates) want(args []string, late func(any)) *want {
	w := &want{args: args, late: late}
	s.mu.Lock()
	w.index = len(s.wants)
	s.wants = append(s.wants, w)
	s.mu.Unlock()
	return w
}

func (s *lates) unwant(w *want) {
	s.mu.Lock()
	last := len(s.wants) - 1
	s.wants[w.index], s.wants[last].index = s.wants[last], w.index
	s.wants[last] = nil
	s.wants = s.wants[:last]
	s.mu.Unlock()
}

// claim is the late function of a check in flight whose command l's last
// one is (checks of the same command are given back alike, so any of them
// serves), and how many replies l owes; nil when there is none, or the
// Client is closing. l is then counted as reading.
func (s *lates) claim(l *lateConn) (func(any), int) {
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
				s.reading = map[*lateConn]bool{}
			}
			s.reading[l] = true
			s.readers.Add(1)
			return w.late, len(sent)
		}
	}
	return nil, 0
}

func (s *lates) finished(l *lateConn) {
	s.mu.Lock()
	delete(s.reading, l)
	s.mu.Unlock()
	s.readers.Done()
}

// stop ends the reading of late replies (readers.Wait: until none is read or handed over).
func (s *lates) stop() {
	s.mu.Lock()
	s.closing = true
	for l := range s.reading {
		_ = l.Conn.Close()
	}
	s.mu.Unlock()
}
