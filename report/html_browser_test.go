package report

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

var (
	htmlPageFlag = flag.String("page", "", "TestReportHTMLInChromium: check this report.html (with its report.json beside it) instead of the fixture's")
	htmlShotFlag = flag.String("screenshot", "", "TestReportHTMLInChromium: write a PNG of the page, hovering a pull, to this file")
)

// The browser's window: wide enough for two charts side by side.
const (
	viewWidth  = 1400
	viewHeight = 1560
)

// TestReportHTMLInChromium opens report.html of a two-arm slice (the
// fixture's: main and fixed × stall and remove) in headless Chromium and
// checks what a reader sees: no console message, exception or request, the
// seed's and the times table with report.md's cells, every check with its
// message, every chart drawn, a hover over a plotted pull showing that
// pull's details (a failed one with a hostile error, shown as text, and one
// that never ended), and the wheel zooming a row's charts together.
func TestReportHTMLInChromium(t *testing.T) {
	bin := chromiumPath(t)
	var (
		pagePath string
		rows     []Row
	)
	if *htmlPageFlag == "" {
		runs := htmlSlice(t)
		dir := t.TempDir()
		if err := WriteAll(dir, runs); err != nil {
			t.Fatal(err)
		}
		pagePath, rows = filepath.Join(dir, FileHTML), Rows(runs)
	} else {
		var err error
		if pagePath, err = filepath.Abs(*htmlPageFlag); err != nil {
			t.Fatal(err)
		}
		rows = rowsBeside(t, pagePath)
	}
	b := openPage(t, bin, pagePath)

	st := evaluate[pageState](t, b.ctx, pageStateJS)
	if len(st.Rows) != len(rows) {
		t.Fatalf("%d row sections, want %d", len(st.Rows), len(rows))
	}
	if len(st.Seed) != len(rows) || len(st.Times) != len(rows) {
		t.Fatalf("seed table %d rows, times table %d, want %d each", len(st.Seed), len(st.Times), len(rows))
	}
	times := timesCells(rows, manyModes(rows))
	for i, r := range rows {
		if got, want := strings.Join(st.Seed[i], " | "), strings.Join(r.cells(manyModes(rows)), " | "); got != want {
			t.Errorf("seed table row %d shows %q, want report.md's %q", i, got, want)
		}
		if got, want := strings.Join(st.Times[i], " | "), strings.Join(times[i], " | "); got != want {
			t.Errorf("times table row %d shows %q, want %q", i, got, want)
		}
		sec := st.Rows[i]
		if !strings.HasPrefix(sec.Title, r.Arm+" / "+r.Case) {
			t.Errorf("row section %d is titled %q, want %s / %s", i, sec.Title, r.Arm, r.Case)
		}
		if len(sec.Checks) != len(r.Checks) {
			t.Errorf("%s/%s shows %d checks, want %d", r.Arm, r.Case, len(sec.Checks), len(r.Checks))
		} else {
			for k, c := range r.Checks {
				result := map[bool]string{true: "pass", false: "FAIL"}[c.Passed]
				if got := sec.Checks[k]; strings.Join(got, " | ") != c.Name+" | "+result+" | "+c.Detail {
					t.Errorf("%s/%s check %d shows %q, want %s | %s | %s", r.Arm, r.Case, k, got, c.Name, result, c.Detail)
				}
			}
		}
		latency := 0
		for _, c := range sec.Charts {
			if !c.Drawn || c.Width < 300 || c.Height < 200 {
				t.Errorf("%s/%s: chart %s (%s) not drawn: %+v", r.Arm, r.Case, c.ID, c.Kind, c)
			}
			if c.Kind == "latency" {
				latency++
			}
		}
		if latency == 0 {
			t.Errorf("%s/%s has no latency chart", r.Arm, r.Case)
		}
	}
	// A slice with --sweep (-page of one) has its charts against the
	// setting drawn too; the fixture has none.
	if want := len(sweepCharts(make([]Run, len(rows)), rows)); len(st.Sweeps) != want {
		t.Errorf("%d sweep charts, want %d", len(st.Sweeps), want)
	}
	for _, c := range st.Sweeps {
		if !c.Drawn {
			t.Errorf("sweep chart %s not drawn", c.ID)
		}
	}
	if st.Pwned != "" || st.Injected != 0 {
		t.Errorf("content from the events ran as markup: window.__pwned=%q, %d injected elements", st.Pwned, st.Injected)
	}
	defer func() {
		// Tooltips are built on hover: look again once they were.
		st := evaluate[pageState](t, b.ctx, pageStateJS)
		if st.Pwned != "" || st.Injected != 0 {
			t.Errorf("content from the events ran as markup in a tooltip: window.__pwned=%q, %d injected elements", st.Pwned, st.Injected)
		}
	}()

	// Hover pulls and read their tooltips.
	data := evaluate[pageData](t, b.ctx, `JSON.parse(document.getElementById('p2pfault-data').textContent)`)
	for _, h := range hoversOf(t, data) {
		trial, tip := b.hover(t, h)
		want := h.want
		if trial != h.trial { // a neighbour on the same pixel (h.near)
			want = pullWants(pullOf(t, data, h.row, trial))
		}
		for _, w := range want {
			if !strings.Contains(tip, w) {
				t.Errorf("tooltip of %s pull %d lacks %q:\n%s", h.row, trial, w, tip)
			}
		}
	}
	if *htmlShotFlag != "" {
		png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*htmlShotFlag, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", *htmlShotFlag, len(png))
	}

	// The wheel over a chart zooms its time axis and the row's other
	// charts with it; a drag then pans.
	b.zoomAndPan(t, data.Rows[0])

	b.assertQuiet(t)
}

