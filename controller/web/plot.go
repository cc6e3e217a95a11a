package web

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Series is one line of a chart; a NaN value leaves a gap.
type Series struct {
	Name  string
	Class string // the line's CSS class (its colour)
	T     []time.Time
	V     []float64
}

// Chart is an SVG line chart, laid out here and drawn by the chart
// template: no script, no external asset.
type Chart struct {
	Title, YLabel string
	W, H          int
	// Plot area.
	X0, Y0, X1, Y1 float64
	Lines          []Line
	XTicks, YTicks []Tick
	// The legend, right of the plot: a stroke from LegendX to LegendX2,
	// the name at LegendText.
	LegendX, LegendX2, LegendText float64
	Empty                         bool
}

// Line is one series' polylines (one per stretch without gaps), and
// dots for the stretches of a single point.
type Line struct {
	Name, Class string
	Paths       []string // "x,y x,y ..."
	Dots        []Dot
	LegendY     float64
}

// Dot is a point on its own.
type Dot struct{ X, Y float64 }

// Tick is an axis mark.
type Tick struct {
	Pos   float64
	Label string
}

const (
	chartW, chartH = 760, 240
	padL, padR     = 56, 130
	padT, padB     = 16, 34
)

// newChart lays out series over their common time span; the y axis goes
// from yMin to yMax, or from 0 to the data's top when yMax is NaN.
func newChart(title, ylabel string, series []Series, yMin, yMax float64) Chart {
	c := Chart{Title: title, YLabel: ylabel, W: chartW, H: chartH,
		X0: padL, Y0: padT, X1: chartW - padR, Y1: chartH - padB}
	c.LegendX, c.LegendX2, c.LegendText = c.X1+12, c.X1+32, c.X1+38
	// The time axis spans every sample, with a value or not, so charts
	// of one page line up.
	var t0, t1 time.Time
	top := 0.0
	n := 0
	for _, s := range series {
		for i, v := range s.V {
			if t0.IsZero() || s.T[i].Before(t0) {
				t0 = s.T[i]
			}
			if s.T[i].After(t1) {
				t1 = s.T[i]
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			n++
			top = max(top, v)
		}
	}
	if n == 0 {
		c.Empty = true
		return c
	}
	if math.IsNaN(yMax) {
		yMax = niceTop(top)
	}
	if yMax <= yMin {
		yMax = yMin + 1
	}
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Second
		t0 = t0.Add(-span)
	}
	x := func(t time.Time) float64 { return c.X0 + (c.X1-c.X0)*float64(t.Sub(t0))/float64(span) }
	y := func(v float64) float64 { return c.Y1 - (c.Y1-c.Y0)*(v-yMin)/(yMax-yMin) }
	for k, s := range series {
		ln := Line{Name: s.Name, Class: s.Class, LegendY: c.Y0 + 14 + 18*float64(k)}
		var b strings.Builder
		var pts int
		var last Dot
		flush := func() {
			switch {
			case pts == 1: // a line of one point is invisible
				ln.Dots = append(ln.Dots, last)
			case pts > 1:
				ln.Paths = append(ln.Paths, b.String())
			}
			b.Reset()
			pts = 0
		}
		for i, v := range s.V {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				flush()
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			last = Dot{X: x(s.T[i]), Y: y(min(max(v, yMin), yMax))}
			fmt.Fprintf(&b, "%.1f,%.1f", last.X, last.Y)
			pts++
		}
		flush()
		c.Lines = append(c.Lines, ln)
	}
	for i := 0; i <= 4; i++ {
		v := yMin + (yMax-yMin)*float64(i)/4
		c.YTicks = append(c.YTicks, Tick{Pos: y(v), Label: trimFloat(v)})
	}
	layout := "15:04"
	if span > 24*time.Hour {
		layout = "Jan 2 15:04"
	} else if span < 5*time.Minute {
		layout = "15:04:05"
	}
	for i := 0; i <= 4; i++ {
		t := t0.Add(time.Duration(float64(span) * float64(i) / 4))
		c.XTicks = append(c.XTicks, Tick{Pos: x(t), Label: t.Local().Format(layout)})
	}
	return c
}

// niceTop rounds a maximum up to 1, 2 or 5 times a power of ten.
func niceTop(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
