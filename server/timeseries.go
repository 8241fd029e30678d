package server

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The node's recent statement rate and latency, for the overview page's
// charts and /api/timeseries: every loadEvery the admin loop reads the
// statement latency histogram (metrics.go) and keeps, for the interval
// since the previous reading, the statements per second, their mean and
// their 99th percentile (interpolated within the histogram's bucket, as
// Prometheus's histogram_quantile does). seriesLen points are kept: ten
// minutes at one a second. Nothing is stored: a restarted node starts an
// empty series.

const seriesLen = 600

// SeriesPoint is one interval of /api/timeseries.
type SeriesPoint struct {
	At     time.Time `json:"at"`
	QPS    float64   `json:"qps"`
	MeanMs float64   `json:"mean_ms"`
	P99Ms  float64   `json:"p99_ms"`
}

// histTotals are the statement histogram's totals over its labels.
type histTotals struct {
	count   uint64
	sum     float64
	buckets []uint64 // cumulative, per bound of latencyBuckets
}

type series struct {
	mu     sync.Mutex
	last   histTotals
	lastAt time.Time
	points []SeriesPoint
}

// totals reads h's totals over every label.
func totals(h *prometheus.HistogramVec) histTotals {
	t := histTotals{buckets: make([]uint64, len(latencyBuckets))}
	ch := make(chan prometheus.Metric, 16)
	go func() {
		h.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.GetHistogram() == nil {
			continue
		}
		hist := d.GetHistogram()
		t.count += hist.GetSampleCount()
		t.sum += hist.GetSampleSum()
		for i, b := range hist.GetBucket() {
			if i < len(t.buckets) {
				t.buckets[i] += b.GetCumulativeCount()
			}
		}
	}
	return t
}

// sample records the interval since the previous sample.
func (m *nodeMetrics) sample(now time.Time) {
	cur := totals(m.statements)
	s := &m.series
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastAt.IsZero() && now.After(s.lastAt) && cur.count >= s.last.count {
		p := SeriesPoint{At: now}
		n := cur.count - s.last.count
		p.QPS = float64(n) / now.Sub(s.lastAt).Seconds()
		if n > 0 {
			p.MeanMs = (cur.sum - s.last.sum) / float64(n) * 1000
			delta := make([]uint64, len(cur.buckets))
			for i := range delta {
				delta[i] = cur.buckets[i] - s.last.buckets[i]
			}
			p.P99Ms = quantile(0.99, n, delta) * 1000
		}
		s.points = append(s.points, p)
		if len(s.points) > seriesLen {
			s.points = s.points[len(s.points)-seriesLen:]
		}
	}
	s.last, s.lastAt = cur, now
}

// quantile is the q-quantile, in seconds, of n observations whose
// cumulative counts per bound of latencyBuckets are cum, interpolated
// linearly within the bucket it falls in; past the last bound it is the
// last bound.
func quantile(q float64, n uint64, cum []uint64) float64 {
	rank := q * float64(n)
	prevCum, prevBound := 0.0, 0.0
	for i, bound := range latencyBuckets {
		c := float64(cum[i])
		if c >= rank {
			if c == prevCum {
				return bound
			}
			return prevBound + (bound-prevBound)*(rank-prevCum)/(c-prevCum)
		}
		prevCum, prevBound = c, bound
	}
	return latencyBuckets[len(latencyBuckets)-1]
}

// points returns the series, oldest first.
func (m *nodeMetrics) points() []SeriesPoint {
	m.series.mu.Lock()
	defer m.series.mu.Unlock()
	return append([]SeriesPoint{}, m.series.points...)
}

// chart is one line chart of the overview page: an SVG polyline's
// points in a chartW × chartH box, and the largest value, which the top
// of the box stands for.
type chart struct {
	Points string
	Max    float64
	Last   float64
}

const chartW, chartH = 600, 120

// lineChart scales v over pts into a chart; the x axis is the series'
// capacity, newest at the right edge.
func lineChart(pts []SeriesPoint, v func(SeriesPoint) float64) chart {
	var c chart
	for _, p := range pts {
		c.Max = max(c.Max, v(p))
	}
	if len(pts) > 0 {
		c.Last = v(pts[len(pts)-1])
	}
	top := c.Max
	if top == 0 {
		top = 1
	}
	var b strings.Builder
	for i, p := range pts {
		x := float64(chartW) * float64(seriesLen-len(pts)+i) / float64(seriesLen-1)
		y := float64(chartH) - float64(chartH-4)*v(p)/top
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	c.Points = b.String()
	return c
}