// chromiumPath is Debian's chromium, or the test skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (apt-get install -y chromium; .ci/run does): the browser test of report.html is skipped")
	return ""
}

// rowsBeside reads the rows of the report.json next to page.
func rowsBeside(t *testing.T, page string) []Row {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(page), FileJSON))
	if err != nil {
		t.Fatalf("-page needs its report.json beside it: %v", err)
	}
	var doc struct {
		Rows []Row `json:"rows"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", FileJSON, err)
	}
	return doc.Rows
}

type browser struct {
	ctx context.Context

	mu    sync.Mutex
	noise []string // console messages, exceptions, log entries, requests
}

// openPage starts Chromium with the flags of a closed network, loads page
// and waits for its charts. The browser is ended when the test ends
// (chromedp kills it by its pid, and any process still running with its
// user data directory); the test fails if it is still alive then.
func openPage(t *testing.T, bin, page string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(viewWidth, viewHeight),
		// No UserDataDir: chromedp gives each browser a fresh one of its
		// own and removes it after.
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	b := &browser{ctx: ctx}
	t.Cleanup(func() {
		var pid int
		if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
			pid = c.Browser.Process().Pid
		}
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		if pid > 0 {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("chromium (pid %d) still ran after the test", pid)
			}
		}
	})
	if err := chromedp.Listen(ctx, b.listen); err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "file", Path: page}
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(viewWidth, viewHeight),
		chromedp.Navigate(u.String()),
	); err != nil {
		t.Fatalf("open %s in chromium: %v", page, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.documentElement.dataset.chartsDrawn !== undefined`,
		chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.assertQuiet(t)
		t.Fatalf("the page's charts were not drawn in 30 s: %v", err)
	}
	return b
}

