"""A vLLM P2P control-channel peer on real libzmq, driven by JSON lines.

Sets its sockets up as vllm/v1/kv_offload/tiering/p2p/control/zmq.py
(@13d40492) does: one ROUTER bound at its address; per peer a DEALER whose
identity is this peer's own "host:port", with a monitor on
EVENT_DISCONNECTED; HEARTBEAT_IVL/TIMEOUT/TTL on every socket (2000, 10000,
10000 ms unless --hb says otherwise). Closing a DEALER disables its monitor
before closing it (closing the monitor's PAIR first can wedge libzmq's I/O
thread).

Run with Debian's python3 (python3-zmq, python3-msgpack):
    /usr/bin/python3 zmqpeer.py [--bind 127.0.0.1:0] [--hb 2000,10000,10000]

stdin, one JSON object a line:
    {"cmd": "connect", "peer": "host:port"}      open the DEALER to a peer
    {"cmd": "send", "peer": "host:port", "msg": {...}}   msgpack-encode msg
    {"cmd": "send", "peer": "host:port", "raw": "hex"}   send bytes as they are
    {"cmd": "close", "peer": "host:port"}        close that DEALER
    {"cmd": "quit"}                              (or end of stdin)
In "msg", {"$bytes": "hex"} stands for a bytes value.

stdout, one JSON object a line, each with "t" (CLOCK_MONOTONIC seconds):
    {"ev": "bound", "addr": "host:port"}         first line, once bound
    {"ev": "recv", "from": "identity", "msg": ..., "raw": "hex"}
        msg is the decoded msgpack (bytes as {"$bytes": hex}), or null
    {"ev": "connecting", "peer": ...}, {"ev": "sent", "peer": ...}
    {"ev": "disconnected", "peer": ...}          the DEALER's monitor event
    {"ev": "closed", "peer": ...}, {"ev": "error", "what": ...}
"""
import argparse
import json
import os
import sys
import time

import msgpack
import zmq
import zmq.utils.monitor


def to_wire(v):
    if isinstance(v, dict):
        if set(v) == {"$bytes"}:
            return bytes.fromhex(v["$bytes"])
        return {k: to_wire(x) for k, x in v.items()}
    if isinstance(v, list):
        return [to_wire(x) for x in v]
    return v


def to_json(v):
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes": bytes(v).hex()}
    if isinstance(v, dict):
        return {(k.decode() if isinstance(k, bytes) else k): to_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return v


def say(ev, **kw):
    kw.update(ev=ev, t=time.monotonic())
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


class Peer:
    def __init__(self, bind, hb):
        self.hb = hb
        self.ctx = zmq.Context()
        self.router = self.ctx.socket(zmq.ROUTER)
        self.apply_heartbeat(self.router)
        self.router.bind(f"tcp://{bind}")
        self.local_id = self.router.getsockopt(zmq.LAST_ENDPOINT).decode().removeprefix("tcp://")
        self.dealers = {}  # peer -> (dealer, monitor)
        self.seq = 0
        self.poller = zmq.Poller()
        self.poller.register(self.router, zmq.POLLIN)
        self.poller.register(0, zmq.POLLIN)

    def apply_heartbeat(self, sock):
        ivl, timeout, ttl = self.hb
        sock.setsockopt(zmq.HEARTBEAT_IVL, ivl)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, timeout)
        sock.setsockopt(zmq.HEARTBEAT_TTL, ttl)

    def connect(self, peer):
        if peer in self.dealers:
            self.close(peer)
        dealer = self.ctx.socket(zmq.DEALER)
        self.apply_heartbeat(dealer)
        dealer.identity = self.local_id.encode()
        addr = f"inproc://p2p-monitor-{peer.replace(':', '-')}-{self.seq}"
        self.seq += 1
        dealer.monitor(addr, zmq.EVENT_DISCONNECTED)
        mon = self.ctx.socket(zmq.PAIR)
        mon.connect(addr)
        dealer.connect(f"tcp://{peer}")
        self.dealers[peer] = (dealer, mon)
        self.poller.register(mon, zmq.POLLIN)
        say("connecting", peer=peer, identity=self.local_id)

    def close(self, peer):
        dealer, mon = self.dealers.pop(peer)
        self.poller.unregister(mon)
        dealer.disable_monitor()
        mon.close(linger=0)
        dealer.close(linger=0)
        say("closed", peer=peer)

    def send(self, peer, cmd):
        if peer not in self.dealers:
            self.connect(peer)
        data = bytes.fromhex(cmd["raw"]) if "raw" in cmd else msgpack.packb(to_wire(cmd["msg"]), use_bin_type=True)
        self.dealers[peer][0].send(data)
        say("sent", peer=peer, bytes=len(data))

    def on_router(self):
        while True:
            try:
                frames = self.router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:
                say("recv", parts=[f.hex() for f in frames], msg=None)
                continue
            ident, data = frames
            try:
                msg = to_json(msgpack.unpackb(data, raw=False))
            except Exception:  # not msgpack: the raw bytes say it
                msg = None
            say("recv", **{"from": ident.decode(errors="replace"), "msg": msg, "raw": data.hex()})

    def on_monitor(self, sock):
        peer = next(p for p, (_, m) in self.dealers.items() if m is sock)
        ev = zmq.utils.monitor.recv_monitor_message(sock, zmq.NOBLOCK)
        if ev["event"] == zmq.EVENT_DISCONNECTED:
            say("disconnected", peer=peer, endpoint=ev["endpoint"].decode())

    def on_line(self, line):
        cmd = json.loads(line)
        what = cmd.get("cmd")
        if what == "connect":
            self.connect(cmd["peer"])
        elif what == "send":
            self.send(cmd["peer"], cmd)
        elif what == "close":
            self.close(cmd["peer"])
        elif what == "quit":
            return False
        else:
            say("error", what=f"unknown command {what!r}")
        return True

    def run(self):
        say("bound", addr=self.local_id)
        buf = b""
        while True:
            for sock, _ in self.poller.poll():
                if sock == 0:
                    chunk = os.read(0, 65536)
                    if not chunk:
                        return
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if line.strip():
                            try:
                                if not self.on_line(line):
                                    return
                            except (KeyError, ValueError) as e:
                                say("error", what=f"{type(e).__name__}: {e}")
                elif sock is self.router:
                    self.on_router()
                else:
                    self.on_monitor(sock)

    def shutdown(self):
        for peer in list(self.dealers):
            self.close(peer)
        self.router.close(linger=0)
        self.ctx.destroy(linger=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", default="127.0.0.1:0")
    ap.add_argument("--hb", default="2000,10000,10000", help="HEARTBEAT_IVL,TIMEOUT,TTL in ms")
    args = ap.parse_args()
    hb = [int(x) for x in args.hb.split(",")]
    p = Peer(args.bind, hb)
    try:
        p.run()
    finally:
        p.shutdown()


if __name__ == "__main__":
    main()
