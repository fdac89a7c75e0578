// Package zmtp speaks ZMTP 3.1 (rfc.zeromq.org 23/ZMTP, 37/ZMTP) with the
// NULL mechanism over any net.Conn, and lays ROUTER and DEALER sockets on
// it with libzmq's semantics where they shape timing: heartbeats (PING
// with a TTL, PONG, a timeout that closes the connection), a DEALER's
// asynchronous connect, reconnect and queue, and a ROUTER that ignores a
// second connection with an identity it already routes. It is the wire of
// vLLM's P2P control channel (vllm/v1/kv_offload/tiering/p2p/control/zmq.py
// @13d40492: a ROUTER bound per engine, a DEALER per peer with identity
// "host:port", heartbeats 2 s / 10 s / 10 s).
//
// Written here rather than taken from github.com/go-zeromq/zmq4 (v0.17.0):
// that package speaks ZMTP 3.0 (no PING with a TTL, and it never sends a
// PING), dials synchronously with no reconnect of a lost connection, finds
// its transports in a package-level registry (one "tcp" for the process,
// so not one in-memory host per engine), and its ROUTER does not follow
// libzmq on a duplicate identity. What the sim measures hangs on exactly
// those behaviours.
//
// Every wait is on a channel, a timer or the net.Conn, and time comes only
// from package time, so the same code runs on the OS network, on package
// memnet, and inside a testing/synctest bubble. Every goroutine ends on
// Close, which is idempotent.
//
// libzmq's reconnect jitter (a random extra up to RECONNECT_IVL,
// stream_connecter_base.cpp get_new_reconnect_ivl) is left out so a seeded
// virtual run replays exactly: a DEALER redials after ReconnectIvl.
package zmtp

import (
	"errors"
	"time"

	"p2pfault/netenv"
)

// SocketType is a ZMTP socket type as its READY command names it.
type SocketType string

// The socket types this package lays out, and the ones they accept as
// peers (libzmq mechanism.cpp check_socket_type).
const (
	TypeDealer SocketType = "DEALER"
	TypeRouter SocketType = "ROUTER"
	TypeReq    SocketType = "REQ"
	TypeRep    SocketType = "REP"
)

var compatible = map[SocketType][]SocketType{
	TypeDealer: {TypeRep, TypeDealer, TypeRouter},
	TypeRouter: {TypeReq, TypeDealer, TypeRouter},
}

func accepts(local, peer SocketType) bool {
	for _, t := range compatible[local] {
		if t == peer {
			return true
		}
	}
	return false
}

// Defaults, libzmq's where it has one.
const (
	// DefaultReconnectIvl is ZMQ_RECONNECT_IVL's default.
	DefaultReconnectIvl = 100 * time.Millisecond
	// DefaultHandshakeIvl is ZMQ_HANDSHAKE_IVL's default: a connection
	// whose handshake has not finished by then is closed (a DEALER then
	// reports Disconnected and redials).
	DefaultHandshakeIvl = 30 * time.Second
	// DefaultHWM is ZMQ_SNDHWM's and ZMQ_RCVHWM's default, in messages.
	DefaultHWM = 1000
	// DefaultMaxMsgSize bounds one message (libzmq's ZMQ_MAXMSGSIZE is
	// unlimited by default; a bound keeps a bad peer from taking memory).
	DefaultMaxMsgSize = 16 << 20
)

// Options configure a connection or a socket. The zero value is libzmq's
// defaults with heartbeats off.
type Options struct {
	// Identity is sent in READY (ZMQ_IDENTITY / ROUTING_ID): a ROUTER
	// routes the peer's messages by it.
	Identity []byte
	// HeartbeatIvl: send a PING this often once the handshake is done
	// (0: never). HeartbeatTimeout: close the connection when nothing at
	// all arrives within it after a PING (0: HeartbeatIvl, as libzmq's
	// -1). HeartbeatTTL: the TTL our PINGs carry, after which the peer
	// closes if it hears nothing more (deciseconds on the wire; 0: none).
	HeartbeatIvl, HeartbeatTimeout, HeartbeatTTL time.Duration
	// HandshakeIvl bounds the handshake (0: DefaultHandshakeIvl).
	HandshakeIvl time.Duration
	// ReconnectIvl is a DEALER's wait before it redials after a failed
	// dial or a lost connection (0: DefaultReconnectIvl).
	ReconnectIvl time.Duration
	// Net is the network a DEALER dials through (nil: the OS's).
	Net netenv.Network
	// MaxMsgSize bounds one received message, all parts (0:
	// DefaultMaxMsgSize); a larger one closes the connection.
	MaxMsgSize int
	// HWM bounds the messages queued to send, per DEALER and per ROUTER
	// peer, and received (0: DefaultHWM).
	HWM int
	// Logf receives a line for every connection closed on an error and
	// every message dropped (nil: discarded).
	Logf func(format string, args ...any)
	// OnDuplicate, when set, is told the identity of a connection a
	// ROUTER ignores because another connection holds that identity (its
	// messages will be dropped): the peer's first message on it is lost.
	OnDuplicate func(identity []byte)
	// Gate, when set, is called after every timer wake-up (a heartbeat, a
	// reconnect wait): on package memnet it is the host's Wait, so a frozen
	// process's timers do nothing until it is thawed, as under SIGSTOP.
	Gate func()
}

func (o Options) withDefaults() Options {
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = o.HeartbeatIvl
	}
	if o.HandshakeIvl == 0 {
		o.HandshakeIvl = DefaultHandshakeIvl
	}
	if o.ReconnectIvl == 0 {
		o.ReconnectIvl = DefaultReconnectIvl
	}
	if o.MaxMsgSize == 0 {
		o.MaxMsgSize = DefaultMaxMsgSize
	}
	if o.HWM == 0 {
		o.HWM = DefaultHWM
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Gate == nil {
		o.Gate = func() {}
	}
	return o
}

var (
	// ErrClosed is returned by calls on a closed connection or socket.
	ErrClosed = errors.New("zmtp: closed")
	// ErrUnroutable is a ROUTER's Send to an identity it has no connection
	// for (libzmq's EHOSTUNREACH under ROUTER_MANDATORY).
	ErrUnroutable = errors.New("zmtp: no connection with that identity")
	// ErrFull is a Send over the high-water mark (libzmq's EAGAIN).
	ErrFull = errors.New("zmtp: send queue full (high-water mark)")
	// ErrHeartbeat is the reason a connection closed on a heartbeat: no
	// traffic within the timeout after a PING, or within the peer's TTL.
	ErrHeartbeat = errors.New("zmtp: heartbeat expired")
)
