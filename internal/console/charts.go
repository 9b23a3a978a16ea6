package console

import (
	"math"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/internal/humanize"
	"github.com/gitfleet/gitfleet/internal/series"
)

// The overview's charts: the figures of the full node's series (package
// series) over a day or a week, drawn on the server as SVG paths, no
// script needed.

// A chart's size in its SVG's units; the page scales it to its box.
const (
	chartWidth  = 288
	chartHeight = 48
)

// ChartPoints is how many points a chart draws at most: a day's has one
// for 5 minutes of the series' minutes, a week's one an hour. The Source
// gives the figures over a range in as many (series.Series.Window).
const ChartPoints = 288

// chart is one figure over a range.
type chart struct {
	ID, Title string
	W, H      int
	// Path draws the figure: an area from the bottom for what is
	// counted, a line for what is sampled; Line tells which.
	Path string
	Line bool
	// Dot marks a line's last point, which a step alone hardly shows after
	// a start.
	Dot string
	// Top is the figure at the chart's top; Summary says the figure over
	// the range (a total, or the last sample).
	Top, Summary string
}

// trends is what the overview draws over its range.
type trends struct {
	Range, Label    string // "day", "last day"
	Other, OtherURL string // the other range's label and page
	From, To        time.Time
	Point           string // what one point of a chart covers
	Fresh           chart
	FreshNow        string // the share current now
	FreshLowest     string // the lowest share over the range ("": none known)
	Charts          []chart
}

// ranges are the overview's ranges, by their name in ?range=.
var ranges = map[string]series.Range{"day": series.Day, "week": series.Week}

// trendsOf draws the overview's charts from the points of r (oldest
// first, up to now; each of one or more of its buckets) and the share
// current now.
func trendsOf(r series.Range, pts []series.Bucket, current, total int) trends {
	t := trends{Range: "day", Label: "last day", Other: "last week", OtherURL: "/?range=week", Point: "5 minutes"}
	if r == series.Week {
		t = trends{Range: "week", Label: "last week", Other: "last day", OtherURL: "/", Point: "an hour"}
	}
	if len(pts) > 0 {
		per := (r.Len() + len(pts) - 1) / len(pts)
		t.From, t.To = pts[0].Start, pts[len(pts)-1].Start.Add(r.Step()*time.Duration(per))
	}

	share := make([]float64, len(pts))
	lowest := math.Inf(1)
	for i, p := range pts {
		share[i] = math.NaN()
		if i == len(pts)-1 && total > 0 { // the last point is now
			p.Current, p.Total, p.Sampled = uint64(current), uint64(total), true
		}
		if p.Sampled && p.Total > 0 {
			share[i] = float64(p.Current) / float64(p.Total)
			lowest = min(lowest, share[i])
		}
	}
	t.FreshNow = percent(current, total)
	if !math.IsInf(lowest, 1) {
		t.FreshLowest = strconv.FormatFloat(100*lowest, 'f', 1, 64) + "%"
	}
	t.Fresh = chart{ID: "fresh-chart", Title: "share of repositories current", W: chartWidth, H: 60, Line: true, Top: "100%",
		Path: linePath(share, 1, chartWidth, 60), Dot: lastDot(share, 1, chartWidth, 60), Summary: t.FreshNow + " now"}

	figure := func(get func(series.Bucket) uint64) []float64 {
		v := make([]float64, len(pts))
		for i, p := range pts {
			v[i] = float64(get(p))
		}
		return v
	}
	// counted draws what is counted: its top and its total written by top
	// and sum.
	counted := func(id, title string, get func(series.Bucket) uint64, top, sum func(uint64) string) chart {
		v := figure(get)
		most := maxOf(v)
		return chart{ID: id, Title: title, W: chartWidth, H: chartHeight, Path: areaPath(v, most, chartWidth, chartHeight),
			Top: top(uint64(most)), Summary: sum(uint64(sumOf(v)))}
	}
	plural := func(one, many string) func(uint64) string {
		return func(n uint64) string { return humanize.Plural(n, one, many) }
	}
	count := humanize.Count[uint64]
	checks := counted("trend-checks", "checks of upstreams", func(b series.Bucket) uint64 { return b.Checks }, count, plural("check", "checks"))
	fetches := counted("trend-fetches", "fetches that found a change", func(b series.Bucket) uint64 { return b.Fetches }, count,
		plural("fetch", "fetches"))
	failures := counted("trend-failures", "checks that failed", func(b series.Bucket) uint64 { return b.Failures }, count,
		plural("failure", "failures"))
	served := counted("trend-served", "git served to the public", func(b series.Bucket) uint64 { return b.ServedBytes }, humanize.Bytes,
		humanize.Bytes)

	disk := figure(func(b series.Bucket) uint64 { return b.DiskUsed })
	lastDisk := -1.0
	for i, p := range pts {
		if !p.Sampled {
			disk[i] = math.NaN()
			continue
		}
		lastDisk = disk[i]
	}
	diskTop := maxOf(disk)
	du := chart{ID: "trend-disk", Title: "disk used", W: chartWidth, H: chartHeight, Line: true, Top: humanize.Bytes(uint64(diskTop)),
		Path: linePath(disk, diskTop, chartWidth, chartHeight), Dot: lastDot(disk, diskTop, chartWidth, chartHeight), Summary: "not sampled yet"}
	if lastDisk >= 0 {
		du.Summary = humanize.Bytes(uint64(lastDisk)) + " at the last sample"
	}
	t.Charts = []chart{checks, fetches, failures, served, du}
	return t
}