// listen records everything the page says or asks for besides the page
// itself: a console message of any level, an exception, a browser log
// entry (a failed load, a violation) or a request for anything but the
// file.
func (b *browser) listen(ev any) {
	var s string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		var args []string
		for _, a := range ev.Args {
			args = append(args, string(a.Value)+a.Description)
		}
		s = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		s = "exception: " + d.Text
		if d.Exception != nil {
			s += " " + d.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		s = fmt.Sprintf("log %s %s: %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
	case *network.EventRequestWillBeSent:
		if strings.HasPrefix(ev.Request.URL, "file://") {
			return
		}
		s = "request: " + ev.Request.URL
	default:
		return
	}
	b.mu.Lock()
	b.noise = append(b.noise, s)
	b.mu.Unlock()
}

func (b *browser) assertQuiet(t *testing.T) {
	t.Helper()
	// A command's reply comes after every event sent before it.
	_ = evaluate[int](t, b.ctx, `1`)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.noise {
		t.Errorf("the page was not quiet: %s", s)
	}
}

type pageState struct {
	Seed  [][]string `json:"seed"`
	Times [][]string `json:"times"`
	Rows  []struct {
		ID     string     `json:"id"`
		Title  string     `json:"title"`
		Checks [][]string `json:"checks"`
		Charts []struct {
			ID     string  `json:"id"`
			Kind   string  `json:"kind"`
			Drawn  bool    `json:"drawn"`
			Width  float64 `json:"w"`
			Height float64 `json:"h"`
		} `json:"charts"`
	} `json:"rows"`
	// Sweeps are the charts against a swept setting (drawn as the rows').
	Sweeps []struct {
		ID    string `json:"id"`
		Drawn bool   `json:"drawn"`
	} `json:"sweeps"`
	Pwned    string `json:"pwned"`
	Injected int    `json:"injected"`
}

const pageStateJS = `(() => {
  const text = (el) => el.textContent.trim();
  const cells = (tr) => [...tr.children].map(text);
  const table = (id) => [...document.querySelectorAll('#table-' + id + ' tbody tr')].map(cells);
  return {
    seed: table('seed'),
    times: table('times'),
    rows: [...document.querySelectorAll('section.row')].map((s) => ({
      id: s.id,
      title: text(s.querySelector('h2')),
      checks: [...s.querySelectorAll('table.checks tbody tr')].map(cells),
      charts: [...s.querySelectorAll('.chart')].map((el) => ({
        id: el.id, kind: el.dataset.kind,
        drawn: !!echarts.getInstanceByDom(el) && !!el.querySelector('canvas'),
        w: el.clientWidth, h: el.clientHeight,
      })),
    })),
    sweeps: [...document.querySelectorAll('section.sweeps .chart')].map((el) => ({
      id: el.id, drawn: !!echarts.getInstanceByDom(el) && !!el.querySelector('canvas'),
    })),
    pwned: window.__pwned === undefined ? '' : String(window.__pwned),
    injected: document.querySelectorAll('#pwned').length,
  };
})()`

// A pull to hover and what its tooltip must say; near: a neighbour on
// the same pixel may show instead (a real run's dense points).
type hover struct {
	row   string
	trial int64
	near  bool
	want  []string
}

// pullWants is what a pull's tooltip must say, from the page's data.
func pullWants(p chartPull) []string {
	return []string{
		fmt.Sprintf("pull %d", p.Trial), fmt.Sprintf("source-%d", p.Source), p.State,
		fmt.Sprintf("start%.3f s", p.Start), fmt.Sprintf("%.3f s", p.Latency), fmt.Sprintf("status%d", p.Status),
		fmt.Sprintf("%d of %d prompt tokens", p.Cached, p.Prompt),
	}
}

func pullOf(t *testing.T, data pageData, row string, trial int64) chartPull {
	t.Helper()
	for _, r := range data.Rows {
		for _, p := range r.Pulls {
			if r.ID == row && p.Trial == trial {
				return p
			}
		}
	}
	t.Fatalf("no pull %d in %s's data", trial, row)
	return chartPull{}
}

// hoversOf is the pulls to hover: with the fixture, its failed pull (a
// hostile error, which must show as text) and its pull that never ended;
// with -page, the first row's slowest pull.
func hoversOf(t *testing.T, data pageData) []hover {
	t.Helper()
	if len(data.Rows) == 0 || len(data.Rows[0].Pulls) == 0 {
		t.Fatal("the page's first row has no pulls to hover")
	}
	if *htmlPageFlag != "" {
		row := data.Rows[0]
		slow := row.Pulls[0]
		for _, p := range row.Pulls {
			if p.State != pullInFlight && p.Latency > slow.Latency {
				slow = p
			}
		}
		return []hover{{row: row.ID, trial: slow.Trial, near: true, want: pullWants(slow)}}
	}
	f, p := failedPullOf(), pendingPullOf()
	return []hover{
		{row: "row-0", trial: failedTrial, want: []string{
			fmt.Sprintf("pull %d", failedTrial), "failed", "source-0", "start21.500 s", "latency12.250 s", "status500",
			"0 of 400 prompt tokens", "error" + f.Err,
		}},
		{row: "row-0", trial: pendingTrial, want: []string{
			fmt.Sprintf("pull %d", pendingTrial), "in flight", fmt.Sprintf("start%.3f s", p.Start.Seconds()),
			"age at the last event", "(still running)", "no answer yet",
		}},
	}
}

// hover moves the mouse onto the pull's point on its latency chart and
// returns the pull whose tooltip shows and its text. Where points of a real
// run lie on each other (h.near), the tooltip may be a neighbour's: then
// that neighbour must be under the mouse too, within 4 px.
func (b *browser) hover(t *testing.T, h hover) (int64, string) {
	t.Helper()
	type point struct{ X, Y float64 }
	pixel := func(trial int64) point {
		return evaluate[point](t, b.ctx, fmt.Sprintf(`((rowID, trial) => {
  const data = JSON.parse(document.getElementById('p2pfault-data').textContent);
  const row = data.rows.find((r) => r.id === rowID);
  const p = row.pulls.find((q) => q.trial === trial);
  const el = document.getElementById(rowID + '-latency-' + p.source);
  el.scrollIntoView({ block: 'nearest' });
  const px = echarts.getInstanceByDom(el).convertToPixel({ xAxisIndex: 0, yAxisIndex: 0 }, [p.start_s, p.latency_s]);
  const r = el.getBoundingClientRect();
  return { X: r.left + px[0], Y: r.top + px[1] };
})(%q, %d)`, h.row, trial))
	}
	at := pixel(h.trial)
	if err := chromedp.Do(b.ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X-30, at.Y-30),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X, at.Y),
	); err != nil {
		t.Fatal(err)
	}
	type shown struct {
		Trial int64  `json:"trial"`
		Text  string `json:"text"`
	}
	tip, err := chromedp.Run(b.ctx, chromedp.Poll[shown](`(() => {
  const e = [...document.querySelectorAll('.pull-tip')].find((e) => e.offsetParent !== null);
  return e ? { trial: +e.dataset.trial, text: e.innerText.replace(/\t/g, '') } : false;
})()`, chromedp.WithPollingTimeout(10*time.Second)))
	if err == nil && tip.Trial != h.trial && !h.near {
		err = fmt.Errorf("the tooltip is pull %d's", tip.Trial)
	}
	if err != nil {
		other := evaluate[string](t, b.ctx, `[...document.querySelectorAll('.tip')].map((e) => e.outerHTML + ' visible=' + (e.offsetParent !== null)).join('\n')`)
		t.Logf("tooltips in the page: %s", other)
		t.Fatalf("no tooltip of %s pull %d after hovering (%.0f, %.0f): %v", h.row, h.trial, at.X, at.Y, err)
	}
	if tip.Trial != h.trial {
		if o := pixel(tip.Trial); absDiff(o.X, at.X) > 4 || absDiff(o.Y, at.Y) > 4 {
			t.Fatalf("hovering %s pull %d at (%.0f, %.0f) shows pull %d, at (%.0f, %.0f)", h.row, h.trial, at.X, at.Y, tip.Trial, o.X, o.Y)
		}
	}
	return tip.Trial, tip.Text
}

