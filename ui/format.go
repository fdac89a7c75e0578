package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// fmtLatency prints a pull latency the way the seed's table does (16.85s),
// keeping three significant figures for long ones.
func fmtLatency(d time.Duration) string {
	s := d.Seconds()
	switch {
	case s < 10:
		return strconv.FormatFloat(s, 'f', 2, 64) + "s"
	case s < 100:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	default:
		return strconv.FormatFloat(s, 'f', 0, 64) + "s"
	}
}

// fmtSeconds prints seconds with two decimals, as the seed's table does.
func fmtSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// fmtRunTime prints a time since t0 with its sign, so times before the
// end of warm-up read as negative.
func fmtRunTime(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign = "-"
		d = -d
	}
	if d < time.Minute {
		return "t" + sign + strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return "t" + sign + fmtClock(d)
}

// fmtClock prints an elapsed time as m:ss or h:mm:ss.
func fmtClock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	total := int64(d / time.Second)
	h, m, s := total/3600, (total/60)%60, total%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", m, s)
}

// fmtCountdown prints time left, with tenths below ten seconds because
// compressed runs (--time-scale) count down in fractions of a second.
func fmtCountdown(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) + "s"
}

// fmtSpan prints a configured duration compactly (30s, 1.5s, 2m).
func fmtSpan(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d < 2*time.Minute:
		return strings.TrimSuffix(strconv.FormatFloat(d.Seconds(), 'f', 1, 64), ".0") + "s"
	default:
		return strings.TrimSuffix(strconv.FormatFloat(d.Minutes(), 'f', 1, 64), ".0") + "m"
	}
}

// fmtUptime prints a process uptime at a glance (12s, 3m04s, 1h02m).
func fmtUptime(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int64(d/time.Minute), int64(d/time.Second)%60)
	default:
		return fmt.Sprintf("%dh%02dm", int64(d/time.Hour), int64(d/time.Minute)%60)
	}
}

// fmtPercent prints a fraction as a whole percentage.
func fmtPercent(f float64) string {
	return strconv.FormatFloat(100*f, 'f', 0, 64) + "%"
}

// fmtPids joins pids with commas.
func fmtPids(pids []int) string {
	var b strings.Builder
	for i, p := range pids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(p))
	}
	return b.String()
}
