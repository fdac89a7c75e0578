package probe

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"
)

// addr is the address the probe names one source by: where its first
// legs go and how its pulls name it. A source replaced by an engine on
// new ports gets a new addr with the next generation (Readdress).
type addr struct {
	gen     int
	src     Source
	seedURL string // src.URL + "/v1/completions"
	peer    string // remote_host:remote_port of rank 0
	// By rank: `","remote_host":"...","remote_port":N+r}}` and
	// remote_host:remote_port, each rank's P2P port being the base + r.
	kvTails [][]byte
	peers   []string
}

func newAddr(s Source, gen int) (*addr, error) {
	host, err := json.Marshal(s.P2PHost)
	if err != nil {
		return nil, fmt.Errorf("probe: encode P2P host %q of source %d: %w", s.P2PHost, s.Index, err)
	}
	a := &addr{gen: gen, src: s, seedURL: s.URL + "/v1/completions", peer: peerOf(s, 0)}
	for r := range s.rankCount() {
		a.kvTails = append(a.kvTails, kvTail(host, s.P2PPort+r))
		a.peers = append(a.peers, peerOf(s, r))
	}
	return a, nil
}

// kvTail is the end of a pull's kv_transfer_params naming host and port.
func kvTail(host []byte, port int) []byte {
	tail := append([]byte(`","remote_host":`), host...)
	tail = append(tail, `,"remote_port":`...)
	tail = strconv.AppendInt(tail, int64(port), 10)
	return append(tail, "}}"...)
}

// via is the address a pull of rank from decoder names a's source by, and
// its kv_transfer_params' end: the source's own, or a link's (Config.Via).
func (p *Prober) via(a *addr, rank, decoder int) (string, []byte) {
	peer := a.peers[rank]
	if p.cfg.Via == nil {
		return peer, a.kvTails[rank]
	}
	v := p.cfg.Via(a.src.Index, rank, decoder, peer)
	if v == peer {
		return peer, a.kvTails[rank]
	}
	h, port, err := net.SplitHostPort(v)
	n, perr := strconv.Atoi(port)
	host, jerr := json.Marshal(h)
	if err != nil || perr != nil || jerr != nil {
		return peer, a.kvTails[rank] // not an address: the source's own
	}
	return v, kvTail(host, n)
}

// rankCount is the source's number of ranks: Ranks, or 1.
func (s Source) rankCount() int { return max(s.Ranks, 1) }

// RankOf is the rank the k-th trial of a source of n ranks is pinned to:
// they take the ranks in turn, so each rank gets an even share.
func RankOf(k int64, n int) int {
	if n <= 1 {
		return 0
	}
	return int(k % int64(n))
}

// peerOf is the P2P address a pull names rank r of s by, as a sample
// records it: rank r listens at the source's base port + r.
func peerOf(s Source, r int) string {
	return net.JoinHostPort(s.P2PHost, strconv.Itoa(s.P2PPort+r))
}

// address is source #i's address in force.
func (p *Prober) address(i int) *addr {
	p.addrMu.RLock()
	defer p.addrMu.RUnlock()
	return p.addrs[i]
}

// Switch is what Readdress did.
type Switch struct {
	At      time.Time // when the new address took over: no pull sent at or after it names another
	Prev    string    // the P2P address named before
	Peer    string    // the P2P address named from At on
	Changed bool      // false: s was the address in force, nothing changed
}

// Readdress makes the probe name source s.Index by s's URL and P2P
// address from now on: a source replaced by a new engine on new ports. A
// trial whose first leg went to the old address and whose pull was not
// sent yet sends its first leg again to the new one, so both legs of a
// trial always name one engine and no pull sent from Switch.At on names
// the old address.
func (p *Prober) Readdress(s Source) (Switch, error) {
	u, err := checkBaseURL(s.URL)
	if err != nil {
		return Switch{}, fmt.Errorf("probe: readdress source %d: URL: %w", s.Index, err)
	}
	s.URL = u
	if s.P2PHost == "" || s.P2PPort < 1 || s.P2PPort > 65535 {
		return Switch{}, fmt.Errorf("probe: readdress source %d: P2P address %s is not a host and a port in 1..65535", s.Index, peerOf(s, 0))
	}
	p.addrMu.Lock()
	defer p.addrMu.Unlock()
	for i, a := range p.addrs {
		if a.src.Index != s.Index {
			continue
		}
		if a.src == s {
			return Switch{At: time.Now(), Prev: a.peer, Peer: a.peer}, nil
		}
		na, err := newAddr(s, a.gen+1)
		if err != nil {
			return Switch{}, err
		}
		p.addrs[i] = na
		// Taken under the lock, after the store: a pull whose start is
		// taken at or after this (under the read lock) names na.
		return Switch{At: time.Now(), Prev: a.peer, Peer: na.peer, Changed: true}, nil
	}
	return Switch{}, fmt.Errorf("probe: readdress source %d: no such source", s.Index)
}

// ReaddressDecoder makes the probe send the pulls of decoder d to url from
// now on (a decoder replaced by an engine on new ports), and says whether
// that changed its URL. A pull whose start is taken after it returns goes
// to url; one already sent stays with the engine it was sent to.
func (p *Prober) ReaddressDecoder(d int, url string) (bool, error) {
	u, err := checkBaseURL(url)
	if err != nil {
		return false, fmt.Errorf("probe: readdress decoder %d: URL: %w", d, err)
	}
	p.addrMu.Lock()
	defer p.addrMu.Unlock()
	if d < 0 || d >= len(p.pullURLs) {
		return false, fmt.Errorf("probe: readdress decoder %d: the probe has %d decoders", d, len(p.pullURLs))
	}
	pull := u + "/v1/completions"
	if p.pullURLs[d] == pull {
		return false, nil
	}
	p.pullURLs[d] = pull
	return true, nil
}

// Addresses are the sources' addresses in force, in the list's order.
func (p *Prober) Addresses() []Source {
	p.addrMu.RLock()
	defer p.addrMu.RUnlock()
	out := make([]Source, len(p.addrs))
	for i, a := range p.addrs {
		out[i] = a.src
	}
	return out
}

// Peer is the P2P address a pull names s by (remote_host:remote_port), as
// event.Sample.Peer records it.
func Peer(s Source) string { return peerOf(s, 0) }
