// Package event holds the types of the event stream one fault experiment
// produces (package experiment) and its faces read: the dashboard, the
// headless printer and the report writers. It imports no other p2pfault
// package: the stream's value types (samples, fault windows, verdicts,
// engine metrics) live here and the packages that compute them (probe,
// check, scrape) depend on it, so the faces and `p2pfault report` depend
// on the stream, not on the code that runs processes or faults.
package event

import (
	"strconv"
	"strings"
	"time"
)

// Kind says which payload field of an Event is set.
type Kind string

const (
	KindRun     Kind = "run"     // first event of a run: Run
	KindPhase   Kind = "phase"   // the run entered Phase
	KindEngine  Kind = "engine"  // an engine's state, on change and once a second: Engine
	KindLog     Kind = "log"     // an engine log line worth showing (peer down, handshake timed out, ...): Log
	KindFault   Kind = "fault"   // a fault action was taken or failed: Fault
	KindWindow  Kind = "window"  // a fault window opened (End == 0) or closed: Window
	KindSamples Kind = "samples" // a batch of finished trials: Samples
	KindWarning Kind = "warning" // something the user should know: Message
	KindVerdict Kind = "verdict" // the checks, live (Final false) or at the end (Final true): Verdict
	KindEnd     Kind = "end"     // the run ended: Message says why, ExitCode how

	KindPullStart    Kind = "pull_start"   // pulls sent and not ended yet, a batch: Pulls
	KindMetrics      Kind = "metrics"      // one engine's /metrics, scraped once a second: Metrics
	KindVerification Kind = "verification" // a fault action checked on the host: Verification
	KindCondition    Kind = "condition"    // a source's condition changed: Condition
	KindAddress      Kind = "address"      // the address the probe names a source by, from now on: Address
	KindWait         Kind = "wait"         // what pulls naming a peer wait on began or ended, as the decoder's log says: Wait
	KindWire         Kind = "wire"         // a control message through a link (--link), the wire trace: Wire
	KindLink         Kind = "link"         // the links' counts, once a second while they move (--link): Links
)

// Phase of a run.
type Phase string

const (
	PhaseStarting Phase = "starting" // engines coming up
	PhaseWarmup   Phase = "warm-up"  // every source's session being handshaken
	PhaseBaseline Phase = "baseline" // t0 reached, probing, no fault yet
	PhaseFault    Phase = "fault"    // inside the fault window
	PhaseRecovery Phase = "recovery" // after the fault window
	PhaseDone     Phase = "done"
)

// Event is one fact of a run. Exactly one payload field is set, as Kind
// says. Events are written to events.jsonl as they happen, one JSON object a
// line; `p2pfault report` rebuilds every report from them.
type Event struct {
	Seq  int64         `json:"seq"`
	T    time.Duration `json:"t_ns"` // since t0 (the end of warm-up); 0 before it (Wall says when)
	Wall time.Time     `json:"wall"`
	Kind Kind          `json:"kind"`
	// Arm is the arm the event belongs to, stamped where events are
	// emitted, so one stream may carry several arms ("" in streams
	// written before it existed: the run event's arm).
	Arm string `json:"arm,omitempty"`

	Run      *RunInfo    `json:"run,omitempty"`
	Phase    Phase       `json:"phase,omitempty"`
	Engine   *EngineInfo `json:"engine,omitempty"`
	Log      *LogLine    `json:"log,omitempty"`
	Fault    *FaultInfo  `json:"fault,omitempty"`
	Window   *Window     `json:"window,omitempty"`
	Samples  []Sample    `json:"samples,omitempty"`
	Message  string      `json:"message,omitempty"`
	Verdict  *Verdict    `json:"verdict,omitempty"`
	Final    bool        `json:"final,omitempty"`
	ExitCode int         `json:"exit_code,omitempty"`

	Pulls        []PullStart    `json:"pulls,omitempty"`
	Metrics      *MetricsInfo   `json:"metrics,omitempty"`
	Verification *Verification  `json:"verification,omitempty"`
	Condition    *ConditionInfo `json:"condition,omitempty"`
	Schedule     *ScheduleInfo  `json:"schedule,omitempty"`
	// WindowVerdict is a settled window's verdict (KindWindowVerdict).
	WindowVerdict *WindowVerdict `json:"window_verdict,omitempty"`
	Address       *AddressInfo   `json:"address,omitempty"`
	Wait          *Wait          `json:"wait,omitempty"`
	Load          *LoadInfo      `json:"load,omitempty"`  // KindLoad
	Wire          *WireMsg       `json:"wire,omitempty"`  // KindWire
	Links         []LinkCounts   `json:"links,omitempty"` // KindLink
}

// MetricsInfo is one scrape of one engine's /metrics (package scrape): the
// series as read and the live rates over the scraper's rate window. A
// series the engine does not export is null.
type MetricsInfo struct {
	Engine  string  `json:"engine"`
	Reading Reading `json:"reading"`
	Live    Live    `json:"live"`
}