// maxOf is the largest of v that is a number (0 for none).
func maxOf(v []float64) float64 {
	top := 0.0
	for _, x := range v {
		if !math.IsNaN(x) {
			top = max(top, x)
		}
	}
	return top
}

func sumOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// areaPath draws v (one step a value, the width shared out) as an area
// from the bottom of a w by h box, top at the box's top ("": nothing to
// draw).
func areaPath(v []float64, top float64, w, h int) string {
	if len(v) == 0 || top <= 0 {
		return ""
	}
	b := make([]byte, 0, 16*len(v))
	b = append(b, 'M', '0', ' ')
	b = strconv.AppendInt(b, int64(h), 10)
	for i, x := range v {
		b = appendCoord(append(b, 'V'), float64(h)-x/top*float64(h))
		b = appendCoord(append(b, 'H'), float64(i+1)*float64(w)/float64(len(v)))
	}
	b = strconv.AppendInt(append(b, 'V'), int64(h), 10)
	return string(append(b, 'Z'))
}

// linePath draws v as steps, one a value, with a gap where v is NaN ("":
// nothing to draw).
func linePath(v []float64, top float64, w, h int) string {
	if top <= 0 {
		return ""
	}
	b := make([]byte, 0, 16*len(v))
	drawing := false
	for i, x := range v {
		if math.IsNaN(x) {
			drawing = false
			continue
		}
		y := float64(h) - min(x/top, 1)*float64(h)
		if drawing {
			b = appendCoord(append(b, 'V'), y)
		} else {
			b = appendCoord(append(b, 'M'), float64(i)*float64(w)/float64(len(v)))
			b = appendCoord(append(b, ' '), y)
			drawing = true
		}
		b = appendCoord(append(b, 'H'), float64(i+1)*float64(w)/float64(len(v)))
	}
	return string(b)
}

// lastDot marks the last point of v that is a number, at the end of its
// step, as a line of no length that a round cap draws as a dot ("": none).
func lastDot(v []float64, top float64, w, h int) string {
	for i := len(v) - 1; i >= 0 && top > 0; i-- {
		if !math.IsNaN(v[i]) {
			x := float64(i+1)*float64(w)/float64(len(v)) - 0.5
			return "M" + coord(x) + " " + coord(float64(h)-min(v[i]/top, 1)*float64(h)) + "h0"
		}
	}
	return ""
}

// coord writes a coordinate to a tenth of a unit.
func coord(x float64) string { return string(appendCoord(nil, x)) }

func appendCoord(b []byte, x float64) []byte {
	return strconv.AppendFloat(b, math.Round(x*10)/10, 'f', -1, 64)
}
