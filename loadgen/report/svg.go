package report

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Palette is the stroke colour of every series the report draws, by chart
// and series. Each colour is used by exactly one chart, so a screenshot
// test can tell whether a chart was painted by counting its colours'
// pixels, and a reader can match the legend to the lines. Records/s and
// MB/s of one side share a colour: they are two panels of one chart.
var Palette = map[string]map[string]string{
	"throughput": {
		"produce": "#0b5fff",
		"consume": "#00a3a3",
	},
	"latency-distribution": {
		"publish":    "#e4572e",
		"end-to-end": "#8a2be2",
	},
	"latency-over-time": {
		"publish p99":    "#2e8b57",
		"end-to-end p99": "#c71585",
	},
	"lag": {
		"lag": "#b8860b",
	},
	"errors": {
		"produce errors": "#dc143c",
		"consume errors": "#6b8e23",
	},
	"broker-resources": {
		"broker CPU":    "#1e90ff",
		"broker memory": "#8b4513",
	},
}

// ChartNames are the data-chart attributes of the charts, in page order.
var ChartNames = []string{"throughput", "latency-distribution", "latency-over-time", "lag", "errors", "broker-resources"}

// Chart geometry, in CSS pixels. A panel is one plot area with its axes;
// a chart is one or more panels stacked in one <svg>.
const (
	chartWidth   = 1160
	panelHeight  = 300
	marginLeft   = 80
	marginRight  = 44
	marginTop    = 34
	marginBottom = 50
	strokeWidth  = 2.5
)

type point struct{ x, y float64 }

type series struct {
	name  string
	color string
	pts   []point // a NaN y breaks the line
}

type tick struct {
	v     float64
	label string
}

// panel is one plot: axes, ticks and series. xTicks nil means linear
// ticks computed from [x0, x1].
type panel struct {
	title          string
	xLabel, yLabel string
	x0, x1         float64
	y0, y1         float64
	xTicks         []tick
	yTicks         []tick
	series         []series
	noData         string // the note shown when no series has a point
}

// chart is one <svg data-chart=name>.
type chart struct {
	name   string
	title  string
	panels []panel
}