// RunInfo describes a run; durations are already multiplied by TimeScale.
type RunInfo struct {
	Arm  string `json:"arm"`  // "main", "fixed", or a --arm NAME (every event carries it too)
	Case string `json:"case"` // stall, kill, remove, none
	// Mode is the leg of the tier the probe's trials exercise: ModeP2P
	// (remote_kv_source) or ModePD (remote_decoder, then
	// remote_prefiller); "" in streams written before it existed is p2p.
	Mode      string  `json:"mode,omitempty"`
	Engine    string  `json:"engine"` // sim or vllm
	TimeScale float64 `json:"time_scale"`
	Sources   int     `json:"sources"`
	// SourceRanks is each source's number of data-parallel ranks, by
	// index, when any source has more than one (--source-dp, an attach
	// file's ranks); nil when every source has one.
	SourceRanks []int `json:"source_ranks,omitempty"`
	// Decoders is the number of decoders when there are several
	// (--decoders); 0 (absent) for one.
	Decoders int           `json:"decoders,omitempty"`
	Interval time.Duration `json:"interval_ns"` // between trials, per source
	FaultAt  time.Duration `json:"fault_at_ns"` // scripted fault, since t0 (0 with case none)
	FaultFor time.Duration `json:"fault_for_ns"`
	Duration time.Duration `json:"duration_ns"`       // planned measured run, since t0 (0: until quit)
	Timeline string        `json:"timeline"`          // the scripted timeline, as text
	Nemesis  string        `json:"nemesis,omitempty"` // the nemesis that drew Timeline (run --nemesis: "random"; its schedule event says how), "" when scripted
	Bounds   Bounds        `json:"bounds"`
	Model    string        `json:"model"`
	Started  time.Time     `json:"started"`
	// ContentTokens is the max_tokens of every seed and pull, greedy, whose
	// texts the content check compares (0: no content check, max_tokens 1
	// as in the seed); ContentMatch its rule, "exact" or "prefix:N"
	// (check.ParseContentRule).
	ContentTokens int    `json:"content_tokens,omitempty"`
	ContentMatch  string `json:"content_match,omitempty"`
	// Settings are the engine settings a slice's --sweep gave this row
	// (one per swept name, in the order given); absent without a sweep.
	Settings []Setting `json:"settings,omitempty"`
	// Link: the run relays its pairs through links (--link, or a link
	// kind in its timeline), so the link kinds can act on it.
	Link bool `json:"link,omitempty"`
}

// Setting is one engine setting of a run as --sweep gave it: its name
// (VLLM_P2P_HANDSHAKE_TIMEOUT_S, kv_load_failure_policy, a --sim-* flag)
// and its value as typed.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// State is an engine's process state, as the process table shows it.
type State string

// Engine states.
const (
	StateStarting   State = "starting"
	StateReady      State = "ready"
	StateStopped    State = "stopped" // SIGSTOPped (stall)
	StateExited     State = "exited"
	StateRestarting State = "restarting"
	StateRemoved    State = "removed"
	// StateUnreachable: an attached engine whose /health does not answer
	// 200 (p2pfault cannot see its process).
	StateUnreachable State = "unreachable"
)

// Role is what an engine is in the cluster.
type Role string

// Engine roles.
const (
	RoleSource  Role = "source"
	RoleDecoder Role = "decoder"
)

// EngineInfo is one engine's process state, read from /proc: the one type
// an engine's state has, from the cluster to the faces.
type EngineInfo struct {
	Name     string        `json:"name"` // source-0, source-1, decoder
	Role     Role          `json:"role"`
	Index    int           `json:"index"`
	State    State         `json:"state"`
	Pid      int           `json:"pid"`
	Sid      int           `json:"sid"`
	Members  []int         `json:"members"` // every pid in the session
	HTTPPort int           `json:"http_port"`
	P2PPort  int           `json:"p2p_port"`
	Uptime   time.Duration `json:"uptime_ns"`
	Restarts int           `json:"restarts"`
	Exit     string        `json:"exit,omitempty"` // "code 1" or "signal killed" once exited
	// StoppedRanks are the data-parallel ranks whose engine cores /proc
	// shows stopped while the rest of the engine runs (a stall of
	// source-0/rank1): State is then the engine's own (ready), since its
	// front end and sibling ranks go on, and StateText names the ranks.
	// Empty when no member is stopped or the whole engine is (State
	// stopped).
	StoppedRanks []int `json:"stopped_ranks,omitempty"`
	// An attached engine (run --attach): its URL and what its last
	// /health said ("ok" or the error). Empty for launched engines.
	URL    string `json:"url,omitempty"`
	Health string `json:"health,omitempty"`
}

// StateText is the engine's state as every face words it: State, or,
// while only some ranks' cores are stopped, which ("rank1 stopped",
// "ranks 0,2 stopped"), so one stalled rank never reads as the whole
// engine stopped.
func (i EngineInfo) StateText() string {
	switch len(i.StoppedRanks) {
	case 0:
		return string(i.State)
	case 1:
		return "rank" + strconv.Itoa(i.StoppedRanks[0]) + " " + string(StateStopped)
	}
	rs := make([]string, len(i.StoppedRanks))
	for k, r := range i.StoppedRanks {
		rs[k] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(rs, ",") + " " + string(StateStopped)
}

// LogLine is a line an engine printed.
type LogLine struct {
	Engine string `json:"engine"`
	Line   string `json:"line"`
}

// FaultInfo is a fault action on a source. Action is a fault kind's name
// (package fault: stall, resume, kill, remove, restore, ...) or
// fault.ActionReady, the restarted source answering again.
type FaultInfo struct {
	Action string `json:"action"`
	Source int    `json:"source"`
	// Target is what the action acted on when it was less than the whole
	// source: one data-parallel rank, "source-0/rank1"; "" for the source.
	Target   string        `json:"target,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"` // stall length, when known
	By       string        `json:"by"`                    // "script" or "key"
	Err      string        `json:"error,omitempty"`       // set when the action could not be taken
}

// SettingsText is settings as NAME=VALUE joined by sep ("" for none): how
// a swept row's settings name it in titles, labels and folders.
func SettingsText(settings []Setting, sep string) string {
	parts := make([]string, len(settings))
	for i, s := range settings {
		parts[i] = s.Name + "=" + s.Value
	}
	return strings.Join(parts, sep)
}

// TargetName is what f's action acted on: its Target, or its source.
func (f FaultInfo) TargetName() string { return targetName(f.Source, f.Target) }