// zoomAndPan turns the wheel over the row's first latency chart and drags
// it, and checks the x zoom of every chart of the row.
func (b *browser) zoomAndPan(t *testing.T, row chartRow) {
	t.Helper()
	type zoom struct {
		Start, End float64
	}
	zooms := func() []zoom {
		return evaluate[[]zoom](t, b.ctx, fmt.Sprintf(`[...document.querySelectorAll('#%s .chart')].map((el) => {
  const dz = echarts.getInstanceByDom(el).getOption().dataZoom[0];
  return { Start: dz.start, End: dz.end };
})`, row.ID))
	}
	type point struct{ X, Y float64 }
	at := evaluate[point](t, b.ctx, fmt.Sprintf(`(() => {
  const el = document.querySelector('#%s .chart');
  el.scrollIntoView({ block: 'nearest' });
  const r = el.getBoundingClientRect();
  return { X: r.left + r.width / 2, Y: r.top + r.height / 2 };
})()`, row.ID))
	if err := chromedp.Do(b.ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X, at.Y),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseWheel, at.X, at.Y, func(p *input.DispatchMouseEventParams) {
			// Chromium wants deltaX too, and cdproto leaves a zero out.
			p.DeltaX, p.DeltaY = 1e-6, -400
		}),
	); err != nil {
		t.Fatal(err)
	}
	var zoomed []zoom
	deadline := time.Now().Add(10 * time.Second)
	for {
		zoomed = zooms()
		all := len(zoomed) > 0
		for _, z := range zoomed {
			all = all && z.End-z.Start < 99
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the wheel, the charts of %s show %+v, want every one zoomed in", row.ID, zoomed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := func(p *input.DispatchMouseEventParams) { p.Button, p.Buttons = input.MouseButtonLeft, 1 }
	if err := chromedp.Do(b.ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, at.X, at.Y, held, chromedp.ClickCount(1)),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X-60, at.Y, held),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, at.X-120, at.Y, held),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, at.X-120, at.Y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	); err != nil {
		t.Fatal(err)
	}
	for {
		panned := zooms()
		moved := len(panned) == len(zoomed)
		for i, z := range panned {
			moved = moved && z.Start > zoomed[i].Start+0.5 && absDiff(z.End-z.Start, zoomed[i].End-zoomed[i].Start) < 0.5
		}
		if moved {
			return
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("after dragging left, the charts of %s show %+v (zoomed: %+v), want each moved later by the same span", row.ID, panned, zoomed)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func absDiff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

func evaluate[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate in the page: %v\n%.300s", err, js)
	}
	return v
}