// render draws the chart as an SVG element. Every number is formatted by
// strconv and every label escaped, so the result is safe to embed.
func (c chart) render() template.HTML {
	var b strings.Builder
	h := panelHeight * len(c.panels)
	fmt.Fprintf(&b, `<svg data-chart="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		esc(c.name), chartWidth, h, chartWidth, h, esc(c.title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, chartWidth, h)
	for i, p := range c.panels {
		fmt.Fprintf(&b, `<g transform="translate(0 %d)">`, i*panelHeight)
		p.render(&b)
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped labels only
}

func (p panel) hasData() bool {
	for _, s := range p.series {
		for _, pt := range s.pts {
			if finite(pt.x) && finite(pt.y) {
				return true
			}
		}
	}
	return false
}

func (p panel) render(b *strings.Builder) {
	left, top := float64(marginLeft), float64(marginTop)
	w := float64(chartWidth - marginLeft - marginRight)
	h := float64(panelHeight - marginTop - marginBottom)
	fmt.Fprintf(b, `<text x="%d" y="20" font-size="15" font-weight="bold" fill="#222">%s</text>`, marginLeft, esc(p.title))
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#888" stroke-width="1"/>`, f(left), f(top), f(w), f(h))

	if !p.hasData() {
		note := p.noData
		if note == "" {
			note = "no data"
		}
		fmt.Fprintf(b, `<text class="no-data" x="%s" y="%s" text-anchor="middle" font-size="18" fill="#777">%s</text>`,
			f(left+w/2), f(top+h/2), esc(note))
		p.axisLabels(b, left, top, w, h)
		return
	}
	x0, x1, y0, y1 := p.x0, p.x1, p.y0, p.y1
	if !(x1 > x0) {
		x1 = x0 + 1
	}
	if !(y1 > y0) {
		y1 = y0 + 1
	}
	sx := func(x float64) float64 { return left + (clamp(x, x0, x1)-x0)/(x1-x0)*w }
	sy := func(y float64) float64 { return top + h - (clamp(y, y0, y1)-y0)/(y1-y0)*h }

	xt := p.xTicks
	if xt == nil {
		xt = linearTicks(x0, x1, 10)
	}
	yt := p.yTicks
	if yt == nil {
		yt = linearTicks(y0, y1, 5)
	}
	for _, t := range xt {
		if t.v < x0 || t.v > x1 {
			continue
		}
		x := sx(t.v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e3e3e3" stroke-width="1"/>`, f(x), f(top), f(x), f(top+h))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="12" fill="#444">%s</text>`, f(x), f(top+h+16), esc(t.label))
	}
	for _, t := range yt {
		if t.v < y0 || t.v > y1 {
			continue
		}
		y := sy(t.v)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e3e3e3" stroke-width="1"/>`, f(left), f(y), f(left+w), f(y))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" font-size="12" fill="#444">%s</text>`, f(left-6), f(y+4), esc(t.label))
	}
	p.axisLabels(b, left, top, w, h)

	for _, s := range p.series {
		var d strings.Builder
		pen := false
		for _, pt := range s.pts {
			if !finite(pt.x) || !finite(pt.y) {
				pen = false
				continue
			}
			if pen {
				d.WriteString(" L")
			} else {
				if d.Len() > 0 {
					d.WriteByte(' ')
				}
				d.WriteString("M")
			}
			d.WriteString(f(sx(pt.x)) + " " + f(sy(pt.y)))
			pen = true
		}
		if d.Len() == 0 {
			continue
		}
		fmt.Fprintf(b, `<path data-series="%s" d="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" stroke-linecap="round"/>`,
			esc(s.name), d.String(), s.color, f(strokeWidth))
	}
	// Legend, top right: a short stroke of each colour and the name.
	x := left + w - 10
	for i := len(p.series) - 1; i >= 0; i-- {
		s := p.series[i]
		tw := 7.5*float64(len(s.name)) + 10
		x -= tw
		fmt.Fprintf(b, `<text x="%s" y="20" font-size="13" fill="#222">%s</text>`, f(x), esc(s.name))
		x -= 24
		fmt.Fprintf(b, `<line x1="%s" y1="16" x2="%s" y2="16" stroke="%s" stroke-width="3"/>`, f(x), f(x+18), s.color)
		x -= 14
	}
}

func (p panel) axisLabels(b *strings.Builder, left, top, w, h float64) {
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="13" fill="#222">%s</text>`, f(left+w/2), f(top+h+38), esc(p.xLabel))
	cy := top + h/2
	fmt.Fprintf(b, `<text x="18" y="%s" text-anchor="middle" font-size="13" fill="#222" transform="rotate(-90 18 %s)">%s</text>`, f(cy), f(cy), esc(p.yLabel))
}

// linearTicks returns about n ticks at a 1-2-5 step covering [lo, hi].
func linearTicks(lo, hi float64, n int) []tick {
	step := niceStep((hi - lo) / float64(n))
	if !(step > 0) || !finite(step) {
		return nil
	}
	var ts []tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9 && len(ts) < 100; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ts = append(ts, tick{v: v, label: short(v)})
	}
	return ts
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) || !finite(raw) {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch m := raw / p; {
	case m <= 1:
		return p
	case m <= 2:
		return 2 * p
	case m <= 5:
		return 5 * p
	default:
		return 10 * p
	}
}

// niceMax is the upper bound of a linear axis starting at 0 that holds v:
// v rounded up to a multiple of its tick step.
func niceMax(v float64) float64 {
	if !(v > 0) || !finite(v) {
		return 1
	}
	step := niceStep(v / 5)
	return math.Ceil(v/step*(1-1e-12)) * step
}

// percentileX maps a percentile (0-100) to the latency chart's x axis:
// log10(1/(1-p)), so 0 → 0, 90 → 1, 99 → 2, 99.9 → 3 (HdrHistogram's plot).
// 100 maps to +Inf; the caller clamps it to the axis end.
func percentileX(p float64) float64 {
	q := 1 - p/100
	if q <= 0 {
		return math.Inf(1)
	}
	if q >= 1 {
		return 0
	}
	return -math.Log10(q)
}

// percentileTicks labels the x axis 0, 90, 99, 99.9, … up to n nines.
func percentileTicks(n int) []tick {
	ts := []tick{{0, "0%"}}
	for i := 1; i <= n; i++ {
		label := "90"
		if i >= 2 {
			label = "99"
		}
		if i >= 3 {
			label += "." + strings.Repeat("9", i-2)
		}
		ts = append(ts, tick{float64(i), label + "%"})
	}
	return ts
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// f formats an SVG coordinate.
func f(v float64) string {
	if !finite(v) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// short formats an axis tick: 1500000 → 1.5M, 2500 → 2.5k, 0.25 → 0.25.
func short(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', -1, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	default:
		return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
	}
}

func esc(s string) string { return template.HTMLEscapeString(s) }
